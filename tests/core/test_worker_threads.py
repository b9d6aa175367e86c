"""Sync tools called from async code run in toolweave's worker pool; a call abandoned by its
caller (timeout, cancellation) must never take capacity from later calls (issue #14 item 1)."""

from __future__ import annotations

import asyncio
import logging
import subprocess
import sys
import threading

import pytest

from toolweave import ToolTimeoutError, tool
from toolweave._utils import threads


async def test_timed_out_sync_calls_do_not_starve_later_calls(
    caplog: pytest.LogCaptureFixture,
) -> None:
    release = threading.Event()
    entered = threading.Semaphore(0)

    @tool(timeout=1.0)  # long enough for every thread to start on a loaded machine
    def stuck(i: int) -> int:
        """Blocks until released, ignoring its timeout."""
        entered.release()
        release.wait(30)
        return i

    @tool
    def quick(x: int) -> int:
        """Returns at once."""
        return x * 2

    stuck_calls = threads.MAX_WORKERS + 6  # more than the pool has workers
    try:
        with caplog.at_level(logging.WARNING, logger="toolweave.threads"):
            outcomes = await asyncio.gather(
                *(stuck.ainvoke({"i": i}) for i in range(stuck_calls)), return_exceptions=True
            )
            assert all(isinstance(o, ToolTimeoutError) for o in outcomes)
            # every stuck call is running in a thread of its own (none waits in a queue)
            for _ in range(stuck_calls):
                assert entered.acquire(timeout=10)
            assert threads.abandoned_threads() >= stuck_calls
            # the pool still serves everybody else (the old pool had no free worker left:
            # this waited until the stuck calls returned)
            assert await asyncio.wait_for(
                asyncio.gather(*(quick.ainvoke({"x": i}) for i in range(100))), 10
            ) == [i * 2 for i in range(100)]
        assert any("abandoned" in r.getMessage() for r in caplog.records)
    finally:
        release.set()
    for _ in range(600):  # abandoned threads leave when their call returns
        if threads.abandoned_threads() == 0:
            break
        await asyncio.sleep(0.05)
    assert threads.abandoned_threads() == 0


async def test_cancelled_queued_call_never_runs() -> None:
    pool = threads._Pool(1, 4, "test-pool")
    gate = threading.Event()
    ran: list[str] = []
    first = pool.submit(lambda: gate.wait(10))
    second = pool.submit(lambda: ran.append("second"))
    assert second.future.cancel()  # still queued behind `first`
    gate.set()
    assert first.future.result(10) is True
    third = pool.submit(lambda: "third")
    assert third.future.result(10) == "third"
    assert ran == []


def test_abandoned_threads_are_bounded() -> None:
    pool = threads._Pool(1, 1, "test-pool")
    gate = threading.Event()
    started = threading.Semaphore(0)

    def block() -> None:
        started.release()
        gate.wait(10)

    try:
        a = pool.submit(block)
        assert started.acquire(timeout=10)
        pool.abandon(a)  # replaced: one abandoned thread
        b = pool.submit(block)
        assert started.acquire(timeout=10)
        pool.abandon(b)  # over the bound: keeps its slot
        assert pool.abandoned == 1
        c = pool.submit(lambda: "c")
        assert not c.future.done()  # waits for b's worker: the bound holds
    finally:
        gate.set()
    assert c.future.result(10) == "c"
    for _ in range(200):
        if pool.abandoned == 0:
            break
        threading.Event().wait(0.05)
    assert pool.abandoned == 0


async def test_a_sync_tool_raising_stop_iteration_fails_instead_of_hanging() -> None:
    """An asyncio future refuses StopIteration (TypeError, logged by the loop), so the
    caller of a sync tool that raised it waited forever; it now gets a RuntimeError, as a
    coroutine raising StopIteration does (PEP 479), with the StopIteration as its cause."""

    @tool
    def first(items: list[int]) -> int:
        """The first item."""
        return next(iter(items))

    async with asyncio.timeout(10):
        with pytest.raises(RuntimeError, match="raised StopIteration") as raised:
            await first.ainvoke({"items": []})
    assert isinstance(raised.value.__cause__, StopIteration)


_STUCK_THEN_EXIT = """
import asyncio, threading
from toolweave import ToolTimeoutError, tool

never = threading.Event()

@tool(timeout=0.1)
def stuck() -> str:
    '''Never returns.'''
    never.wait()
    return "unreachable"

for call in (lambda: stuck.invoke({}), lambda: asyncio.run(stuck.ainvoke({}))):
    try:
        call()
    except ToolTimeoutError:
        pass
print("done", flush=True)
"""


def test_a_sync_tool_that_never_returns_does_not_keep_the_interpreter_alive() -> None:
    # A timed-out sync call keeps its thread; the process must still exit when the script
    # ends (a thread pool's worker would be joined at exit, forever).
    done = subprocess.run(
        [sys.executable, "-c", _STUCK_THEN_EXIT], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout) == (0, "done\n"), done.stderr
