"""The interop benchmark runs end to end (`python -m benchmarks --quick --only interop`); no
timings asserted."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

EXPECTED = {
    "langchain_core": "langchain: to_langchain(tool).invoke(ToolCall)",
    "pydantic_ai": "pydantic-ai: to_pydantic_ai(tool), validate_json + call",
    "agents": "openai-agents: to_openai_agents(tool).on_invoke_tool",
    "llama_index": "llamaindex: to_llamaindex(tool).call(**kwargs)",
}


def test_interop_benchmark_quick_run() -> None:
    installed = [m for m in EXPECTED if importlib.util.find_spec(m) is not None]
    if not installed:
        pytest.skip("no framework installed (the dev extra installs them)")
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--only", "interop"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for module in installed:
        assert EXPECTED[module] in proc.stdout
    assert "via DefaultToolExecutor" in proc.stdout
    assert "workloads in" in proc.stdout
