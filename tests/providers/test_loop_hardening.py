"""The tool loop against hostile models and tools (issue #14): calls sharing an id, a tool
that raises CancelledError or a custom BaseException itself. Real loopback provider server,
every face of `ToolService` (sync, async, stream, astream eager)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from servers.provider_server import ProviderServer
from toolweave.chat import CompleteToolCall, UserMessage
from toolweave.service import ChatCompleted, ToolChatResult, ToolService

MODES = ["sync", "async", "stream", "astream_eager", "astream"]


def _run(mode: str, model: Any, service: ToolService) -> tuple[ToolChatResult, list[Any]]:
    messages = [UserMessage("go")]
    if mode == "sync":
        return service.chat(model, None, messages), []
    if mode == "async":
        return asyncio.run(service.achat(model, None, messages)), []
    if mode == "stream":
        events = list(service.chat_stream(model, None, messages))
        return events[-1].result, events

    async def consume() -> list[Any]:
        return [e async for e in service.achat_stream(model, None, messages, eager="eager" in mode)]

    events = asyncio.run(consume())
    assert isinstance(events[-1], ChatCompleted)
    return events[-1].result, events


def _calls_answer(stream: bool, calls: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """An OpenAI answer (JSON or SSE) with the given `(id, name, arguments)` calls."""
    if not stream:
        tool_calls = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ]
        message = {"role": "assistant", "content": None, "tool_calls": tool_calls}
        return {
            "json": {"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
        }
    chunks = []
    for index, (i, n, a) in enumerate(calls):
        fragment = {
            "index": index,
            "id": i,
            "type": "function",
            "function": {"name": n, "arguments": json.dumps(a)},
        }
        delta = {"tool_calls": [fragment]}
        chunks.append({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]})
    return {"sse": [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]}


def _final_answer(stream: bool) -> dict[str, Any]:
    if not stream:
        message = {"role": "assistant", "content": "done"}
        return {"json": {"choices": [{"index": 0, "message": message, "finish_reason": "stop"}]}}
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": None}]},
        {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
    ]
    return {"sse": [f"data: {json.dumps(c)}\n\n" for c in chunks] + ["data: [DONE]\n\n"]}


@pytest.mark.parametrize("mode", MODES)
def test_calls_sharing_an_id_each_run_once_with_their_own_result(
    mode: str, server: ProviderServer, openai_model: Any
) -> None:
    ran: list[str] = []
    lock = threading.Lock()

    async def slow_echo(text: str) -> str:
        """Echo the text after a moment."""
        await asyncio.sleep(0.05 if text == "first" else 0)
        with lock:
            ran.append(text)
        return f"echo:{text}"

    stream = "stream" in mode
    server.enqueue(
        _calls_answer(
            stream,
            [
                ("call_same", "slow_echo", {"text": "first"}),
                ("call_same", "slow_echo", {"text": "second"}),
                ("call_other", "slow_echo", {"text": "third"}),
                ("call_same", "slow_echo", {"text": "fourth"}),
            ],
        ),
        _final_answer(stream),
    )
    service = ToolService().tools(slow_echo)
    result, events = _run(mode, openai_model, service)

    assert sorted(ran) == ["first", "fourth", "second", "third"]  # each ran exactly once
    executed = [
        (e.request.id, e.request.arguments_as_dict()["text"], e.result.result_text())
        for e in result.tool_executions
    ]
    ids = [e[0] for e in executed]
    assert len(set(ids)) == 4 and ids[0] == "call_same" and ids[2] == "call_other"
    assert [(t, r) for _, t, r in executed] == [
        ("first", "echo:first"),
        ("second", "echo:second"),
        ("third", "echo:third"),
        ("fourth", "echo:fourth"),
    ]
    # the history the model sees next: unique ids, each answered by its own result
    second = server.bodies[1]["messages"]
    assistant = next(m for m in second if m["role"] == "assistant")
    sent_ids = [c["id"] for c in assistant["tool_calls"]]
    assert sent_ids == ids
    answers = {m["tool_call_id"]: m["content"] for m in second if m["role"] == "tool"}
    assert answers == {i: r for i, _, r in executed}
    # stream events name the calls as the history does
    streamed = [e.request.id for e in events if isinstance(e, CompleteToolCall)]
    assert streamed == (ids if stream else [])


class Custom(BaseException):
    """Not an Exception: a library's own control-flow signal."""


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("kind", ["cancelled", "custom"])
def test_a_tool_raising_cancelled_error_or_a_base_exception_is_an_error_result(
    mode: str, kind: str, server: ProviderServer, openai_model: Any
) -> None:
    async def fragile(text: str) -> str:
        """Fails in an unusual way."""
        if kind == "cancelled":
            raise asyncio.CancelledError  # the tool's own, nobody cancelled the conversation
        raise Custom("custom signal")

    def plain(text: str) -> str:
        """Fails in an unusual way, in a thread."""
        if kind == "cancelled":
            raise asyncio.CancelledError
        raise Custom("custom signal")

    async def fine(text: str) -> str:
        """Works."""
        return f"ok:{text}"

    stream = "stream" in mode
    server.enqueue(
        _calls_answer(
            stream,
            [
                ("c1", "fragile", {"text": "a"}),
                ("c2", "fine", {"text": "b"}),
                ("c3", "plain", {"text": "c"}),
            ],
        ),
        _final_answer(stream),
    )
    service = ToolService().tools(fragile, fine, plain)
    result, _ = _run(mode, openai_model, service)
    assert result.final_response is not None
    assert result.final_response.ai_message.text == "done"
    outcome = {
        e.request.id: (e.result.is_error, e.result.result_text()) for e in result.tool_executions
    }
    assert outcome["c2"] == (False, "ok:b")
    for call_id in ("c1", "c3"):
        is_error, text = outcome[call_id]
        assert is_error
        assert ("CancelledError" if kind == "cancelled" else "custom signal") in text


async def test_the_callers_cancellation_still_propagates(
    server: ProviderServer, openai_model: Any
) -> None:
    started = asyncio.Event()

    async def wait_forever(text: str) -> str:
        """Never returns."""
        started.set()
        await asyncio.sleep(3600)
        return "never"

    server.enqueue(_calls_answer(False, [("c1", "wait_forever", {"text": "a"})]))
    service = ToolService().tools(wait_forever)
    task = asyncio.create_task(service.achat(openai_model, None, [UserMessage("go")]))
    await asyncio.wait_for(started.wait(), 10)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
