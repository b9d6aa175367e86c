"""The MCP serving benchmark runs end to end (`python -m benchmarks.mcp_serve --quick`);
no timings asserted."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_mcp_serve_benchmark_quick_run() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.mcp_serve", "--quick", "--clients", "1", "2"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr
    assert "calls/s vs MCPServer" in proc.stdout
    assert "mcp SDK MCPServer" in proc.stdout
    assert "toolweave mcp serve" in proc.stdout
    assert "FastMCP 4" in proc.stdout  # measured, or the reason it was not
    assert "machine load" in proc.stdout
