"""One library in one process: `python -m benchmarks.peers.worker NAME [--quick]`.

Measures the library's cases and the plain baselines interleaved, then prints one JSON
object on stdout (progress goes to stderr). A library that is not installed is reported as
skipped, not as a failure.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import importlib.metadata
import json
import logging
import sys
import time
import warnings

from ._common import Env, baseline_cases, import_cases, measure


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers.worker")
    parser.add_argument("adapter")
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--sizes", default=None, help="W8 tool counts, comma-separated")
    args = parser.parse_args(argv)
    sizes = (
        tuple(int(s) for s in args.sizes.split(","))
        if args.sizes
        else ((100,) if args.quick else (1000, 10000))
    )
    warnings.simplefilter("ignore")
    # no library logs during the measurements (openai-agents logs on every failed call)
    logging.disable(logging.CRITICAL)
    try:
        adapter = importlib.import_module(f"benchmarks.peers.adapters.{args.adapter}")
    except ImportError as e:
        print(json.dumps({"adapter": args.adapter, "skipped": f"not importable: {e}"}))
        return 0
    versions = {}
    for dist in adapter.DISTRIBUTIONS:
        try:
            versions[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            versions[dist] = "?"
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    env = Env(loop=loop, quick=args.quick, sizes=sizes)
    start = time.perf_counter()
    _log(f"[{adapter.NAME}] building cases")
    cases = baseline_cases(env) + adapter.cases(env) + import_cases(adapter.IMPORTS)
    setup = time.perf_counter() - start
    _log(f"[{adapter.NAME}] measuring {len(cases)} cases (setup {setup:.1f} s)")
    try:
        results = measure(cases, quick=args.quick, log=_log)
        late = getattr(adapter, "late_cases", None)
        if late is not None:
            _log(f"[{adapter.NAME}] measuring the late cases")
            results += measure(late(env), quick=args.quick, log=_log)
    finally:
        close = getattr(adapter, "close", None)
        if close is not None:
            close()
    loop.run_until_complete(loop.shutdown_asyncgens())
    loop.run_until_complete(loop.shutdown_default_executor())
    loop.close()
    payload = {
        "adapter": adapter.NAME,
        "versions": versions,
        "quick": args.quick,
        "sizes": list(sizes),
        "setup_s": setup,
        "elapsed_s": time.perf_counter() - start,
        "results": [r.to_json() for r in results],
    }
    print(json.dumps(payload))
    return 0


if __name__ == "__main__":
    sys.exit(main())
