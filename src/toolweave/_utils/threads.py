"""Running sync callables off the event loop, in toolweave's own worker threads.

toolweave does not use the loop's default executor: other libraries replace it (DBOS installs
its own and shuts it down on `DBOS.destroy()`), and its default size (cpu count + 4) is far
too small for a round of parallel sync tools.

The pool keeps at most `MAX_WORKERS` threads busy. A call whose caller gave up on it (a
timeout or a cancellation while the function runs) cannot be stopped: its thread is
*abandoned* — it no longer counts against the bound, a new worker takes its place, and it
leaves the pool when the function finally returns. So overrunning calls never take capacity
from other calls (other conversations included). Abandoned threads are themselves bounded
(`MAX_ABANDONED`); each one is logged, and `abandoned_threads()` says how many are still
running.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

__all__ = ["MAX_ABANDONED", "MAX_WORKERS", "abandoned_threads", "to_thread"]

T = TypeVar("T")

logger = logging.getLogger("toolweave.threads")

MAX_WORKERS = 64
"""Sync calls running at once (calls beyond it queue)."""
MAX_ABANDONED = 1024
"""Abandoned threads that are replaced; beyond it, an abandoned thread keeps its slot."""


class _Work:
    __slots__ = ("abandoned", "fn", "future")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.future: Future[Any] = Future()
        self.abandoned = False


class _Pool:
    """A thread pool that replaces workers whose call was abandoned (see the module doc)."""

    def __init__(self, max_workers: int, max_abandoned: int, name: str) -> None:
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned
        self.name = name
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._idle = threading.Semaphore(0)
        self._workers = 0  # threads that count against max_workers
        self._abandoned = 0  # abandoned calls still running
        self._counter = 0

    @property
    def abandoned(self) -> int:
        return self._abandoned

    def submit(self, fn: Callable[[], Any]) -> _Work:
        work = _Work(fn)
        self._queue.put(work)
        if not self._idle.acquire(blocking=False):
            with self._lock:
                if self._workers < self.max_workers:
                    self._spawn()
        return work

    def _spawn(self) -> None:  # with the lock held
        self._workers += 1
        self._counter += 1
        thread = threading.Thread(
            target=self._worker, name=f"{self.name}_{self._counter}", daemon=True
        )
        thread.start()

    def abandon(self, work: _Work) -> None:
        """The caller stopped waiting for `work`: if it is running, its thread stops counting
        against the bound and a new worker serves the queue."""
        with self._lock:
            if work.abandoned or not work.future.running():
                return
            if self._abandoned >= self.max_abandoned:
                logger.error(
                    "%d abandoned tool threads are still running; this one keeps its "
                    "worker slot (sync tools that ignore their timeout are starving the pool)",
                    self._abandoned,
                )
                return
            work.abandoned = True
            self._abandoned += 1
            self._workers -= 1
            if not self._queue.empty():
                self._spawn()
            count = self._abandoned
        logger.warning(
            "a sync tool call outlived its caller (timeout or cancellation); its thread is "
            "abandoned and replaced (%d abandoned threads running)",
            count,
        )

    def _worker(self) -> None:
        while True:
            work = self._queue.get()
            if work.future.set_running_or_notify_cancel():
                try:
                    result = work.fn()
                except BaseException as e:
                    work.future.set_exception(e)
                else:
                    work.future.set_result(result)
                    del result  # do not keep the value alive while idle
                with self._lock:  # abandon() decides under the lock, while still running
                    if work.abandoned:
                        self._abandoned -= 1
                        if self._workers >= self.max_workers:
                            return  # replaced meanwhile: leave the pool
                        self._workers += 1  # rejoin
            del work
            self._idle.release()


_pool: _Pool | None = None
_pool_lock = threading.Lock()


def _executor() -> _Pool:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = _Pool(MAX_WORKERS, MAX_ABANDONED, "toolweave-worker")
    return _pool


def abandoned_threads() -> int:
    """How many sync calls abandoned by their callers are still running in worker threads."""
    return 0 if _pool is None else _pool.abandoned


async def to_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`asyncio.to_thread` on toolweave's worker pool: a copy of the caller's contextvars
    travels with the call; a call abandoned by its caller frees its slot (module doc)."""
    ctx = contextvars.copy_context()
    pool = _executor()
    work = pool.submit(functools.partial(ctx.run, func, *args, **kwargs))
    try:
        return await asyncio.wrap_future(work.future)
    except asyncio.CancelledError:
        pool.abandon(work)
        raise
