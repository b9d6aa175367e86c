"""Run the benchmarks: `python -m benchmarks [--quick] [--only MODULE ...]`.

Each module listed in `MODULES` exposes `run(quick: bool) -> list[Row]`; the rows of all
modules are printed as one table. To add benchmarks, write a module with that function and
append its name here.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from ._harness import Row

MODULES: list[str] = [
    "benchmarks.core",
    "benchmarks.loop",
    "benchmarks.stream_aggregation",
    "benchmarks.interop",
    "benchmarks.ui",
]


def _format_ns(ns: float) -> str:
    if ns >= 1_000_000:
        return f"{ns / 1_000_000:.2f} ms"
    if ns >= 1_000:
        return f"{ns / 1_000:.2f} µs"
    return f"{ns:.0f} ns"


def print_table(rows: list[Row]) -> None:
    """Print the rows as an aligned text table."""
    header = ("group", "workload", "median/call", "spread", "baseline", "ratio")
    lines = [header]
    for r in rows:
        lines.append(
            (
                r.group,
                r.name,
                _format_ns(r.median_ns),
                f"±{r.spread_pct / 2:.0f}%",
                r.baseline or "-",
                f"{r.ratio:.2f}x" if r.ratio is not None else "-",
            )
        )
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    for i, line in enumerate(lines):
        print("  ".join(cell.ljust(w) for cell, w in zip(line, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks")
    parser.add_argument("--quick", action="store_true", help="smoke run (a few seconds)")
    parser.add_argument("--only", nargs="*", help="module names to run (default: all)")
    args = parser.parse_args(argv)
    modules = [m for m in MODULES if not args.only or m.rsplit(".", 1)[-1] in args.only]
    rows: list[Row] = []
    start = time.perf_counter()
    for name in modules:
        module = importlib.import_module(name)
        rows.extend(module.run(quick=args.quick))
    print_table(rows)
    print(
        f"\n{len(rows)} workloads in {time.perf_counter() - start:.1f} s"
        f"{' (quick)' if args.quick else ''}; spread = half the p10-p90 range"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
