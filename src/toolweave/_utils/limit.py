"""`Limit`: a counting semaphore for async code that any event loop (and thread) may share.

`asyncio.Semaphore` binds itself to the first loop that waits on it; a `ToolService` is used
from many loops at once (each sync `chat` runs its own), so a bound meant to protect one API
across every conversation needs a semaphore that is not tied to a loop. Waiters are served
in arrival order.
"""

from __future__ import annotations

import asyncio
import threading
from collections import deque
from types import TracebackType

__all__ = ["Limit"]


class Limit:
    """At most `size` holders at once, across threads and event loops (`async with limit:`)."""

    __slots__ = ("_free", "_lock", "_waiters", "size")

    def __init__(self, size: int) -> None:
        if size < 1:
            raise ValueError("a concurrency limit must be at least 1")
        self.size = size
        self._free = size
        self._lock = threading.Lock()
        self._waiters: deque[tuple[asyncio.AbstractEventLoop, asyncio.Future[None]]] = deque()

    async def acquire(self) -> None:
        with self._lock:
            if self._free and not self._waiters:
                self._free -= 1
                return
            loop = asyncio.get_running_loop()
            waiter: asyncio.Future[None] = loop.create_future()
            self._waiters.append((loop, waiter))
        try:
            await waiter
        except asyncio.CancelledError:
            with self._lock:
                queued = (loop, waiter) in self._waiters
                if queued:
                    self._waiters.remove((loop, waiter))
            if not queued and waiter.done() and not waiter.cancelled():
                self.release()  # the slot was handed over just before the cancellation
            raise

    def release(self) -> None:
        with self._lock:
            if not self._waiters:
                self._free += 1
                return
            loop, waiter = self._waiters.popleft()
        try:
            loop.call_soon_threadsafe(self._grant, waiter)
        except RuntimeError:  # that loop is closed: its waiter is gone
            self.release()

    def _grant(self, waiter: asyncio.Future[None]) -> None:
        if waiter.cancelled():
            self.release()  # its owner left while the slot was on its way: pass it on
        else:
            waiter.set_result(None)

    async def __aenter__(self) -> None:
        await self.acquire()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.release()
