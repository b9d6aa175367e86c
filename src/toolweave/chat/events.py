"""Streaming events a `ChatModel` yields, and the accumulator that turns them into a response."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..execution.requests import ToolExecutionRequest
from .messages import AiMessage
from .response import ChatResponse, FinishReason, TokenUsage

__all__ = [
    "CompleteToolCall",
    "PartialToolCall",
    "ReasoningDelta",
    "ResponseCompleted",
    "StreamAccumulator",
    "StreamEvent",
    "TextDelta",
]


@dataclass(slots=True)
class TextDelta:
    """A piece of the answer text."""

    text: str


@dataclass(slots=True)
class ReasoningDelta:
    """A piece of the model's visible reasoning."""

    text: str


@dataclass(slots=True)
class PartialToolCall:
    """A fragment of a tool call as it streams: `index` orders the calls of one response;
    `id` and `name` are set on the first fragment of a call (and may repeat later)."""

    index: int
    id: str | None
    name: str | None
    arguments_delta: str


@dataclass(slots=True)
class CompleteToolCall:
    """A tool call whose arguments are complete (it can start executing)."""

    index: int
    request: ToolExecutionRequest


@dataclass(slots=True)
class ResponseCompleted:
    """The end of the stream, with the aggregated response."""

    response: ChatResponse


StreamEvent = TextDelta | ReasoningDelta | PartialToolCall | CompleteToolCall | ResponseCompleted
"""Any event of a model stream."""


@dataclass(slots=True)
class _CallBuffer:
    id: str | None = None
    name: str | None = None
    parts: list[str] = field(default_factory=list)


class StreamAccumulator:
    """Builds the final `AiMessage` from stream events (or from raw fragments).

    Tool-call fragments are grouped by index; ids and names keep their first non-empty
    value; argument fragments are joined once at the end; empty arguments become `"{}"`.
    """

    __slots__ = ("_calls", "_reasoning", "_text", "completed")

    def __init__(self) -> None:
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._calls: dict[int, _CallBuffer] = {}
        self.completed: list[ToolExecutionRequest] = []

    def add_text(self, text: str) -> None:
        """Append answer text."""
        self._text.append(text)

    def add_reasoning(self, text: str) -> None:
        """Append reasoning text."""
        self._reasoning.append(text)

    def add_tool_fragment(
        self, index: int, id: str | None, name: str | None, arguments: str | None
    ) -> None:
        """Record one tool-call fragment."""
        buf = self._calls.get(index)
        if buf is None:
            buf = self._calls[index] = _CallBuffer()
        if id and not buf.id:
            buf.id = id
        if name and not buf.name:
            buf.name = name
        if arguments:
            buf.parts.append(arguments)

    def feed(self, event: StreamEvent) -> None:
        """Record a stream event."""
        if isinstance(event, TextDelta):
            self._text.append(event.text)
        elif isinstance(event, ReasoningDelta):
            self._reasoning.append(event.text)
        elif isinstance(event, PartialToolCall):
            self.add_tool_fragment(event.index, event.id, event.name, event.arguments_delta)

    def request(self, index: int) -> ToolExecutionRequest:
        """The complete request at `index` (call when its fragments are all in)."""
        buf = self._calls[index]
        args = "".join(buf.parts)
        kwargs: dict[str, Any] = {
            "name": buf.name or "",
            "arguments": args if args.strip() else "{}",
        }
        if buf.id:
            kwargs["id"] = buf.id
        return ToolExecutionRequest(**kwargs)

    @property
    def indexes(self) -> list[int]:
        """Indexes of the tool calls seen so far, in order."""
        return sorted(self._calls)

    def ai_message(self, attributes: dict[str, Any] | None = None) -> AiMessage:
        """The aggregated message."""
        text = "".join(self._text)
        reasoning = "".join(self._reasoning)
        return AiMessage(
            text or None,
            tool_execution_requests=[self.request(i) for i in self.indexes],
            reasoning=reasoning or None,
            attributes=attributes or {},
        )

    def response(
        self,
        finish_reason: FinishReason | None = None,
        usage: TokenUsage | None = None,
        **metadata: Any,
    ) -> ChatResponse:
        """The aggregated `ChatResponse`; the finish reason defaults from the content."""
        message = self.ai_message()
        if finish_reason is None:
            finish_reason = (
                FinishReason.TOOL_EXECUTION
                if message.tool_execution_requests
                else FinishReason.STOP
            )
        return ChatResponse(message, finish_reason=finish_reason, usage=usage, **metadata)
