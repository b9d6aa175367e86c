"""The `ChatModel` protocol, and `BaseChatModel`, which derives the sync face from the async
one (or the other way round) so a provider implements each operation once."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Protocol, runtime_checkable

from .._utils.sync import run_sync
from .events import ResponseCompleted, StreamEvent
from .request import ChatRequest
from .response import ChatResponse

__all__ = ["BaseChatModel", "ChatModel"]


@runtime_checkable
class ChatModel(Protocol):
    """What `ToolService` needs from a model: sync and async chat, sync and async streams."""

    def chat(self, request: ChatRequest) -> ChatResponse: ...

    async def achat(self, request: ChatRequest) -> ChatResponse: ...

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]: ...

    def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]: ...


class BaseChatModel:
    """Implement `achat` and `astream`; the sync methods run them on a private loop.

    `achat` defaults to consuming `astream` up to its `ResponseCompleted` event.
    """

    provider: str = "model"

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and wait for the full response."""
        final: ChatResponse | None = None
        async for event in self.astream(request):
            if isinstance(event, ResponseCompleted):
                final = event.response
        if final is None:
            raise RuntimeError(f"{type(self).__name__}.astream ended without a response")
        return final

    def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Send `request` and yield events as they arrive."""
        raise NotImplementedError

    def chat(self, request: ChatRequest) -> ChatResponse:
        """Synchronous `achat`."""
        return run_sync(self.achat(request))

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Synchronous `astream`: drives the async stream on a private loop."""
        from .._utils.sync import iterate_sync

        return iterate_sync(self.astream(request))
