"""Helpers for the loop tests: one way to run a conversation per face (sync, async, stream)."""

from __future__ import annotations

import asyncio
from typing import Any

from toolweave import (
    AiMessage,
    ChatCompleted,
    ToolChatResult,
    ToolExecutionRequest,
    ToolExecutionResultMessage,
    ToolService,
)

MODES = ["sync", "async", "stream", "astream_eager"]


def call(name: str, arguments: str = "{}", id: str | None = None) -> ToolExecutionRequest:
    return ToolExecutionRequest(id=id or f"id_{name}", name=name, arguments=arguments)


def ai_calls(*calls: ToolExecutionRequest) -> AiMessage:
    return AiMessage(tool_execution_requests=list(calls))


def run(
    mode: str, service: ToolService, model: Any, messages: Any = "hi", **kw: Any
) -> ToolChatResult:
    """Run one conversation through the face named by `mode`."""
    if mode == "sync":
        return service.chat(model, kw.pop("parameters", None), messages, **kw)
    if mode == "async":
        return asyncio.run(service.achat(model, kw.pop("parameters", None), messages, **kw))
    if mode == "stream":
        events = list(service.chat_stream(model, kw.pop("parameters", None), messages, **kw))
        assert isinstance(events[-1], ChatCompleted)
        return events[-1].result

    async def consume() -> ToolChatResult:
        last = None
        async for event in service.achat_stream(
            model, kw.pop("parameters", None), messages, eager=True, **kw
        ):
            last = event
        assert isinstance(last, ChatCompleted)
        return last.result

    return asyncio.run(consume())


def assert_history_valid(messages: list[Any]) -> None:
    """Every tool call id of every AiMessage is answered exactly once, right after it."""
    pending: list[str] = []
    for m in messages:
        if isinstance(m, AiMessage):
            assert not pending, f"unanswered tool calls before a new AI turn: {pending}"
            pending = [r.id for r in m.tool_execution_requests]
        elif isinstance(m, ToolExecutionResultMessage):
            assert m.id in pending, f"result for unknown or already answered call {m.id}"
            pending.remove(m.id)
        else:
            assert not pending, f"unanswered tool calls: {pending}"
    assert not pending, f"unanswered tool calls at the end: {pending}"
