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

A call from async code is one handoff each way: the caller queues it and awaits a future of
its own loop; the worker runs it and settles that future with one `call_soon_threadsafe`
(no `concurrent.futures.Future` in between, no `asyncio.wrap_future` chain).
"""

from __future__ import annotations

import asyncio
import contextvars
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

_QUEUED, _RUNNING, _DONE, _CANCELLED = range(4)


class _Work:
    """A queued call. The pool's lock guards `state` and `abandoned`; a subclass says where
    the outcome goes (`finish`)."""

    __slots__ = ("abandoned", "args", "fn", "kwargs", "state")

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]):
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.state = _QUEUED
        self.abandoned = False

    def start(self) -> bool:  # with the pool's lock held, while still queued
        return True

    def drop(self) -> None:
        """It will not run (cancelled while queued)."""

    def finish(self, ok: bool, value: Any) -> None:
        raise NotImplementedError


def _settle(waiter: asyncio.Future[Any], ok: bool, value: Any) -> None:
    if waiter.done():  # the caller was cancelled meanwhile
        return
    if ok:
        waiter.set_result(value)
    elif isinstance(value, StopIteration):
        # a future refuses StopIteration (TypeError), which left the caller waiting forever
        error = RuntimeError(f"the function raised {type(value).__name__}")
        error.__cause__ = value
        waiter.set_exception(error)
    else:
        waiter.set_exception(value)


class _Call(_Work):
    """A call awaited by a coroutine: its outcome settles `waiter` on the caller's loop.
    A caller that stops waiting says so with `_Pool.abandon` (never run if still queued)."""

    __slots__ = ("loop", "waiter")

    def __init__(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        self.fn = fn  # _Work.__init__, inlined: this runs for every call
        self.args = args
        self.kwargs = kwargs
        self.state = _QUEUED
        self.abandoned = False
        self.loop = loop
        self.waiter: asyncio.Future[Any] = loop.create_future()

    def finish(self, ok: bool, value: Any) -> None:
        try:
            self.loop.call_soon_threadsafe(_settle, self.waiter, ok, value)
        except RuntimeError:  # the loop is closed: nobody is waiting any more
            pass


class _Job(_Work):
    """A call from sync code: its outcome goes to `future` (cancelled while queued, it
    never runs)."""

    __slots__ = ("future",)

    def __init__(self, fn: Callable[[], Any]) -> None:
        super().__init__(fn, (), {})
        self.future: Future[Any] = Future()

    def start(self) -> bool:
        return self.future.set_running_or_notify_cancel()

    def drop(self) -> None:
        self.future.cancel()  # abandoned while queued (a no-op when cancelled by its owner)

    def finish(self, ok: bool, value: Any) -> None:
        if ok:
            self.future.set_result(value)
        else:
            self.future.set_exception(value)


class _Pool:
    """A thread pool that replaces workers whose call was abandoned (see the module doc)."""

    def __init__(self, max_workers: int, max_abandoned: int, name: str) -> None:
        self.max_workers = max_workers
        self.max_abandoned = max_abandoned
        self.name = name
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[_Work] = queue.SimpleQueue()
        self._idle = 0  # workers done with their call and not yet handed a new one
        self._workers = 0  # threads that count against max_workers
        self._abandoned = 0  # abandoned calls still running
        self._counter = 0

    @property
    def abandoned(self) -> int:
        return self._abandoned

    def submit(self, fn: Callable[[], Any]) -> _Job:
        """Run `fn()` in a worker; its outcome goes to the returned job's `future`."""
        job = _Job(fn)
        self.put(job)
        return job

    def put(self, work: _Work) -> None:
        self._queue.put(work)
        with self._lock:
            if self._idle:
                self._idle -= 1
            elif self._workers < self.max_workers:
                self._spawn()

    def _spawn(self) -> None:  # with the lock held
        self._workers += 1
        self._counter += 1
        thread = threading.Thread(
            target=self._worker, name=f"{self.name}_{self._counter}", daemon=True
        )
        thread.start()

    def abandon(self, work: _Work) -> None:
        """The caller stopped waiting for `work`: still queued, it will not run; running,
        its thread stops counting against the bound and a new worker serves the queue."""
        with self._lock:
            if work.state is _QUEUED:
                work.state = _CANCELLED
                return
            if work.abandoned or work.state is not _RUNNING:
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
        get = self._queue.get
        lock = self._lock
        while True:
            work = get()
            with lock:
                run = work.state is _QUEUED and work.start()
                work.state = _RUNNING if run else _CANCELLED
                if not run:
                    self._idle += 1
            if not run:
                work.drop()
                del work
                continue
            try:
                value = work.fn(*work.args, **work.kwargs)
                ok = True
            except BaseException as e:
                value, ok = e, False
            # the pool's books first, then the caller's wake-up: the worker has nothing
            # left to do but wait for the next call
            with lock:  # abandon() decides under the lock, while still running
                work.state = _DONE
                leave = False
                if work.abandoned:
                    self._abandoned -= 1
                    if self._workers >= self.max_workers:
                        leave = True  # replaced meanwhile: leave the pool
                    else:
                        self._workers += 1  # rejoin
                if not leave:
                    self._idle += 1
            work.finish(ok, value)
            del work, value  # do not keep the call or its value alive while idle
            if leave:
                return


_pool = _Pool(MAX_WORKERS, MAX_ABANDONED, "toolweave-worker")
"""The process's pool (its threads start on first use)."""


def abandoned_threads() -> int:
    """How many sync calls abandoned by their callers are still running in worker threads."""
    return _pool.abandoned


async def to_thread(func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
    """`asyncio.to_thread` on toolweave's worker pool: a copy of the caller's contextvars
    travels with the call; a call abandoned by its caller frees its slot (module doc)."""
    call = _Call(contextvars.copy_context().run, (func, *args), kwargs, asyncio.get_running_loop())
    _pool.put(call)
    try:
        return await call.waiter  # type: ignore[no-any-return]
    except asyncio.CancelledError:
        _pool.abandon(call)
        raise
