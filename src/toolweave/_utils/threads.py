"""Running sync callables off the event loop, in toolweave's own worker threads.

toolweave does not use the loop's default executor: other libraries replace it (DBOS installs
its own and shuts it down on `DBOS.destroy()`), and its default size (cpu count + 4) would
cap concurrent sync tools far below `ToolService.max_concurrency`.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

T = TypeVar("T")

MAX_WORKERS = 64
_pool: ThreadPoolExecutor | None = None
_lock = threading.Lock()


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(MAX_WORKERS, thread_name_prefix="toolweave-worker")
    return _pool


async def to_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`asyncio.to_thread` on toolweave's worker pool: a copy of the caller's contextvars
    travels with the call."""
    loop = asyncio.get_running_loop()
    ctx = contextvars.copy_context()
    return await loop.run_in_executor(
        _executor(), functools.partial(ctx.run, func, *args, **kwargs)
    )
