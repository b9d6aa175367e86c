"""A durable worker process for the tests: builds the services, launches DBOS, serves
until SIGTERM. Every model call and tool run appends a line to `<log>` (O_APPEND), so the
test can count them across processes; `--hang WHAT` makes the first matching call (across
all workers, via an O_EXCL flag file) log `hang WHAT` and block until the process is killed.

    python worker.py --db URL --app APP --executor ID --log FILE [--tool-queue]
                     [--hang model:1|lookup:a|charge] [--recover ID ...]
"""

from __future__ import annotations

import argparse
import hashlib
import os
import signal
import sys
import threading
import time
from pathlib import Path

from dbos import DBOS

from toolweave import AiMessage, ModelRetry, Retry, ScriptedChatModel, tool
from toolweave.chat.request import ChatRequest
from toolweave.context import ToolContext
from toolweave.durable import DurableToolService, QueueSpec, UnknownOutcome, launch, shutdown
from toolweave.execution.requests import ToolExecutionRequest
from toolweave.execution.results import ToolExecutionResult
from toolweave.policies import UsageLimits, around_tool_call
from toolweave.service import ToolService
from toolweave.tools.guardrails import (
    Allow,
    Halt,
    Reject,
    Replace,
    input_guardrail,
    output_guardrail,
)
from toolweave.toolsets import FunctionToolset, StepContext

CONVERSATIONS = "tw-conversations"
TOOLS = "tw-tools"

_args: argparse.Namespace


def log(line: str) -> None:
    """Append one line to the shared log (atomic for short lines with O_APPEND)."""
    fd = os.open(_args.log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def maybe_hang(what: str) -> None:
    """Block forever if this is the configured hang point and no one has hung yet."""
    if _args.hang != what:
        return
    try:
        fd = os.open(_args.log + ".hang", os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return
    os.close(fd)
    log(f"hang {what} {os.getpid()}")
    while True:
        time.sleep(3600)


@tool(idempotent=True)
def lookup(tag: str, key: str) -> str:
    """Look a key up (idempotent)."""
    log(f"lookup {tag} {key}")
    maybe_hang(f"lookup:{key}")
    return f"value-of-{key}"


@tool
def charge(tag: str, amount: int) -> str:
    """Charge an amount (not idempotent)."""
    log(f"charge {tag} {amount}")
    maybe_hang("charge")
    return f"charged {amount}"


@tool(requires_approval=True)
def pay(tag: str, to: str, amount: int) -> str:
    """Pay someone (needs a person's approval)."""
    log(f"pay {tag} {to} {amount}")
    return f"paid {amount} to {to}"


@tool(idempotent=True)
def crunch(tag: str, n: int, rounds: int) -> str:
    """CPU-bound work: `rounds` chained SHA-256 hashes."""
    digest = f"{tag}-{n}".encode()
    for _ in range(rounds):
        digest = hashlib.sha256(digest).digest()
    log(f"crunch {tag} {n} {DBOS.executor_id}")
    return digest.hex()[:16]


@tool(idempotent=True, retry=Retry(attempts=4, backoff=0.01, max_delay=0.02, on=(ConnectionError,)))
def fetch(tag: str, key: str) -> str:
    """Fetch a key from a flaky service: its first two attempts (across every worker) fail
    with a connection error."""
    attempt = sum(
        1 for line in Path(_args.log).read_text().splitlines() if line.startswith(f"fetch {tag} ")
    )
    log(f"fetch {tag} {key} {attempt + 1}")
    if attempt < 2:
        raise ConnectionError(f"connection reset (attempt {attempt + 1})")
    return f"fetched {key} on attempt {attempt + 1}"


@tool
def pick(tag: str, n: int) -> str:
    """Pick an even number (an odd one asks the model to try again)."""
    log(f"pick {tag} {n}")
    if n % 2:
        raise ModelRetry(f"{n} is odd: pick an even number")
    return f"picked {n}"


def _call(name: str, cid: str, **args: object) -> ToolExecutionRequest:
    import json

    return ToolExecutionRequest(id=cid, name=name, arguments=json.dumps(args))


def script(request: ChatRequest) -> AiMessage:
    """Deterministic model: the tag is the first user message; the turn is the number of
    AI messages so far. `kill-*`: [lookup a, lookup b] → [charge, lookup c] → answer.
    `scale-*-R`: four `crunch` calls of R rounds → answer. `approve-*`: [lookup, pay (needs
    approval)] → answer. `again-*`: pay 1 (call p1) → pay 2 (call p1 again) → answer."""
    tag = request.messages[0].text or ""  # type: ignore[union-attr]
    turn = sum(1 for m in request.messages if m.type == "ai")
    log(f"model {tag} {turn}")
    maybe_hang(f"model:{turn}")
    if tag.startswith("flaky-"):  # one call retried on transient failures, then two turns
        if turn == 0:
            return AiMessage(
                tool_execution_requests=[
                    _call("fetch", "f0", tag=tag, key="k"),
                    _call("pick", "p0", tag=tag, n=1),
                ]
            )
        if turn == 1:
            return AiMessage(tool_execution_requests=[_call("lookup", "f1", tag=tag, key="z")])
        results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
        return AiMessage(f"{tag} finished: " + " | ".join(results))
    if tag.startswith("nest-"):  # the helper (a conversation as a tool) pays, once approved
        if turn == 0:
            return AiMessage(tool_execution_requests=[_call("helper", "h1", task=f"inner-{tag}")])
        results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
        return AiMessage(f"{tag} finished: " + " | ".join(results))
    if tag.startswith("inner-"):  # the helper's own conversation
        if turn == 0:
            return AiMessage(
                tool_execution_requests=[_call("pay", "p1", tag=tag, to="Ann", amount=7)]
            )
        results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
        return AiMessage(f"{tag} done: " + " | ".join(results))
    if tag.startswith("again-"):  # two pauses, the model reusing the call id p1
        if turn < 2:
            return AiMessage(
                tool_execution_requests=[_call("pay", "p1", tag=tag, to="Bob", amount=turn + 1)]
            )
        results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
        return AiMessage(f"{tag} finished: " + " | ".join(results))
    if tag.startswith("approve-"):
        if turn == 0:
            return AiMessage(
                tool_execution_requests=[
                    _call("lookup", "a0", tag=tag, key="balance"),
                    _call("pay", "p1", tag=tag, to="Bob", amount=30),
                ]
            )
        results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
        return AiMessage(f"{tag} finished: " + " | ".join(results))
    if tag.startswith("scale-"):
        if turn == 0:
            rounds = int(tag.rsplit("-", 1)[1])
            return AiMessage(
                tool_execution_requests=[
                    _call("crunch", f"x{i}", tag=tag, n=i, rounds=rounds) for i in range(4)
                ]
            )
        return AiMessage(f"{tag} done")
    if turn == 0:
        return AiMessage(
            tool_execution_requests=[
                _call("lookup", "t0a", tag=tag, key="a"),
                _call("lookup", "t0b", tag=tag, key="b"),
            ]
        )
    if turn == 1:
        return AiMessage(
            tool_execution_requests=[
                _call("charge", "t1charge", tag=tag, amount=42),
                _call("lookup", "t1c", tag=tag, key="c"),
            ]
        )
    results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
    return AiMessage(f"{tag} finished: " + " | ".join(results))


def unknown(info: UnknownOutcome) -> None:
    log(f"unknown {info.request.arguments} {info.request.id} {info.started_by}")


def reconcile(info: UnknownOutcome) -> str:
    log(f"reconcile {info.request.id}")
    return "charged 42 (confirmed by reconciliation)"


async def _hooked(call: ToolExecutionRequest, call_tool: object, ctx: object) -> object:
    """An around-tool-call hook (logged: it runs inside the call's recorded step, once)."""
    log(f"hooked {call.id}")
    return await call_tool(call)  # type: ignore[operator]


def build(tool_queue: bool) -> None:
    """The services every worker registers, identically."""
    tq = QueueSpec(TOOLS, worker_concurrency=2, polling_interval=0.05) if tool_queue else None
    cq = QueueSpec(CONVERSATIONS, worker_concurrency=50, polling_interval=0.05)
    # the `kill-*` script under a budget of three tool calls (docs/policies.md): the second
    # round (charge, lookup c) would make four; answered once, or stopped
    for name, exceeded in (("budget", "answer"), ("budget-strict", "raise")):
        DurableToolService(
            name,
            model=ScriptedChatModel(script),
            tool_queue=tq,
            conversation_queue=cq,
            on_unknown_outcome=unknown,
            usage_limits=UsageLimits(tool_calls=3, on_exceeded=exceeded),  # type: ignore[arg-type]
            hooks=[around_tool_call(_hooked)],
        ).tools(lookup, charge)
    DurableToolService(
        "shop",
        model=ScriptedChatModel(script),
        tool_queue=tq,
        conversation_queue=cq,
        on_unknown_outcome=unknown,
    ).tools(lookup, charge, crunch)
    # a conversation as a tool (docs/approvals.md): the helper's own conversation pays
    helper = (
        ToolService()
        .tools(pay)
        .as_tool(ScriptedChatModel(script), name="helper", description="Pays people.")
    )
    DurableToolService(
        "nest", model=ScriptedChatModel(script), tool_queue=tq, conversation_queue=cq
    ).tools(helper)
    DurableToolService(
        "flaky",
        model=ScriptedChatModel(script),
        tool_queue=tq,
        conversation_queue=cq,
    ).tools(fetch, lookup, pick)
    DurableToolService(
        "bank",
        model=ScriptedChatModel(script),
        tool_queue=tq,
        conversation_queue=cq,
    ).tools(lookup, pay)
    DurableToolService(
        "reconciling",
        model=ScriptedChatModel(script),
        tool_queue=tq,
        conversation_queue=cq,
        on_unknown_outcome=unknown,
        reconcilers={"charge": reconcile},
    ).tools(lookup, charge, crunch)
    # the `kill-*` script with guardrails (docs/policies.md): b rejected, results shouted
    DurableToolService(
        "guarded",
        model=ScriptedChatModel(script),
        tool_queue=tq,
        conversation_queue=cq,
        on_unknown_outcome=unknown,
        guardrails=[_off_limits, _shout],
    ).tools(lookup, charge)
    # the `kill-*` tools offered by toolsets, not registered with the service
    DurableToolService(
        "kit",
        model=ScriptedChatModel(script),
        tool_queue=tq,
        conversation_queue=cq,
        on_unknown_outcome=unknown,
        toolsets=[
            FunctionToolset(lookup, label="lookups"),
            # a per-step choice, asked again on replay: charge is offered from round 1 on
            FunctionToolset(charge).wrapped(_calm).filtered(_from_round_one),
        ],
    ).tools(crunch)


def _from_round_one(ctx: StepContext, card: object) -> bool:
    return ctx.round >= 1


@input_guardrail
def _off_limits(arguments: dict[str, object], ctx: ToolContext) -> Allow | Reject | Halt:
    """Rejects `lookup` of key b, halts on key c in `guard-halt*` conversations (logged, so
    decisions are counted across workers)."""
    log(f"guard-in {arguments.get('tag')} {ctx.request_id}")
    if arguments.get("key") == "b":
        return Reject("key b is off limits")
    if str(arguments.get("tag")).startswith("guard-halt") and arguments.get("key") == "c":
        return Halt("key c is classified")
    return Allow()


@output_guardrail
def _shout(result: ToolExecutionResult, ctx: ToolContext) -> Replace:
    log(f"guard-out {ctx.request_id}")
    return Replace(result.text.upper())


async def _calm(request: ToolExecutionRequest, call_next: object) -> object:
    """A `.wrapped` transform around the toolset's calls (logged, so it is counted too)."""
    log(f"wrapped {request.id}")
    return await call_next(request)  # type: ignore[operator]


def main() -> None:
    global _args
    parser = argparse.ArgumentParser()
    parser.add_argument("--db", required=True)
    parser.add_argument("--app", required=True)
    parser.add_argument("--executor", required=True)
    parser.add_argument("--log", required=True)
    parser.add_argument("--tool-queue", action="store_true")
    parser.add_argument("--hang", default=None)
    parser.add_argument("--recover", nargs="*", default=[])
    _args = parser.parse_args()
    Path(_args.log).touch()
    build(_args.tool_queue)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    launch(
        _args.db,
        app_name=_args.app,
        executor_id=_args.executor,
        application_version="tests-1",
        recover_executors=_args.recover,
        log_level="WARNING",
    )
    log(f"ready {_args.executor} {os.getpid()}")
    stop.wait()
    shutdown()
    sys.exit(0)


if __name__ == "__main__":
    main()
