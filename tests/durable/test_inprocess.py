"""DurableToolService in this process (DBOS launched here, on its own database): the
loop's rules hold inside a workflow, ids are idempotent, failures are recorded."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from toolweave import AiMessage, ScriptedChatModel, tool
from toolweave.chat.request import ChatRequest
from toolweave.execution.requests import ToolExecutionRequest
from toolweave.service.handlers import RETHROW

calls: list[str] = []


@tool(idempotent=True)
def add(a: int, b: int) -> int:
    """Add two integers."""
    calls.append(f"add {a} {b}")
    return a + b


@tool(parallel_safe=False)
def write(text: str) -> str:
    """Write (a barrier, not idempotent)."""
    calls.append(f"write {text}")
    return "written"


@tool
def boom() -> str:
    """Always fails."""
    calls.append("boom")
    raise RuntimeError("kaput")


def script(request: ChatRequest) -> AiMessage:
    tag = request.messages[0].text or ""  # type: ignore[union-attr]
    turn = sum(1 for m in request.messages if m.type == "ai")
    if turn == 0 and tag == "fail":
        return AiMessage(tool_execution_requests=[ToolExecutionRequest(id="f", name="boom")])
    if turn == 0:
        return AiMessage(
            tool_execution_requests=[
                ToolExecutionRequest(id="1", name="add", arguments='{"a": 1, "b": 2}'),
                ToolExecutionRequest(id="2", name="write", arguments='{"text": "x"}'),
                ToolExecutionRequest(id="3", name="add", arguments='{"a": "no"}'),
                ToolExecutionRequest(id="4", name="nope"),
                ToolExecutionRequest(id="5", name="boom"),
            ]
        )
    results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
    return AiMessage(" | ".join(results))


@pytest.fixture(scope="module")
def services(postgres: Any) -> Iterator[tuple[Any, Any]]:
    from toolweave.durable import DurableToolService, launch, shutdown

    lenient = DurableToolService("inproc", model=ScriptedChatModel(script)).tools(add, write, boom)
    strict = DurableToolService(
        "inproc-strict", model=ScriptedChatModel(script), execution_error_handler=RETHROW
    ).tools(add, write, boom)
    launch(postgres.url_for("tw_inprocess"), app_name="twinproc", log_level="WARNING")
    try:
        yield lenient, strict
    finally:
        shutdown()


def test_round_rules_hold_and_ids_are_idempotent(services: tuple[Any, Any]) -> None:
    lenient, _ = services
    calls.clear()
    result = asyncio.run(lenient.arun("go", conversation_id="c-rules", timeout=60))
    texts = result.text.split(" | ")
    assert texts[0] == "3" and texts[1] == "written"
    assert "a" in texts[2] and "There is no tool named 'nope'" in texts[3] and texts[4] == "kaput"
    assert [m.id for m in result.messages if m.type == "tool_result"] == ["1", "2", "3", "4", "5"]
    assert sorted(calls) == ["add 1 2", "boom", "write x"]
    assert [e.result.is_error for e in result.tool_executions] == [False, False, True, True, True]
    # same id again: the recorded result, nothing runs
    again = asyncio.run(lenient.arun("different input", conversation_id="c-rules", timeout=60))
    assert again.messages == result.messages and len(calls) == 3
    # the ToolService faces: chat(model, parameters, messages) is durable too
    chatted = lenient.chat(lenient.models["default"], None, "go", conversation_id="c-chat")
    assert chatted.text == result.text


def test_failures_are_recorded_with_the_partial_history(services: tuple[Any, Any]) -> None:
    from toolweave.durable import ConversationFailedError

    _, strict = services
    with pytest.raises(ConversationFailedError) as info:
        asyncio.run(strict.arun("fail", conversation_id="c-fail", timeout=60))
    error = info.value
    assert error.error_type == "ToolExecutionError" and "kaput" in str(error)
    partial = error.partial_result
    assert partial is not None and [m.type for m in partial.messages] == [
        "user",
        "ai",
        "tool_result",
    ]
    # the same id raises the same recorded error, without running anything
    before = len(calls)
    with pytest.raises(ConversationFailedError):
        asyncio.run(strict.arun("fail", conversation_id="c-fail", timeout=60))
    assert len(calls) == before


def test_models_must_be_registered(services: tuple[Any, Any]) -> None:
    lenient, _ = services
    with pytest.raises(ValueError, match="registered"):
        asyncio.run(lenient.achat(ScriptedChatModel(["x"]), None, "go"))


def test_non_durable_faces_still_work(services: tuple[Any, Any]) -> None:
    lenient, _ = services
    events = list(lenient.chat_stream(ScriptedChatModel(script), None, "go"))
    assert events[-1].result.text.startswith("3 | written")


def test_toolweave_works_without_dbos() -> None:
    code = (
        "import sys; sys.modules['dbos'] = None\n"
        "import toolweave\n"
        "from toolweave import ToolService, ScriptedChatModel, tool\n"
        "@tool\n"
        "def f(x: int) -> int:\n"
        "    'Double.'\n"
        "    return 2 * x\n"
        "r = ToolService().tools(f).chat(ScriptedChatModel(['ok']), None, 'hi')\n"
        "assert r.text == 'ok'\n"
        "assert not any(m.startswith('toolweave.durable') for m in sys.modules)\n"
        "try:\n"
        "    import toolweave.durable\n"
        "except ImportError as e:\n"
        "    assert 'toolweave[durable]' in str(e)\n"
        "else:\n"
        "    raise SystemExit('imported without dbos')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr


def test_the_sync_faces_work_after_shutdown(postgres: Any) -> None:
    """DBOS makes its thread pool the default executor of the loop that toolweave's sync
    faces reuse, and stops the pool when destroyed: after `shutdown()` a sync call that
    needs a worker thread (`asyncio.to_thread`) must still work."""
    from toolweave._utils.sync import run_sync
    from toolweave.durable import DurableToolService, launch, shutdown

    service = DurableToolService("after-shutdown", model=ScriptedChatModel(script)).tools(add)
    launch(postgres.url_for("tw_after_shutdown"), app_name="twaftershutdown", log_level="WARNING")
    try:
        result = service.chat(None, None, "go", conversation_id="c-after")
        assert result.text is not None
    finally:
        shutdown()
    assert run_sync(asyncio.to_thread(lambda: 41 + 1)) == 42
