"""`toolweave web` running as a subprocess on loopback, with the scenario's tools and its
scripted model (a fresh one per server)."""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SCENARIO = Path(__file__).resolve().parent / "scenario.py"
TOKEN = "test-token-0123456789abcdef"


@dataclass(frozen=True)
class WebServer:
    base: str
    token: str
    banner: str

    @property
    def port(self) -> int:
        return int(self.base.rsplit(":", 1)[1])


@contextlib.contextmanager
def web_server(
    *extra: str,
    tools: str = str(SCENARIO),
    provider: str = f"{SCENARIO}:script",
    env: dict[str, str] | None = None,
) -> Iterator[WebServer]:
    """`toolweave web --port 0` on the scenario (or on `tools` with `provider`, with `env`
    added to the environment); yields once it prints its URL."""
    cmd = [
        sys.executable, "-m", "toolweave", "web",
        "--tools", tools,
        "--provider", provider,
        "--port", "0", "--token", TOKEN, *extra,
    ]  # fmt: skip
    proc = subprocess.Popen(
        cmd, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})}
    )
    lines: list[str] = []
    found = threading.Event()

    def read() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if "toolweave web on" in line:
                found.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        if not found.wait(60):
            raise RuntimeError(f"toolweave web did not start: {''.join(lines)}")
        banner = "".join(lines)
        match = re.search(r"http://127\.0\.0\.1:(\d+)/\?token=", banner)
        assert match, banner
        yield WebServer(f"http://127.0.0.1:{match.group(1)}", TOKEN, banner)
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def web() -> Iterator[WebServer]:
    with web_server() as server:
        yield server
