"""Measurement helpers shared by the benchmark modules.

A workload is a `Case`: a name, a function that runs the body `n` times and returns the
elapsed nanoseconds, and optionally the name of the baseline case it is compared with.
`measure` runs all cases of a module interleaved (round-robin, several repeats) in the same
process, so machine noise hits every case alike. A ratio is the median, over the rounds, of
the case's time divided by its baseline's time in the same round: noise that drifts between
rounds cancels out instead of landing on whichever case it happened to hit.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

__all__ = ["Case", "Row", "async_case", "measure", "sync_case"]


@dataclass(frozen=True, slots=True)
class Case:
    """One workload: `run(n)` executes the body n times and returns elapsed ns."""

    name: str
    run: Callable[[int], int]
    baseline: str | None = None
    number: int = 1000
    """Iterations per timed batch (full run; --quick divides it)."""


@dataclass(frozen=True, slots=True)
class Row:
    """One line of the results table."""

    group: str
    name: str
    median_ns: float
    spread_pct: float
    """(p90 - p10) / median of the per-batch timings, in percent."""
    baseline: str | None
    ratio: float | None


def sync_case(
    name: str, body: Callable[[], object], *, baseline: str | None = None, number: int = 1000
) -> Case:
    """A case timing a synchronous callable."""

    def run(n: int) -> int:
        start = time.perf_counter_ns()
        for _ in range(n):
            body()
        return time.perf_counter_ns() - start

    return Case(name, run, baseline, number)


def async_case(
    name: str,
    body: Callable[[], Awaitable[object]],
    loop: asyncio.AbstractEventLoop,
    *,
    baseline: str | None = None,
    number: int = 1000,
) -> Case:
    """A case timing an async callable, `n` awaits inside one running loop."""

    async def batch(n: int) -> int:
        start = time.perf_counter_ns()
        for _ in range(n):
            await body()
        return time.perf_counter_ns() - start

    def run(n: int) -> int:
        return loop.run_until_complete(batch(n))

    return Case(name, run, baseline, number)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def measure(group: str, cases: list[Case], *, quick: bool, repeats: int = 15) -> list[Row]:
    """Run `cases` interleaved and summarise each one (median per call, spread, ratio)."""
    if quick:
        repeats = 3
    samples: dict[str, list[float]] = {c.name: [] for c in cases}
    for case in cases:  # warm-up
        case.run(max(1, case.number // 20 if quick else case.number // 5))
    for _ in range(repeats):
        for case in cases:
            n = max(1, case.number // 50) if quick else case.number
            samples[case.name].append(case.run(n) / n)
    medians = {name: statistics.median(v) for name, v in samples.items()}
    rows: list[Row] = []
    for case in cases:
        values = samples[case.name]
        median = medians[case.name]
        spread = (_quantile(values, 0.9) - _quantile(values, 0.1)) / median * 100 if median else 0.0
        ratio = (
            statistics.median(a / b for a, b in zip(values, samples[case.baseline], strict=True))
            if case.baseline
            else None
        )
        rows.append(Row(group, case.name, median, spread, case.baseline, ratio))
    return rows
