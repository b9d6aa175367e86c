"""Running coroutines from synchronous code without blocking or nesting event loops."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
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
