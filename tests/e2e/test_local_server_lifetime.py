"""A `LlamaServer` started through the library dies with the Python process that started
it, even when that process is ended by a signal that skips its exit handlers: the server
runs under a reaper (`toolweave/local/_reaper.py`) that stops it when its stdin, a pipe
the owner holds, reaches end of file. (The process checks read /proc: Linux.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import toolweave
from toolweave.local import find_llama_server

SRC = str(Path(toolweave.__file__).resolve().parents[1])  # the code under test

_SCRIPT = """
import sys, time
from pathlib import Path
from toolweave.local import LlamaServer
binary, model = (Path(a) if a else None for a in sys.argv[1:3])
server = LlamaServer(binary, model, log_dir=Path(sys.argv[3]), startup_timeout=150).start()
print(server._proc.pid, flush=True)
time.sleep(600)
"""


def _alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie nobody reaped yet counts as dead)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError, IndexError):
        return False
    return state != "Z"


def _server_pid(reaper: int) -> int:
    """The server the reaper started: its only child."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        children = Path(f"/proc/{reaper}/task/{reaper}/children").read_text().split()
        if children:
            (child,) = children
            return int(child)
        time.sleep(0.05)
    raise AssertionError("the reaper started no server")


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    ("binary", "sig"),
    [
        ("fake", signal.SIGTERM),
        ("fake", signal.SIGKILL),
        pytest.param("real", signal.SIGTERM, marks=pytest.mark.local_model),
    ],
    ids=["fake-sigterm", "fake-sigkill", "real-sigterm"],
)
def test_the_server_dies_with_the_process_that_started_it(
    tmp_path: Path, fake_binary: Path, model_file: Path, binary: str, sig: signal.Signals
) -> None:
    if binary == "real":
        if find_llama_server() is None:
            pytest.skip("llama-server is not built: run `python -m toolweave.local build`")
        args = ["", ""]  # the cached build and model
    else:
        args = [str(fake_binary), str(model_file)]
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    owner = subprocess.Popen(
        [sys.executable, "-c", _SCRIPT, *args, str(tmp_path / "logs")],
        stdout=subprocess.PIPE,
        env=env,
    )
    pids: list[int] = []
    try:
        assert owner.stdout is not None
        line = owner.stdout.readline()  # the server is healthy
        reaper = int(line)
        pids = [reaper, _server_pid(reaper)]
        assert all(_alive(p) for p in pids)
        owner.send_signal(sig)
        owner.wait(timeout=30)
        deadline = time.monotonic() + 30  # a hang guard: it goes at once
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not _alive(pids[1]), "llama-server outlived the process that started it"
        assert not _alive(pids[0]), "the reaper outlived the process that started it"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
