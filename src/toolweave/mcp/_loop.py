"""A private event loop on a daemon thread, and running coroutines on it from anywhere."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["LoopThread"]


class LoopThread:
    """An asyncio loop running on its own daemon thread.

    Every MCP connection lives on one of these, so its anyio task groups are entered and
    left by the same task, and its tools can be called from any loop or thread: async
    callers await a future bridged to the caller's loop, sync callers block on it.
    """

    def __init__(self, name: str) -> None:
        self._ready = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread = threading.Thread(target=self._main, name=name, daemon=True)
        self._thread.start()
        self._ready.wait()

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

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The private loop."""
        assert self._loop is not None
        return self._loop

    def in_thread(self) -> bool:
        """Whether the caller runs on the loop's own thread."""
        return threading.current_thread() is self._thread

    def alive(self) -> bool:
        """Whether the loop thread is still running."""
        return self._thread.is_alive() and self._loop is not None and not self._loop.is_closed()

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Start `coro` on the loop, in a copy of the caller's context; cancelling the returned
        future cancels the task."""
        future: concurrent.futures.Future[T] = concurrent.futures.Future()
        ctx = contextvars.copy_context()
        loop = self.loop

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

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        """Await `coro` on the private loop from any other loop (cancellation propagates)."""
        if self.in_thread():
            return await coro
        return await asyncio.wrap_future(self.submit(coro))

    def run_sync(self, coro: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Block until `coro`, run on the private loop, finishes."""
        if self.in_thread():
            coro.close()
            raise RuntimeError("cannot block on the MCP loop thread from the loop itself")
        future = self.submit(coro)
        try:
            return future.result(timeout)
        except BaseException:
            future.cancel()
            raise

    def stop(self, join_timeout: float = 10.0) -> None:
        """Stop the loop (pending tasks are cancelled) and join the thread."""
        loop = self._loop
        if loop is not None and not loop.is_closed():
            try:
                loop.call_soon_threadsafe(loop.stop)
            except RuntimeError:
                pass
        if not self.in_thread():
            self._thread.join(join_timeout)
