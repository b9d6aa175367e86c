"""Load, bounded and loopback only: 200 concurrent `achat` conversations against a local
Chat Completions server (tests/servers/fault_load_server.py, its own process), each one round
of 3 parallel tool calls (two async tools, one sync tool in a worker thread) then a final
answer. The batch runs 3 times under tracemalloc.

Asserted: every conversation completes with a valid history and each tool ran exactly once
per conversation; no asyncio task is left; after `aclose()` the process has no more open
file descriptors than before (sockets included); the third batch's traced peak does not grow
materially over the second's. The figures (conversations/s, peaks) are printed for the record.
"""

from __future__ import annotations

import asyncio
import gc
import os
import socket
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

import httpx2
import pytest

from toolweave import ToolService, tool
from toolweave.providers import OpenAIChatModel

from .invariants import SECRET, Counter, LeakGuard, assert_history_valid

SERVER = str(Path(__file__).resolve().parent.parent / "servers" / "fault_load_server.py")
CONVERSATIONS = 200
BATCHES = 3
BATCH_DEADLINE = 60.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture(scope="module")
def load_server() -> Any:
    port = _free_port()
    proc = subprocess.Popen(
        [sys.executable, SERVER, str(port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if proc.poll() is not None:
                raise RuntimeError("the load server exited")
            try:
                httpx2.get(f"http://127.0.0.1:{port}/stats", timeout=1.0)
                break
            except httpx2.TransportError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(10)


def _service(counter: Counter) -> ToolService:
    @tool
    async def weather(topic: str) -> str:
        """Weather."""
        counter.hit(f"weather:{topic}")
        await asyncio.sleep(0.01)
        return f"sunny for {topic}"

    @tool
    def clock(topic: str) -> str:
        """Time (a sync tool: runs in a worker thread)."""
        counter.hit(f"clock:{topic}")
        return "12:00"

    @tool
    async def news(topic: str) -> str:
        """News."""
        counter.hit(f"news:{topic}")
        return f"nothing new about {topic}"

    return ToolService(max_concurrency=8).tools(weather, clock, news)


async def _batch(service: ToolService, model: OpenAIChatModel, batch: int) -> float:
    names = [f"conv{batch}x{i}" for i in range(CONVERSATIONS)]
    start = time.perf_counter()
    async with asyncio.timeout(BATCH_DEADLINE):
        results = await asyncio.gather(*(service.achat(model, None, n) for n in names))
    elapsed = time.perf_counter() - start
    for name, result in zip(names, results, strict=True):
        assert result.text == f"done {name} (3 results)"
        assert_history_valid(result.messages)
        assert len(result.tool_executions) == 3
        assert not any(e.result.is_error for e in result.tool_executions)
    return elapsed


async def test_200_concurrent_conversations_hold_without_leaks(load_server: str) -> None:
    counter = Counter()
    service = _service(counter)
    guard = LeakGuard()
    gc.collect()
    fds_before = _open_fds()
    model = OpenAIChatModel(
        "load",
        api_key=SECRET,
        base_url=f"{load_server}/v1",
        timeout=httpx2.Timeout(30.0, connect=10.0),
        max_retries=0,
    )
    tracemalloc.start()
    peaks: list[int] = []
    currents: list[int] = []
    times: list[float] = []
    try:
        for batch in range(BATCHES):
            tracemalloc.reset_peak()
            times.append(await _batch(service, model, batch))
            gc.collect()
            current, peak = tracemalloc.get_traced_memory()
            peaks.append(peak)
            currents.append(current)
        fds_during = _open_fds()
    finally:
        tracemalloc.stop()
        await model.aclose()
    # every tool ran exactly once per conversation
    assert len(counter.counts) == 3 * CONVERSATIONS * BATCHES
    counter.assert_at_most_once()
    await guard.acheck()
    deadline = time.monotonic() + 10
    while _open_fds() > fds_before and time.monotonic() < deadline:  # noqa: ASYNC110
        await asyncio.sleep(0.05)
    fds_after = _open_fds()
    rates = [CONVERSATIONS / t for t in times]
    mib = 1024 * 1024
    print(
        f"\nload: {BATCHES} x {CONVERSATIONS} concurrent conversations "
        f"({2 * CONVERSATIONS} model calls, {3 * CONVERSATIONS} tool calls per batch)\n"
        f"  seconds per batch: {', '.join(f'{t:.2f}' for t in times)} (traced)\n"
        f"  conversations/s:   {', '.join(f'{r:.0f}' for r in rates)}\n"
        f"  traced peak MiB:   {', '.join(f'{p / mib:.1f}' for p in peaks)}\n"
        f"  retained MiB:      {', '.join(f'{c / mib:.2f}' for c in currents)}\n"
        f"  fds: before {fds_before}, after the batches {fds_during}, after aclose {fds_after}"
    )
    assert fds_after <= fds_before, "sockets or files leaked"
    # generous: the third batch may not need 25% + 4 MiB more than the second
    assert peaks[2] <= peaks[1] * 1.25 + 4 * mib, f"peak grew: {peaks}"
    assert currents[2] <= currents[1] + 2 * mib, f"retained memory grew: {currents}"
