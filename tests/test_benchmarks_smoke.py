"""The benchmark suite runs end to end (`python -m benchmarks --quick`); no timings asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_benchmarks_quick_run() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "sync invoke: execute_with_result(raw JSON)" in proc.stdout
    assert "workloads in" in proc.stdout
