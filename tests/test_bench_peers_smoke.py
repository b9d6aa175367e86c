"""Smoke run of the peer benchmarks (`benchmarks/peers`) so they cannot rot.

Only the toolweave adapter runs here (in --quick mode, in the project venv); the peers are
installed in `.venv-bench/` by `make bench-peers`, so each is skipped unless importable.
No timing assertions: the numbers of a quick run mean nothing.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PEER_MODULES = {
    "langchain": "langgraph.prebuilt",
    "pydantic_ai": "pydantic_ai",
    "openai_agents": "agents",
    "llama_index": "llama_index.core",
}


def _worker(name: str) -> dict:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.peers.worker", name, "--quick"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _check(data: dict) -> None:
    results = {r["id"]: r for r in data["results"]}
    for key in ("W0", "W0a", "W0t", "W5.one", "W6.plain", "W7.plain"):
        assert results[key]["status"] == "ok", results[key]
    errors = [r for r in data["results"] if r["status"] == "error"]
    assert not errors, errors
    for r in data["results"]:
        if r["status"] == "n/a":
            assert r["reason"], r


def test_toolweave_adapter_quick() -> None:
    data = _worker("toolweave")
    _check(data)
    ok = {r["id"] for r in data["results"] if r["status"] == "ok"}
    expected = {"W1.cold", "W1.cached", "W2", "W3", "W3s", "W4", "W5", "W5.c16", "W6", "W7"}
    expected |= {"W9", "W9.new", "W9.sdk", "W9.sdk26", "W9.serve", "I.import", "I.tool"}
    assert expected <= ok
    assert {"W8.register.100", "W8.request.100", "W8.lookup.100"} <= ok


@pytest.mark.parametrize("name", sorted(PEER_MODULES))
def test_peer_adapter_quick(name: str) -> None:
    if importlib.util.find_spec(PEER_MODULES[name].split(".")[0]) is None:
        pytest.skip(f"{name} is not installed here (make bench-peers installs it in .venv-bench)")
    _check(_worker(name))


def test_runner_renders_the_report(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "benchmarks.peers",
            "--quick",
            "--only",
            "toolweave",
            "--json",
            str(tmp_path / "runs.json"),
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "## Targets (toolweave)" in proc.stdout
    assert "| W6 loop overhead, per round (20 rounds) |" in proc.stdout
    runs = json.loads((tmp_path / "runs.json").read_text())
    assert runs["toolweave"]["results"]
