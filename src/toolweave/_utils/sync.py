"""Running coroutines from synchronous code without blocking or nesting event loops."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()


def _runner() -> asyncio.Runner:
    runner: asyncio.Runner | None = getattr(_local, "runner", None)
    if runner is None:
        runner = asyncio.Runner()
        _local.runner = runner
    return runner


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion from synchronous code and return its result.

    Without a running loop in this thread, a loop kept per thread is reused (cheap). Inside a
    running loop (a sync API called from async code, or a notebook) the coroutine runs on a
    fresh loop in a helper thread, so the caller's loop is never re-entered.
    """
    if not _in_running_loop():
        return _runner().run(coro)
    ctx = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="toolweave-sync") as pool:
        return pool.submit(ctx.run, asyncio.run, coro).result()


def iterate_sync(agen: AsyncIterator[T]) -> Iterator[T]:
    """Iterate an async iterator from synchronous code (on this thread's private loop, or on
    a helper thread's loop when this thread already runs one)."""
    if _in_running_loop():
        import queue

        q: queue.Queue[tuple[str, Any]] = queue.Queue(maxsize=64)

        async def pump() -> None:
            try:
                async for item in agen:
                    q.put(("item", item))
            except BaseException as e:  # delivered to the consumer
                q.put(("error", e))
            else:
                q.put(("done", None))

        thread = threading.Thread(target=asyncio.run, args=(pump(),), daemon=True)
        thread.start()
        while True:
            kind, value = q.get()
            if kind == "item":
                yield value
            elif kind == "error":
                raise value
            else:
                return
    runner = _runner()
    it = agen.__aiter__()
    try:
        while True:
            try:
                yield runner.run(_anext(it))
            except StopAsyncIteration:
                return
    finally:
        aclose = getattr(it, "aclose", None)
        if aclose is not None:
            runner.run(aclose())


async def _anext(it: AsyncIterator[T]) -> T:
    return await it.__anext__()
