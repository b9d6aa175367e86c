"""A durable conversation waiting for approval survives its worker: it is paused at a call
that needs approval, the worker is SIGKILLed, a new worker recovers it, and
`toolweave runs approve` (the real command) lets it go on. The call runs exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from toolweave.chat.messages import ToolExecutionResultMessage
from toolweave.durable import DecisionConflictError
from toolweave.errors import ToolArgumentsError, ToolweaveError
from toolweave.service.approvals import (
    Approve,
    DeferredResult,
    Deny,
    InvalidConversationStateError,
)

from .conftest import REPO, Workers
from .test_kill import assert_valid_history


def wait_pending(client: Any, cid: str, timeout: float = 90.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = client.pending(cid)
        if waiting:
            return waiting
        time.sleep(0.1)
    raise TimeoutError(f"conversation {cid} never waited for a decision")


def runs(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolweave", "runs", *args, "--db", db, "--app", "twtest"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


@pytest.mark.parametrize("tool_queue", [False, True], ids=["in-process-tools", "queued-tools"])
def test_waiting_for_approval_survives_a_killed_worker(
    workers: Workers, client_factory: Any, db_url: str, tool_queue: bool
) -> None:
    tag = "approve-kill"
    cid = "conv-approve"
    workers.start("w1", tool_queue=tool_queue)
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    ((waiting_cid, call),) = wait_pending(client, cid)
    assert (waiting_cid, call.id, call.tool_name, call.reason) == (cid, "p1", "pay", "approval")
    assert workers.log.matching(f"lookup {tag} ") and not workers.log.matching(f"pay {tag} ")

    listed = runs("pending", "--json", db=db_url)
    assert listed.returncode == 0, listed.stderr
    assert [(c["conversation_id"], c["id"]) for c in json.loads(listed.stdout)] == [(cid, "p1")]

    workers.kill("w1")
    workers.start("w2", tool_queue=tool_queue, recover=["w1"])
    wait_pending(client, cid)
    with pytest.raises(ToolweaveError, match="no call 'nope' waiting"):
        client.decide(cid, "nope", object())
    approved = runs("approve", cid, "p1", db=db_url)
    assert approved.returncode == 0, approved.stderr
    result = client.result(cid, timeout=120)

    assert result.text == f"{tag} finished: value-of-balance | paid 30 to Bob"
    assert_valid_history(result.messages)
    assert len(workers.log.matching(f"pay {tag} ")) == 1  # exactly once, across both workers
    assert len(workers.log.matching(f"lookup {tag} ")) == 1
    assert client.pending(cid) == []
    pay = next(
        m for m in result.messages if isinstance(m, ToolExecutionResultMessage) and m.id == "p1"
    )
    assert not pay.is_error


def test_deny_from_the_command_line(workers: Workers, client_factory: Any, db_url: str) -> None:
    tag = "approve-deny"
    cid = "conv-deny"
    workers.start("w1")
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    wait_pending(client, cid)
    denied = runs("deny", cid, "p1", "--message", "Bob is not a payee.", db=db_url)
    assert denied.returncode == 0, denied.stderr
    result = client.result(cid, timeout=120)
    assert result.text == f"{tag} finished: value-of-balance | Bob is not a payee."
    assert workers.log.matching(f"pay {tag} ") == []
    late = runs("approve", cid, "p1", db=db_url)  # the call was denied: refused, not dropped
    assert late.returncode == 1, late.stdout
    assert "already decided by toolweave runs deny" in late.stderr
    assert "denied ('Bob is not a payee.')" in late.stderr
    missing = runs("approve", cid, "nope", db=db_url)
    assert missing.returncode == 1 and "no call 'nope' waiting" in missing.stderr


def test_first_decision_wins_while_the_worker_is_dead(
    workers: Workers, client_factory: Any, db_url: str
) -> None:
    """approve, then deny, while no worker runs the conversation: the deny is refused (it
    used to exit 0 and be dropped, the approval's message holding its idempotency key); the
    same approval again is a no-op; the recovered conversation pays once."""
    tag = "approve-first-wins"
    cid = "conv-first-wins"
    workers.start("w1")
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    wait_pending(client, cid)
    workers.kill("w1")

    approved = runs("approve", cid, "p1", db=db_url)
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout) == {
        "conversation_id": cid, "call_id": "p1", "decision": "approve"
    }  # fmt: skip
    denied = runs("deny", cid, "p1", db=db_url)
    assert denied.returncode == 1, denied.stdout
    assert denied.stdout == ""
    assert "'p1' of conversation 'conv-first-wins' was already decided by toolweave runs " \
        "approve" in denied.stderr  # fmt: skip
    assert ": approved; the first decision stands" in denied.stderr
    with pytest.raises(DecisionConflictError) as info:
        client.decide(cid, "p1", Deny("no"))
    assert isinstance(info.value.decided, Approve) and info.value.decided_at
    assert info.value.decided_by and info.value.decided_by.startswith("toolweave runs approve")
    again = runs("approve", cid, "p1", db=db_url)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["repeat"] is True
    assert client.decide(cid, "p1", Approve()) is False
    with pytest.raises(DecisionConflictError):  # other arguments are another decision
        client.decide(cid, "p1", Approve({"tag": tag, "to": "Eve", "amount": 1}))

    workers.start("w2", recover=["w1"])
    result = client.result(cid, timeout=120)
    assert result.text == f"{tag} finished: value-of-balance | paid 30 to Bob"
    assert len(workers.log.matching(f"pay {tag} ")) == 1
    late = runs("deny", cid, "p1", db=db_url)  # finished: still refused, with what was decided
    assert late.returncode == 1 and "already decided" in late.stderr
    assert runs("approve", cid, "p1", db=db_url).returncode == 0  # the same again: a no-op


def test_two_commands_at_once_exactly_one_wins(
    workers: Workers, client_factory: Any, db_url: str
) -> None:
    """`runs approve` and `runs deny` started together, in separate processes, while no
    worker consumes either (both see the call waiting): exactly one succeeds, the other is
    refused, and the recovered conversation follows the one that won."""
    tag = "approve-race"
    cid = "conv-race"
    workers.start("w1")
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    wait_pending(client, cid)
    workers.kill("w1")
    base = [sys.executable, "-m", "toolweave", "runs"]
    tail = ["--db", db_url, "--app", "twtest"]
    procs = {
        kind: subprocess.Popen(
            [*base, kind, cid, "p1", *tail],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for kind in ("approve", "deny")
    }
    outcomes = {kind: (p.wait(timeout=120), *p.communicate()) for kind, p in procs.items()}
    winners = [kind for kind, (rc, _, _) in outcomes.items() if rc == 0]
    assert len(winners) == 1, outcomes
    (loser,) = set(outcomes) - set(winners)
    assert outcomes[loser][0] == 1 and "already decided" in outcomes[loser][2], outcomes
    workers.start("w2", recover=["w1"])
    result = client.result(cid, timeout=120)
    paid = workers.log.matching(f"pay {tag} ")
    if winners == ["approve"]:
        assert (
            len(paid) == 1 and result.text == f"{tag} finished: value-of-balance | paid 30 to Bob"
        )
    else:
        assert paid == [] and result.text is not None and "did not approve" in result.text


def test_decisions_that_do_not_fit_are_refused_before_anything_is_recorded(
    workers: Workers, client_factory: Any, db_url: str
) -> None:
    """A DeferredResult for an approval call, and arguments that are not a JSON object (the
    API and `--arguments '[1, 2]'`), are refused; the call can still be decided."""
    tag = "approve-misfit"
    cid = "conv-misfit"
    workers.start("w1")
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    wait_pending(client, cid)
    with pytest.raises(InvalidConversationStateError, match="waits for approval"):
        client.decide(cid, "p1", DeferredResult("paid"))
    with pytest.raises(ToolArgumentsError, match="must be a JSON object, not a list"):
        client.decide(cid, "p1", Approve("[1, 2]"))
    with pytest.raises(ToolArgumentsError, match="is not JSON"):
        client.decide(cid, "p1", Approve("{nope"))
    with pytest.raises(TypeError, match="give a dict or JSON text"):
        client.decide(cid, "p1", Approve([1, 2]))  # type: ignore[arg-type]
    listed = runs("approve", cid, "p1", "--arguments", "[1, 2]", db=db_url)
    assert listed.returncode == 2 and "must be a JSON object, not a list" in listed.stderr
    assert [c.id for _, c in client.pending(cid)] == ["p1"]
    denied = runs("deny", cid, "p1", "--message", "not today", db=db_url)
    assert denied.returncode == 0, denied.stderr
    result = client.result(cid, timeout=120)
    assert result.text == f"{tag} finished: value-of-balance | not today"
    assert workers.log.matching(f"pay {tag} ") == []


def test_a_call_id_reused_in_a_later_pause_is_decided_afresh(
    workers: Workers, client_factory: Any, db_url: str
) -> None:
    """Decisions are per pause: the model reuses call id p1 in its next turn; approving the
    first pause does not decide (or refuse) the second, which is denied."""
    tag = "again-reused-id"
    cid = "conv-reused-id"
    workers.start("w1")
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    ((_, first),) = wait_pending(client, cid)
    assert json.loads(first.arguments)["amount"] == 1
    assert runs("approve", cid, "p1", db=db_url).returncode == 0
    deadline = time.monotonic() + 90
    while True:  # the second pause, same call id, other arguments
        waiting = client.pending(cid)
        if waiting and json.loads(waiting[0][1].arguments)["amount"] == 2:
            break
        assert time.monotonic() < deadline, waiting
        time.sleep(0.1)
    denied = runs("deny", cid, "p1", "--message", "once is enough", db=db_url)
    assert denied.returncode == 0, denied.stderr
    result = client.result(cid, timeout=120)
    assert result.text == f"{tag} finished: paid 1 to Bob | once is enough"
    assert [line.split()[-1] for line in workers.log.matching(f"pay {tag} ")] == ["1"]
    late = runs("approve", cid, "p1", db=db_url)  # the latest pause's decision is the deny
    assert late.returncode == 1 and "denied ('once is enough')" in late.stderr


# a call of one pause runs at most once across processes (issue 27, item 1) -------------------
_CLAIMS_SCRIPT = '''
import json, os, sys
from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, tool
from toolweave.durable import DurableToolService, launch, shutdown
from toolweave.service import Approve, CallAlreadyDecidedError, ChatCompleted, ConversationState, Deny

db, app, executor, folder, steps = sys.argv[1:6]
KEY = "the durable claims test signing secret"

@tool(requires_approval=True)
def pay(to: str) -> str:
    """Pay someone (needs approval)."""
    fd = os.open(os.path.join(folder, "pay.log"), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(fd, f"pay {to} {executor}\\n".encode())
    os.close(fd)
    return f"paid {to}"

service = DurableToolService("claims", model=ScriptedChatModel(["done"])).tools(pay)
launch(db, app_name=app, executor_id=executor, log_level="WARNING")

def last(events):
    final = events[-1]
    assert isinstance(final, ChatCompleted)
    return final.result

def save(name, result):
    if result.state is not None:
        with open(os.path.join(folder, name), "w") as f:
            f.write(result.state.to_json(key=KEY))

try:
    for step in json.loads(steps):
        if step[0] == "pause":
            _, name, *tos = step
            calls = [ToolExecutionRequest(id=t, name="pay", arguments=json.dumps({"to": t})) for t in tos]
            model = ScriptedChatModel([AiMessage(tool_execution_requests=calls)])
            save(name, last(list(service.chat_stream(model, None, "pay them"))))
            print(json.dumps({"step": name, "ok": True}), flush=True)
            continue
        _, source, target, decisions = step
        with open(os.path.join(folder, source)) as f:
            state = ConversationState.from_json(f.read(), key=KEY)
        made = {k: Approve() if v == "approve" else Deny("no") for k, v in decisions.items()}
        try:
            result = last(list(service.chat_stream(ScriptedChatModel(["done"]), None, state, decisions=made)))
        except CallAlreadyDecidedError as e:
            print(json.dumps({"step": target, "ok": False, "call_id": e.call_id, "decided": e.decided,
                              "by": e.decided_by, "message": e.message}), flush=True)
            continue
        save(target, result)
        print(json.dumps({"step": target, "ok": True, "status": str(result.status)}), flush=True)
finally:
    shutdown()
'''


def _claims(tmp: Any, db: str, executor: str, *steps: list[Any], wait: bool = True) -> Any:
    """Run the claims script in a fresh process (its own memory: only the database is
    shared); its per-step outcomes, or the process when `wait` is False."""
    import os

    script = tmp / "claims.py"
    if not script.exists():
        script.write_text(_CLAIMS_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(REPO / "src"))
    args = [sys.executable, str(script), db, "twtest", executor, str(tmp), json.dumps(steps)]
    proc = subprocess.Popen(
        args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=tmp
    )
    if not wait:
        return proc
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    return {r["step"]: r for r in map(json.loads, out.splitlines())}


def test_a_call_of_one_pause_runs_at_most_once_across_processes(
    db_url: str, tmp_path: Any, client_factory: Any
) -> None:
    """States derived from one pause, resumed by different processes of a
    `DurableToolService` sharing the database: a payment approved in one is refused in the
    others (the claim is in the database, not in a process's memory), and so is a different
    decision; two processes racing to approve one call run it once."""
    first = _claims(
        tmp_path, db_url, "p1",
        ["pause", "S", "A", "B"],
        ["resume", "S", "S_A", {"A": "approve"}],
        ["pause", "T", "C"],
    )  # fmt: skip
    assert first["S"]["ok"] and first["S_A"]["ok"] and first["S_A"]["status"] == "pending"
    second = _claims(tmp_path, db_url, "p2", ["resume", "S", "S_B", {"B": "approve"}])
    assert second["S_B"]["ok"] and second["S_B"]["status"] == "pending"  # A still waits there

    third = _claims(
        tmp_path, db_url, "p3",
        ["resume", "S_A", "x1", {"B": "approve"}],
        ["resume", "S_B", "x2", {"A": "approve"}],
        ["resume", "S_B", "x3", {"A": "deny"}],
        ["resume", "S", "x4", {"A": "deny", "B": "deny"}],
    )  # fmt: skip
    assert (third["x1"]["ok"], third["x1"]["call_id"], third["x1"]["by"]) == (False, "B", "p2")
    assert "'B' (pay)" in third["x1"]["message"] and "by worker p2" in third["x1"]["message"]
    assert (third["x2"]["ok"], third["x2"]["call_id"], third["x2"]["by"]) == (False, "A", "p1")
    assert (third["x3"]["ok"], third["x3"]["decided"]) == (False, "approve")  # it ran
    assert not third["x4"]["ok"]

    racers = [
        _claims(tmp_path, db_url, f"r{i}", ["resume", "T", f"t{i}", {"C": "approve"}], wait=False)
        for i in range(2)
    ]
    outcomes = []
    for proc in racers:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        outcomes.append(json.loads(out.splitlines()[-1])["ok"])
    assert sorted(outcomes) == [False, True]

    pays = sorted(line.split()[1] for line in (tmp_path / "pay.log").read_text().splitlines())
    assert pays == ["A", "B", "C"]  # each payment ran once, across five processes
    assert client_factory().list() == []  # the claims are not conversations
