"""Deadline handling for `Tool`: running a call within its timeout, and a stream within its
total budget.

`invoke`/`ainvoke` cancel the call at the deadline (a sync implementation runs in a thread
of its own for that). A stream's timeout is a budget for the time spent inside the tool:
starting it and each pull of the next chunk add up; the consumer's time between chunks and
the callbacks' time do not. A tool's own `TimeoutError` (its upstream timed out) is passed
on as it is, never reported as our deadline.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import inspect
import threading
import time
from collections.abc import (
    AsyncGenerator,
    Awaitable,
    Callable,
    Coroutine,
    Generator,
    Iterable,
    Iterator,
)
from typing import Any, TypeVar

from .._utils.threads import to_thread
from ..errors import ToolTimeoutError

__all__ = [
    "async_chunks",
    "await_within",
    "call_within",
    "sync_chunks",
    "threaded_chunks",
    "timeout_error",
]

_DONE = object()
T = TypeVar("T")


def timeout_error(tool_name: str, timeout: float) -> ToolTimeoutError:
    """The error a call that overran its deadline is reported with."""
    return ToolTimeoutError(
        f"tool {tool_name!r} did not finish within {timeout:g} s and was cancelled",
        tool_name=tool_name,
    )


# one call ------------------------------------------------------------------------------------
def call_within(
    fn: Callable[..., T],
    args: dict[str, Any],
    kwargs: dict[str, Any],
    timeout: float,
    tool_name: str,
) -> T:
    """Run the sync `fn(args, **kwargs)` and give up waiting for it after `timeout` seconds."""
    ctx = contextvars.copy_context()
    future: concurrent.futures.Future[T] = concurrent.futures.Future()

    def run() -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(ctx.run(fn, args, **kwargs))
        except BaseException as error:  # handed to the caller, who re-raises it
            future.set_exception(error)

    # A daemon thread of its own, not a pool's: a call that never returns keeps its thread,
    # which must neither take a slot from every later sync tool nor keep the interpreter
    # from exiting (a pool's workers are joined at exit).
    threading.Thread(target=run, name=f"toolweave-tool-{tool_name}", daemon=True).start()
    try:
        return future.result(timeout)
    except concurrent.futures.TimeoutError:
        if future.done():
            raise  # the tool's own TimeoutError, not our deadline
        future.cancel()
        raise timeout_error(tool_name, timeout) from None


async def await_within(call: Coroutine[Any, Any, T], timeout: float | None, tool_name: str) -> T:
    """Await `call`, cancelled after `timeout` seconds (`None`: no deadline)."""
    if timeout is None:
        return await call
    deadline = asyncio.timeout(timeout)
    try:
        async with deadline:
            return await call
    except TimeoutError:
        if not deadline.expired():
            raise  # the tool's own TimeoutError, not our deadline
        raise timeout_error(tool_name, timeout) from None


# a stream's budget ---------------------------------------------------------------------------
class _Budget:
    """The time a stream's implementation may still spend producing it.

    Only time spent waiting inside the tool counts (starting it, and each pull of the next
    chunk); the consumer's time between chunks and the callbacks' time do not.
    """

    __slots__ = ("spent", "timeout", "tool_name")

    def __init__(self, timeout: float | None, tool_name: str) -> None:
        self.timeout = timeout
        self.tool_name = tool_name
        self.spent = 0.0

    def remaining(self) -> float | None:
        return None if self.timeout is None else self.timeout - self.spent

    def exhausted(self) -> bool:
        return self.timeout is not None and self.spent >= self.timeout

    def error(self) -> ToolTimeoutError:
        return timeout_error(self.tool_name, self.timeout or 0.0)

    async def within(self, awaitable: Awaitable[T]) -> T:
        """Await a step of the tool within what is left of the budget; the time it takes is
        charged to the budget."""
        remaining = self.remaining()
        started = time.monotonic()
        expired = False
        try:
            if remaining is None:
                return await awaitable
            deadline = asyncio.timeout(remaining)
            try:
                async with deadline:
                    result = await awaitable
            except TimeoutError:
                if not deadline.expired():
                    raise  # the tool's own TimeoutError
                expired = True
        finally:
            self.spent += time.monotonic() - started
        # Raised outside the `except`, so the error does not chain to the cancellation and keep
        # the cancelled frames alive: whatever they held (a sync generator a worker thread is
        # still running, say) is released, and so closed, as soon as that pending step returns.
        # A result that came back late (the tool swallowed the cancellation) is dropped too.
        if expired or self.exhausted():
            raise self.error()
        return result


def _close_sync(iterator: Any) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


async def _aclose(iterator: Any) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


def sync_chunks(
    open_source: Callable[[], Iterable[Any] | None], timeout: float | None, tool_name: str
) -> Generator[Any, None, None]:
    """The chunks of a sync stream in the caller's thread, within the `timeout` budget.

    A running `next()` cannot be pre-empted: the budget is checked each time it returns, and
    once used up the late chunk is dropped, the source closed and `ToolTimeoutError` raised.
    """
    budget = _Budget(timeout, tool_name)
    iterator: Iterator[Any] | None = None
    finished = False  # the source ended or raised: nothing left to close
    try:
        started = time.monotonic()
        try:
            source = open_source()
            iterator = iter(source) if source is not None else iter(())
        finally:
            budget.spent += time.monotonic() - started
        while True:
            if budget.exhausted():
                raise budget.error()
            started = time.monotonic()
            try:
                chunk = next(iterator, _DONE)
            except BaseException:
                finished = True
                raise
            finally:
                budget.spent += time.monotonic() - started
            finished = chunk is _DONE
            if budget.exhausted():
                raise budget.error()
            if finished:
                return
            yield chunk
    finally:
        if not finished:
            _close_sync(iterator)


async def _open_async(open_source: Callable[[], Any]) -> Any:
    source: Any = open_source()
    if inspect.isawaitable(source):  # an `async def` that returns instead of yielding
        source = await source
    if source is not None and not hasattr(source, "__anext__"):
        source = aiter(source)
    return source


async def async_chunks(
    open_source: Callable[[], Any], timeout: float | None, tool_name: str
) -> AsyncGenerator[Any, None]:
    """The chunks of an async stream, each wait cancelled when the `timeout` budget runs out.

    `open_source` returns an async iterator, an awaitable of one, or `None` (empty).
    """
    budget = _Budget(timeout, tool_name)
    source = await budget.within(_open_async(open_source))
    if source is None:
        return
    try:
        while True:
            if budget.exhausted():
                raise budget.error()
            chunk = await budget.within(anext(source, _DONE))
            if chunk is _DONE:
                return
            yield chunk
    finally:
        await _aclose(source)


class _ThreadedSource:
    """A sync stream pulled one chunk at a time in worker threads (`step` runs there).

    A pull that has started cannot be pre-empted: `close` while a `step` is running only marks
    the source, and that step closes the iterator when its `next()` returns.
    """

    def __init__(self, open_source: Callable[[], Iterable[Any] | None]) -> None:
        self._open = open_source
        self._iterator: Iterator[Any] | None = None
        self._lock = threading.Lock()
        self._busy = False
        self._closing = False

    @property
    def busy(self) -> bool:
        return self._busy

    def step(self) -> Any:
        with self._lock:
            if self._closing:
                return _DONE
            self._busy = True
        try:
            if self._iterator is None:
                source = self._open()
                self._iterator = iter(source) if source is not None else iter(())
            return next(self._iterator, _DONE)
        finally:
            with self._lock:
                self._busy = False
                close_now = self._closing
            if close_now:
                self._close()

    def close(self) -> None:
        with self._lock:
            self._closing = True
            if self._busy:
                return
        self._close()

    def _close(self) -> None:
        with self._lock:
            iterator, self._iterator = self._iterator, None
        _close_sync(iterator)


async def threaded_chunks(
    open_source: Callable[[], Iterable[Any] | None], timeout: float | None, tool_name: str
) -> AsyncGenerator[Any, None]:
    """The chunks of a sync stream pulled in worker threads, for async code.

    The wait is abandoned at the deadline, but a running `next()` cannot be stopped: its
    generator is closed as soon as that `next()` returns.
    """
    budget = _Budget(timeout, tool_name)
    ctx = contextvars.copy_context()  # one copy for all steps: the generator's own values
    source = _ThreadedSource(open_source)
    ended = False
    try:
        while True:
            if budget.exhausted():
                raise budget.error()
            chunk = await budget.within(to_thread(ctx.run, source.step))
            if chunk is _DONE:
                ended = True
                return
            yield chunk
    finally:
        if not ended:
            if source.busy:
                source.close()  # only marks it: the running step closes it when it returns
            else:
                await to_thread(source.close)
