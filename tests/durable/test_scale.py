"""Scale: worker processes share many conversations whose rounds are four parallel
CPU-bound tool calls (through the tool queue). Every conversation completes once.
Throughput is printed (run with -s), never asserted."""

from __future__ import annotations

import os
import time
from collections import Counter
from typing import Any

import pytest

from .conftest import Workers


def run_batch(workers: Workers, client: Any, prefix: str, n: int, rounds: int) -> float:
    """Submit `n` conversations, wait for all; returns conversations per second."""
    began = time.monotonic()
    ids = [
        client.submit(
            "shop",
            f"scale-{prefix}{i}-{rounds}",
            queue="tw-conversations",
            conversation_id=f"{prefix}{i}",
        )
        for i in range(n)
    ]
    for cid in ids:
        result = client.result(cid, timeout=300)
        assert result.text is not None and result.text.endswith("done")
        assert len(result.tool_executions) == 4
        assert not any(e.result.is_error for e in result.tool_executions)
    elapsed = time.monotonic() - began
    lines = workers.log.lines()
    finals = Counter(
        line.split()[1]
        for line in lines
        if line.startswith(f"model scale-{prefix}") and line.endswith(" 1")
    )
    assert len(finals) == n and set(finals.values()) == {1}  # each completed exactly once
    crunches = Counter(
        line.split()[1] for line in lines if line.startswith(f"crunch scale-{prefix}")
    )
    assert len(crunches) == n and max(crunches.values()) == 4
    return n / elapsed


def spread(workers: Workers, prefix: str) -> Counter[str]:
    """Tool calls run per worker."""
    return Counter(
        line.split()[-1]
        for line in workers.log.lines()
        if line.startswith(f"crunch scale-{prefix}")
    )


def measure(workers: Workers, client_factory: Any, n: int, rounds: int) -> tuple[float, float]:
    """`n` conversations on 1 worker, then on 3; `rounds` chained SHA-256 per tool call."""
    workers.start("solo", tool_queue=True)
    client = client_factory()  # after a worker has created the database
    one = run_batch(workers, client, "one-", n, rounds)
    workers.stop_all()
    workers.procs.clear()
    for name in ("s1", "s2", "s3"):
        workers.start(name, tool_queue=True, wait=False)
    for name in ("s1", "s2", "s3"):
        workers.wait_ready(name)
    three = run_batch(workers, client, "three-", n, rounds)
    print(
        f"\n[durable scale] {n} conversations x 4 CPU-bound tool calls ({rounds} hashes): "
        f"1 worker {one:.2f} conv/s, 3 workers {three:.2f} conv/s "
        f"(x{three / one:.2f}; {os.cpu_count()} CPUs); tool calls per worker: "
        f"{dict(spread(workers, 'three-'))}"
    )
    assert len(spread(workers, "three-")) >= 2  # the work really was shared
    return one, three


def test_three_workers_share_conversations(workers: Workers, client_factory: Any) -> None:
    """The default-run version: 12 conversations, 1 worker then 3."""
    measure(workers, client_factory, 12, 30_000)


@pytest.mark.slow
def test_three_workers_share_100_conversations(workers: Workers, client_factory: Any) -> None:
    """The full version: 100 conversations, 1 worker then 3."""
    measure(workers, client_factory, 100, 60_000)
