"""`ScriptedChatModel`: a test double that replays given responses, offline."""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from typing import Any

from .events import (
    CompleteToolCall,
    PartialToolCall,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
)
from .messages import AiMessage
from .model import BaseChatModel
from .request import ChatRequest
from .response import ChatResponse, FinishReason

__all__ = ["ScriptExhaustedError", "ScriptedChatModel"]

Script = Sequence[AiMessage | ChatResponse] | Callable[[ChatRequest], Any]


class ScriptExhaustedError(AssertionError):
    """The model was asked for more responses than its script holds."""


def _as_response(value: Any) -> ChatResponse:
    if isinstance(value, ChatResponse):
        return value
    if isinstance(value, AiMessage):
        reason = FinishReason.TOOL_EXECUTION if value.tool_execution_requests else FinishReason.STOP
        return ChatResponse(value, finish_reason=reason)
    if isinstance(value, str):
        return ChatResponse(AiMessage(value), finish_reason=FinishReason.STOP)
    raise TypeError(
        f"a scripted response must be an AiMessage, a ChatResponse or a str, got {type(value).__name__}"
    )


class ScriptedChatModel(BaseChatModel):
    """Replays `responses` in order (or calls `responses(request)` for each request).

    Every request received is recorded in `requests`. Streams split text and tool-call
    arguments into deltas of at most `chunk_size` characters, so streaming code paths are
    exercised. `delay` waits that many seconds before each response (asynchronously).
    """

    provider = "scripted"

    def __init__(self, responses: Script, *, chunk_size: int = 3, delay: float = 0.0) -> None:
        if chunk_size < 1:
            raise ValueError("chunk_size must be at least 1")
        self._script = responses
        self._position = 0
        self._lock = threading.Lock()
        self.chunk_size = chunk_size
        self.delay = delay
        self.requests: list[ChatRequest] = []

    @property
    def remaining(self) -> int | None:
        """Responses left in a list script (None for a callable script)."""
        if callable(self._script):
            return None
        return len(self._script) - self._position

    def _take(self, request: ChatRequest) -> Any:
        """Record `request` and take the next script entry (the callable for a function
        script)."""
        with self._lock:
            self.requests.append(request)
            if callable(self._script):
                return self._script
            if self._position >= len(self._script):
                raise ScriptExhaustedError(
                    f"ScriptedChatModel has no response left for request #{len(self.requests)} "
                    f"(the script holds {len(self._script)})"
                )
            produced = self._script[self._position]
            self._position += 1
            return produced

    async def _next(self, request: ChatRequest) -> ChatResponse:
        produced = self._take(request)
        if callable(produced):
            produced = produced(request)
            if inspect.isawaitable(produced):
                produced = await produced
        if self.delay:
            await asyncio.sleep(self.delay)
        return _as_response(produced)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Return the next scripted response."""
        return await self._next(request)

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Return the next scripted response (sync; no event loop for a list script)."""
        if self.delay or callable(self._script):
            return super().chat(request)
        return _as_response(self._take(request))

    def _chunks(self, text: str) -> Iterator[str]:
        n = self.chunk_size
        for i in range(0, len(text), n):
            yield text[i : i + n]

    def _events(self, response: ChatResponse) -> Iterator[StreamEvent]:
        message = response.ai_message
        if message.text:
            for piece in self._chunks(message.text):
                yield TextDelta(piece)
        for index, call in enumerate(message.tool_execution_requests):
            args = call.arguments
            pieces = list(self._chunks(args)) or [""]
            for i, piece in enumerate(pieces):
                yield PartialToolCall(
                    index, call.id if i == 0 else None, call.name if i == 0 else None, piece
                )
            yield CompleteToolCall(index, call)
        yield ResponseCompleted(response)

    async def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:  # type: ignore[override]
        """Stream the next scripted response as small deltas."""
        response = await self._next(request)
        for event in self._events(response):
            yield event
