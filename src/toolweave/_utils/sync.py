"""Running coroutines from synchronous code without blocking or nesting event loops."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import AsyncIterator, Coroutine, Generator
from typing import Any, TypeVar

T = TypeVar("T")

_local = threading.local()
_blocked: contextvars.ContextVar[tuple[asyncio.AbstractEventLoop, ...]] = contextvars.ContextVar(
    "toolweave_blocked_loops", default=()
)


_bridged: contextvars.ContextVar[bool] = contextvars.ContextVar("toolweave_bridged", default=False)


def blocked_loops() -> tuple[asyncio.AbstractEventLoop, ...]:
    """The event loops whose threads are blocked waiting for this code: inside `run_sync`'s
    helper thread, the loop a sync API was called from (and those of outer such calls);
    work handed to them would never run."""
    return _blocked.get()


def in_sync_bridge() -> bool:
    """Whether this code runs inside `run_sync`, on a loop that lives only for that call."""
    return _bridged.get()


class _ThreadRunner:
    """A thread's reusable `asyncio.Runner`, closed when the thread's locals go.

    Left to the garbage collector, an unclosed loop is finalised together with its
    self-pipe sockets in no set order; when a socket goes first, the loop's `__del__` fails
    ("Invalid file descriptor: -1", an unraisable error in whatever code runs then). This
    holder sits outside that cycle, so it is dropped as soon as the thread's locals are and
    closes the loop while the loop is whole."""

    __slots__ = ("runner",)

    def __init__(self) -> None:
        # With a loop_factory the runner does not install its loop as the thread's current
        # event loop, so code calling asyncio.get_event_loop() (test frameworks, libraries)
        # never gets hold of it and cannot close it or shut its executor down.
        self.runner = asyncio.Runner(loop_factory=asyncio.new_event_loop)

    def __del__(self) -> None:
        # Not Runner.close: it waits for the loop's default executor on a new thread, and
        # the main thread's locals go at interpreter exit, when a new thread never starts
        # (the process then hangs forever, after a sync call that used asyncio.to_thread).
        # loop.close() shuts that executor down without waiting.
        with contextlib.suppress(Exception):
            loop = self.runner.get_loop()
            if loop.is_closed():
                return
            try:
                if not loop.is_running():  # another loop running in the thread that drops us
                    _finish_tasks(loop)
            finally:
                loop.close()


def _finish_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel what is still pending on `loop` and let it finish, then its async generators."""
    pending = asyncio.all_tasks(loop)
    for task in pending:
        task.cancel()
    if pending:
        loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())


def _runner() -> asyncio.Runner:
    held: _ThreadRunner | None = getattr(_local, "held", None)
    if held is None or held.runner.get_loop().is_closed():
        held = _ThreadRunner()
        _local.held = held
    return held.runner


def reset_thread_loop() -> None:
    """Close this thread's reusable loop; the next `run_sync` makes a new one. For code
    that configured that loop and is going away (DBOS makes its own thread pool the loop's
    default executor, and shuts the pool down when it is destroyed)."""
    held: _ThreadRunner | None = getattr(_local, "held", None)
    _local.held = None
    if held is not None:
        held.runner.close()


def _in_running_loop() -> bool:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def _boxed(coro: Coroutine[Any, Any, T], box: list[T]) -> None:
    box.append(await coro)


def _run(runner: asyncio.Runner, coro: Coroutine[Any, Any, T], context: contextvars.Context) -> T:
    """`runner.run(coro)`, with the result kept out of the runner's task. On the main thread,
    `Runner.run` checks its SIGINT handler afterwards through `signal.getsignal`, which builds
    (and discards) an error message holding the repr of that handler, hence of the task and
    its result: the repr of a whole conversation, on every call."""
    box: list[T] = []
    runner.run(_boxed(coro, box), context=context)
    return box[0]


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` to completion from synchronous code and return its result.

    Without a running loop in this thread, a loop kept per thread is reused (cheap). Inside a
    running loop (a sync API called from async code, or a notebook) the coroutine runs on a
    fresh loop in a helper thread, so the caller's loop is never re-entered.
    """
    ctx = contextvars.copy_context()  # a fresh copy each time: the runner's own is stale
    ctx.run(_bridged.set, True)
    if not _in_running_loop():
        return _run(_runner(), coro, ctx)
    ctx.run(_blocked.set, (*_blocked.get(), asyncio.get_running_loop()))
    with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="toolweave-sync") as pool:
        return pool.submit(ctx.run, asyncio.run, coro).result()


async def _next(aiter: AsyncIterator[T]) -> T:
    return await aiter.__anext__()


async def _aclose(aiter: Any) -> None:
    close = getattr(aiter, "aclose", None)
    if close is not None:
        await close()


def iterate_sync(aiter: AsyncIterator[T]) -> Generator[T, None, None]:
    """Iterate an async iterator from synchronous code, one item at a time.

    Without a running loop in this thread the per-thread loop drives it. Inside a running
    loop (sync `stream()` called from async code) a private loop in a helper thread does, so
    the caller's loop is never re-entered. The caller's contextvars are visible either way.
    """
    loop: asyncio.AbstractEventLoop | None = None
    thread: threading.Thread | None = None
    if _in_running_loop():
        loop = asyncio.new_event_loop()
        ctx = contextvars.copy_context()
        thread = threading.Thread(
            target=ctx.run, args=(loop.run_forever,), name="toolweave-stream", daemon=True
        )
        thread.start()
        own_loop = loop

        def run(coro: Coroutine[Any, Any, Any]) -> Any:
            return asyncio.run_coroutine_threadsafe(coro, own_loop).result()

    else:
        runner = _runner()
        step_ctx = contextvars.copy_context()  # one copy for all steps: the caller's values

        def run(coro: Coroutine[Any, Any, Any]) -> Any:
            return _run(runner, coro, step_ctx)

    try:
        while True:
            try:
                yield run(_next(aiter))
            except StopAsyncIteration:
                return
    finally:
        try:
            run(_aclose(aiter))
        finally:
            if loop is not None and thread is not None:
                loop.call_soon_threadsafe(loop.stop)
                thread.join()
                loop.close()
