"""`stream` / `astream` honour the tool's timeout (card or per call) and treat a `None` stream
as empty.

Real generators and real sleeps; timing bounds are deliberately generous (the machine is shared):
a stream of 5 items x 0.5 s with a 0.3 s timeout must fail well before it would have ended.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from core_support import Recorder

from toolweave import ErrorCode, ToolCard, ToolTimeoutError, tool
from toolweave.callbacks import CallbackFramework
from toolweave.tools import LocalFunction, Tool

ITEMS = 5
STEP = 0.5  # seconds per item: the whole stream would take 2.5 s
TIMEOUT = 0.3
BOUND = 2.0  # a timed-out stream must end well before ITEMS * STEP


def _message(name: str, timeout: float = TIMEOUT) -> str:
    return f"tool {name!r} did not finish within {timeout:g} s and was cancelled"


def _wait_for(flag: threading.Event, seconds: float = 10.0) -> bool:
    return flag.wait(seconds)


_Flag = threading.Event | asyncio.Event


def _slow_gen(closed: _Flag | None = None, **tool_options: Any) -> LocalFunction:
    """`slow_gen`: ITEMS items, STEP s each (a sync generator); sets `closed` when finalized."""

    def slow_gen() -> Iterator[int]:
        try:
            for i in range(ITEMS):
                time.sleep(STEP)
                yield i
        finally:
            if closed is not None:
                closed.set()

    return tool(**tool_options)(slow_gen)


def _slow_agen(
    closed: _Flag | None = None, cancelled: _Flag | None = None, **tool_options: Any
) -> LocalFunction:
    """`slow_agen`: the async twin of `_slow_gen`; sets `cancelled` when pre-empted at its await."""

    async def slow_agen() -> AsyncIterator[int]:
        try:
            for i in range(ITEMS):
                await asyncio.sleep(STEP)
                yield i
        except asyncio.CancelledError:
            if cancelled is not None:
                cancelled.set()
            raise
        finally:
            if closed is not None:
                closed.set()

    return tool(**tool_options)(slow_agen)


# sync generator --------------------------------------------------------------------------------
def test_sync_generator_card_timeout_stream() -> None:
    closed = threading.Event()
    slow_gen = _slow_gen(closed, timeout=TIMEOUT)

    got: list[int] = []
    start = time.monotonic()
    with pytest.raises(ToolTimeoutError) as e:
        for chunk in slow_gen.stream({}):
            got.append(chunk)
    assert time.monotonic() - start < BOUND
    assert e.value.code == ErrorCode.TOOL_EXECUTION_TIMEOUT
    assert e.value.message == _message("slow_gen")
    assert isinstance(e.value, TimeoutError)
    assert got == []  # the first item came after the deadline: dropped
    assert closed.is_set()  # closed in the caller's thread before the error is raised


def test_sync_generator_per_call_timeout_stream() -> None:
    closed = threading.Event()
    slow_gen = _slow_gen(closed)

    start = time.monotonic()
    with pytest.raises(ToolTimeoutError) as e:
        list(slow_gen.stream({}, timeout=TIMEOUT))
    assert time.monotonic() - start < BOUND
    assert e.value.message == _message("slow_gen")
    assert closed.is_set()
    closed.clear()
    with pytest.raises(ToolTimeoutError):
        list(slow_gen.stream({}, operation_timeout=TIMEOUT))
    assert closed.is_set()


async def test_sync_generator_astream_timeout() -> None:
    closed = threading.Event()
    slow_gen = _slow_gen(closed, timeout=TIMEOUT)

    start = time.monotonic()
    with pytest.raises(ToolTimeoutError) as e:
        async for _ in slow_gen.astream({}):
            pass
    assert time.monotonic() - start < BOUND
    assert e.value.message == _message("slow_gen")
    # the running next() cannot be stopped: the generator is closed once it returns
    assert await asyncio.to_thread(_wait_for, closed)


# async generator -------------------------------------------------------------------------------
async def test_async_generator_per_call_timeout_astream() -> None:
    cancelled = asyncio.Event()
    closed = asyncio.Event()
    slow_agen = _slow_agen(closed, cancelled)

    got: list[int] = []
    start = time.monotonic()
    with pytest.raises(ToolTimeoutError) as e:
        async for chunk in slow_agen.astream({}, timeout=TIMEOUT):
            got.append(chunk)
    assert time.monotonic() - start < BOUND
    assert e.value.code == ErrorCode.TOOL_EXECUTION_TIMEOUT
    assert e.value.message == _message("slow_agen")
    assert got == []
    assert cancelled.is_set() and closed.is_set()  # pre-empted at its await, finally ran


async def test_async_generator_card_timeout_astream() -> None:
    closed = asyncio.Event()
    slow_agen = _slow_agen(closed, timeout=TIMEOUT)

    start = time.monotonic()
    with pytest.raises(ToolTimeoutError):
        async for _ in slow_agen.astream({}):
            pass
    assert time.monotonic() - start < BOUND
    assert closed.is_set()


def test_async_generator_sync_stream_runs_the_async_path_with_the_deadline() -> None:
    closed = threading.Event()
    slow_agen = _slow_agen(closed, timeout=TIMEOUT)

    start = time.monotonic()
    with pytest.raises(ToolTimeoutError) as e:
        list(slow_agen.stream({}))
    assert time.monotonic() - start < BOUND
    assert e.value.message == _message("slow_agen")
    assert closed.is_set()


async def test_async_generator_sync_stream_from_a_running_loop() -> None:
    closed = threading.Event()
    slow_agen = _slow_agen(closed)

    def consume() -> None:
        list(slow_agen.stream({}, timeout=TIMEOUT))

    start = time.monotonic()
    with pytest.raises(ToolTimeoutError):
        consume()  # sync stream() called from async code: a private loop drives it
    assert time.monotonic() - start < BOUND
    assert closed.is_set()


# Tool subclasses: only a sync or only an async implementation ---------------------------------
class SyncOnly(Tool):
    def __init__(self, card: ToolCard, closed: threading.Event, **kw: Any) -> None:
        super().__init__(card, **kw)
        self.closed = closed

    def stream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Iterator[Any]:
        try:
            for i in range(ITEMS):
                time.sleep(STEP)
                yield i
        finally:
            self.closed.set()


class AsyncOnly(Tool):
    def __init__(self, card: ToolCard, closed: threading.Event, **kw: Any) -> None:
        super().__init__(card, **kw)
        self.closed = closed

    async def astream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> AsyncIterator[Any]:
        try:
            for i in range(ITEMS):
                await asyncio.sleep(STEP)
                yield i
        finally:
            self.closed.set()


async def test_sync_only_tool_astream_closes_the_generator_after_the_pending_step() -> None:
    closed = threading.Event()
    t = SyncOnly(ToolCard(name="sync_only", timeout=TIMEOUT), closed)
    start = time.monotonic()
    with pytest.raises(ToolTimeoutError) as e:
        async for _ in t.astream({}):
            pass
    assert time.monotonic() - start < BOUND
    assert e.value.message == _message("sync_only")
    assert await asyncio.to_thread(_wait_for, closed)


def test_async_only_tool_sync_stream_timeout() -> None:
    closed = threading.Event()
    t = AsyncOnly(ToolCard(name="async_only"), closed)
    start = time.monotonic()
    with pytest.raises(ToolTimeoutError) as e:
        list(t.stream({}, timeout=TIMEOUT))
    assert time.monotonic() - start < BOUND
    assert e.value.message == _message("async_only")
    assert closed.is_set()


def test_sync_only_tool_sync_stream_timeout() -> None:
    closed = threading.Event()
    t = SyncOnly(ToolCard(name="sync_only"), closed)
    with pytest.raises(ToolTimeoutError):
        list(t.stream({}, timeout=TIMEOUT))
    assert closed.is_set()


# card vs per call, streams that finish in time -------------------------------------------------
def test_per_call_timeout_overrides_the_card() -> None:
    @tool(timeout=0.05)
    def short() -> Iterator[int]:
        for i in range(3):
            time.sleep(0.1)
            yield i

    with pytest.raises(ToolTimeoutError) as e:
        list(short.stream({}))
    assert e.value.message == _message("short", 0.05)
    assert list(short.stream({}, timeout=30)) == [0, 1, 2]


async def test_per_call_timeout_overrides_the_card_async() -> None:
    @tool(timeout=0.05)
    async def short() -> AsyncIterator[int]:
        for i in range(3):
            await asyncio.sleep(0.1)
            yield i

    with pytest.raises(ToolTimeoutError):
        async for _ in short.astream({}):
            pass
    assert [c async for c in short.astream({}, timeout=30)] == [0, 1, 2]


def test_stream_in_time_is_untouched(fw: CallbackFramework, recorder: Recorder) -> None:
    closed = threading.Event()

    @tool(timeout=30, callbacks=fw)
    def quick(n: int) -> Iterator[int]:
        try:
            yield from range(n)
        finally:
            closed.set()

    assert list(quick.stream({"n": 4})) == [0, 1, 2, 3]
    assert closed.is_set()
    assert "tool_call_error" not in recorder.names
    assert recorder.names[-1] == "tool_call_finished"
    assert recorder.names.count("tool_stream_output") == 4


async def test_astream_in_time_is_untouched(fw: CallbackFramework, recorder: Recorder) -> None:
    @tool(callbacks=fw)
    async def quick(n: int) -> AsyncIterator[int]:
        for i in range(n):
            await asyncio.sleep(0)
            yield i

    assert [c async for c in quick.astream({"n": 4}, timeout=30)] == [0, 1, 2, 3]
    assert "tool_call_error" not in recorder.names
    assert recorder.names[-1] == "tool_call_finished"


# the budget is total, and counts only the tool's own time --------------------------------------
def test_timeout_is_a_total_budget_not_per_item() -> None:
    @tool
    def steady() -> Iterator[int]:
        for i in range(6):
            time.sleep(0.1)  # each item well within the timeout, the whole stream not
            yield i

    got: list[int] = []
    with pytest.raises(ToolTimeoutError):
        for chunk in steady.stream({}, timeout=0.35):
            got.append(chunk)
    assert len(got) <= 3  # at least 0.4 s of tool time after the 4th item


async def test_async_timeout_is_a_total_budget_not_per_item() -> None:
    @tool
    async def steady() -> AsyncIterator[int]:
        for i in range(6):
            await asyncio.sleep(0.1)
            yield i

    got: list[int] = []
    with pytest.raises(ToolTimeoutError):
        async for chunk in steady.astream({}, timeout=0.35):
            got.append(chunk)
    assert len(got) <= 3


def test_consumer_time_does_not_count() -> None:
    @tool
    def quick() -> Iterator[int]:
        yield from range(3)

    got = []
    for chunk in quick.stream({}, timeout=0.2):
        time.sleep(0.3)  # the consumer's own time, more than the whole budget
        got.append(chunk)
    assert got == [0, 1, 2]


async def test_consumer_time_does_not_count_async() -> None:
    @tool
    async def quick() -> AsyncIterator[int]:
        for i in range(3):
            await asyncio.sleep(0)
            yield i

    got = []
    async for chunk in quick.astream({}, timeout=0.2):
        await asyncio.sleep(0.3)
        got.append(chunk)
    assert got == [0, 1, 2]


# callbacks -------------------------------------------------------------------------------------
def test_timeout_fires_tool_call_error(fw: CallbackFramework, recorder: Recorder) -> None:
    slow_gen = _slow_gen(timeout=TIMEOUT, callbacks=fw)

    with pytest.raises(ToolTimeoutError) as e:
        list(slow_gen.stream({}))
    assert recorder.names[-1] == "tool_call_error"
    assert recorder.first("tool_call_error")["error"] is e.value
    assert "tool_call_finished" not in recorder.names


async def test_timeout_fires_tool_call_error_async(
    fw: CallbackFramework, recorder: Recorder
) -> None:
    slow_agen = _slow_agen(callbacks=fw)

    with pytest.raises(ToolTimeoutError) as e:
        async for _ in slow_agen.astream({}, timeout=TIMEOUT):
            pass
    assert recorder.names[-1] == "tool_call_error"
    assert recorder.first("tool_call_error")["error"] is e.value


# handles_timeout: the tool kind enforces it itself ----------------------------------------------
class OwnDeadline(Tool):
    handles_timeout = True

    def stream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Iterator[Any]:
        time.sleep(0.2)
        yield kwargs["timeout"]


def test_handles_timeout_passes_it_on_to_the_stream() -> None:
    t = OwnDeadline(ToolCard(name="own"))
    assert list(t.stream({}, timeout=0.05)) == [0.05]


# early stop without a timeout ------------------------------------------------------------------
def test_consumer_stopping_early_closes_the_generator() -> None:
    closed = threading.Event()

    @tool
    def endless() -> Iterator[int]:
        try:
            i = 0
            while True:
                yield i
                i += 1
        finally:
            closed.set()

    chunks = endless.stream({}, timeout=30)
    assert next(chunks) == 0
    chunks.close()  # type: ignore[attr-defined]
    assert closed.is_set()


# a stream implementation returning None --------------------------------------------------------
class NoneSync(Tool):
    def stream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Iterator[Any]:
        return None  # type: ignore[return-value]


class NoneAsync(Tool):
    def astream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> AsyncIterator[Any]:
        return None  # type: ignore[return-value]


class NoneCoroutine(Tool):
    async def astream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> AsyncIterator[Any]:  # type: ignore[override]
        return None


@pytest.mark.parametrize("kind", [NoneSync, NoneAsync, NoneCoroutine])
def test_none_stream_is_empty_sync(kind: type[Tool]) -> None:
    t = kind(ToolCard(name="nothing"))
    assert list(t.stream({})) == []
    assert list(t.stream({}, timeout=5)) == []


@pytest.mark.parametrize("kind", [NoneSync, NoneAsync, NoneCoroutine])
async def test_none_stream_is_empty_async(kind: type[Tool]) -> None:
    t = kind(ToolCard(name="nothing"))
    assert [c async for c in t.astream({})] == []
    assert [c async for c in t.astream({}, timeout=5)] == []


def test_none_stream_fires_call_finished(fw: CallbackFramework, recorder: Recorder) -> None:
    t = NoneSync(ToolCard(name="nothing"), callbacks=fw)
    assert list(t.stream({})) == []
    assert recorder.names[-1] == "tool_call_finished"
    assert "tool_call_error" not in recorder.names


def test_a_tools_own_timeout_error_is_not_reported_as_the_deadline() -> None:
    """A tool that raises TimeoutError itself (its own HTTP call timed out, say) fails with
    that error, not with "did not finish within N s"."""
    from toolweave import DefaultToolExecutor, ToolExecutionRequest

    @tool(timeout=30)
    def upstream() -> str:
        raise TimeoutError("upstream API timed out")

    @tool(timeout=30)
    async def aupstream() -> str:
        raise TimeoutError("upstream API timed out")

    for t in (upstream, aupstream):
        for result in (
            DefaultToolExecutor(t).execute_with_result(ToolExecutionRequest(name=t.name)),
            asyncio.run(
                DefaultToolExecutor(t).aexecute_with_result(ToolExecutionRequest(name=t.name))
            ),
        ):
            assert result.is_error and result.text == "upstream API timed out"
            assert not isinstance(result.error, ToolTimeoutError)
