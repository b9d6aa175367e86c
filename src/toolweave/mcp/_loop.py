"""Where an MCP connection lives (its home loop), and running coroutines there from anywhere.

A connection's anyio task groups must be entered and left by one owner task, so every
connection lives on one event loop, its home:

- `CallerLoop`: the application's loop an async `McpClient` connected from. Calls made on
  that loop run inline (no thread hop); calls from other loops and threads are handed to it
  and need it running;
- `LoopThread`: a private loop on a daemon thread, for connections opened from synchronous
  code (`SyncMcpClient`), which work from any loop or thread.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from .._utils.sync import blocked_loops

T = TypeVar("T")

__all__ = ["CallerLoop", "Home", "LoopThread"]


def _submit(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]
) -> concurrent.futures.Future[T]:
    """Start `coro` on `loop` (from another thread), in a copy of the caller's context;
    cancelling the returned future cancels the task."""
    future: concurrent.futures.Future[T] = concurrent.futures.Future()
    ctx = contextvars.copy_context()

    def start() -> None:
        if future.cancelled():
            coro.close()
            return
        task = loop.create_task(coro, context=ctx)

        def done(t: asyncio.Task[T]) -> None:
            if future.cancelled():
                return
            if t.cancelled():
                future.cancel()
            elif (exc := t.exception()) is not None:
                future.set_exception(exc)
            else:
                future.set_result(t.result())

        task.add_done_callback(done)

        def cancel_task(f: concurrent.futures.Future[T]) -> None:
            if f.cancelled() and not task.done():
                loop.call_soon_threadsafe(task.cancel)

        future.add_done_callback(cancel_task)

    try:
        loop.call_soon_threadsafe(start)
    except RuntimeError:
        coro.close()
        raise
    return future


class Home:
    """An event loop a connection lives on; `run` / `run_sync` execute coroutines there."""

    loop: asyncio.AbstractEventLoop

    def here(self) -> bool:
        """Whether the caller runs on the home loop (then coroutines are awaited inline)."""
        return asyncio._get_running_loop() is self.loop

    def alive(self) -> bool:
        """Whether the loop can still run anything (not closed, its thread not gone)."""
        return not self.loop.is_closed()

    def serving(self) -> bool:
        """Whether the loop is running, so work handed to it from elsewhere gets done."""
        return self.loop.is_running()

    def blocked(self) -> bool:
        """Whether the home loop's thread is blocked waiting for the caller (a sync face
        called from a coroutine on that loop): handing it work would deadlock."""
        return self.loop in blocked_loops()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the home loop, from any loop (cancellation propagates)."""
        if self.here():
            return await coro
        return await asyncio.wrap_future(_submit(self.loop, coro))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Block until `coro`, run on the home loop, finishes (never from the loop itself)."""
        if self.here():
            coro.close()
            raise RuntimeError("cannot block on an MCP connection's loop from the loop itself")
        future = _submit(self.loop, coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def stop(self) -> None:
        """Release what the home owns (nothing for a caller's loop)."""


class CallerLoop(Home):
    """The application's loop an async client connected from (not owned: never stopped)."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop


class LoopThread(Home):
    """An asyncio loop running on its own daemon thread."""

    def __init__(self, name: str) -> None:
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()
        assert self._loop is not None
        self.loop = self._loop

    def _main(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        asyncio.set_event_loop(loop)
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            try:
                pending = asyncio.all_tasks(loop)
                for task in pending:
                    task.cancel()
                if pending:
                    loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
                loop.run_until_complete(loop.shutdown_asyncgens())
            finally:
                loop.close()

    def in_thread(self) -> bool:
        """Whether the caller runs on the loop's own thread."""
        return threading.current_thread() is self._thread

    def here(self) -> bool:
        return self.in_thread()

    def alive(self) -> bool:
        return self._thread.is_alive() and not self.loop.is_closed()

    def serving(self) -> bool:
        return self.alive()

    def stop(self, join_timeout: float = 10.0) -> None:
        """Stop the loop (pending tasks are cancelled) and join the thread."""
        loop = self.loop
        if not loop.is_closed():
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:
                pass
        if not self.in_thread():
            self._thread.join(join_timeout)
