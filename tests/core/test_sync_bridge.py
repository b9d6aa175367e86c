"""`run_sync`'s per-thread loop: reused within a thread, closed when the thread ends."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

from toolweave._utils.sync import reset_thread_loop, run_sync


async def _current_loop() -> asyncio.AbstractEventLoop:
    return asyncio.get_running_loop()


def test_a_threads_loop_is_reused_and_closed_when_the_thread_ends() -> None:
    # Left to the garbage collector, the loop and its self-pipe sockets were finalised in no
    # set order, and a loop finalised after its sockets failed in __del__ ("Invalid file
    # descriptor: -1"), an unraisable error that failed whichever test ran at that moment.
    seen: list[asyncio.AbstractEventLoop] = []

    def work() -> None:
        seen.append(run_sync(_current_loop()))
        seen.append(run_sync(_current_loop()))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    del thread
    first, second = seen
    assert first is second
    assert first.is_closed()


def test_reset_thread_loop_closes_the_loop_and_the_next_call_makes_a_new_one() -> None:
    seen: list[asyncio.AbstractEventLoop] = []

    def work() -> None:
        seen.append(run_sync(_current_loop()))
        reset_thread_loop()
        seen.append(run_sync(_current_loop()))

    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    first, second = seen
    assert first.is_closed() and first is not second


_TO_THREAD_THEN_EXIT = """
import asyncio
from toolweave._utils.sync import run_sync

async def total(numbers):
    return await asyncio.get_running_loop().run_in_executor(None, sum, numbers)

print(run_sync(total([1, 2])), flush=True)
"""


def test_the_process_exits_after_a_sync_call_used_the_loops_executor() -> None:
    # The sync face's loop got a default executor (asyncio.to_thread); closing that loop at
    # interpreter exit must not wait for it on a new thread, which would never start.
    done = subprocess.run(
        [sys.executable, "-c", _TO_THREAD_THEN_EXIT], capture_output=True, text=True, timeout=120
    )
    assert (done.returncode, done.stdout) == (0, "3\n"), done.stderr
