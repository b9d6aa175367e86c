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


_FORKING_OWNER = """
import multiprocessing, os, sys, time
from pathlib import Path
from toolweave.local import LlamaServer
binary, model, logs, how = sys.argv[1:5]
server = LlamaServer(Path(binary), Path(model), log_dir=Path(logs), startup_timeout=60).start()
if how == "os.fork":
    child = os.fork()
    if child == 0:
        time.sleep(600)
        os._exit(0)
else:
    process = multiprocessing.get_context("fork").Process(target=time.sleep, args=(600,))
    process.start()
    child = process.pid
print(server._proc.pid, child, flush=True)
time.sleep(600)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize("how", ["os.fork", "multiprocessing"])
def test_a_forked_child_does_not_keep_the_server_alive(
    tmp_path: Path, fake_binary: Path, model_file: Path, how: str
) -> None:
    """A child forked without exec (multiprocessing's "fork") holds no copy of the owner's
    end of the reaper's channel: SIGKILL of the owner stops the server while the child
    lives on."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    owner = subprocess.Popen(
        [sys.executable, "-c", _FORKING_OWNER, str(fake_binary), str(model_file),
         str(tmp_path / "logs"), how],
        stdout=subprocess.PIPE,
        env=env,
    )  # fmt: skip
    pids: list[int] = []
    child = 0
    try:
        assert owner.stdout is not None
        reaper, child = (int(word) for word in owner.stdout.readline().split())
        pids = [reaper, _server_pid(reaper)]
        owner.kill()
        owner.wait(timeout=30)
        deadline = time.monotonic() + 30  # a hang guard: it goes at once
        while any(_alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert _alive(child), "the forked child should still run"
        assert not _alive(pids[1]), "llama-server outlived its owner while a forked child ran"
        assert not _alive(pids[0]), "the reaper outlived its owner while a forked child ran"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        for p in [*pids, child]:
            if p and _alive(p):
                os.kill(p, signal.SIGKILL)


_REAPER_LOST_OWNER = """
import sys
from pathlib import Path
from toolweave.local import LlamaServer
from toolweave.local import server as server_module
binary, model, logs, death_signal = sys.argv[1:5]
server_module._PARENT_DEATH_SIGNAL = death_signal == "on"
server = LlamaServer(Path(binary), Path(model), log_dir=Path(logs), startup_timeout=60).start()
print(server._proc.pid, flush=True)
then = sys.stdin.readline().strip()
print(server.running, flush=True)
if then == "stop":
    server.stop()
    print(server.running, flush=True)
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
@pytest.mark.parametrize(
    ("death_signal", "then"),
    [("on", "stop"), ("off", "stop"), ("off", "exit")],
    ids=["linux-death-signal", "stop-finds-the-server", "exit-finds-the-server"],
)
def test_the_server_does_not_outlive_its_reaper(
    tmp_path: Path, fake_binary: Path, model_file: Path, death_signal: str, then: str
) -> None:
    """SIGKILL of the reaper alone: on Linux the server goes with it (the parent-death
    signal); where there is no such signal (`off`: as on macOS), `running` still sees the
    server and `stop()`, or the owner's normal exit, stops it."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    owner = subprocess.Popen(
        [sys.executable, "-c", _REAPER_LOST_OWNER, str(fake_binary), str(model_file),
         str(tmp_path / "logs"), death_signal],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )  # fmt: skip
    pids: list[int] = []
    try:
        assert owner.stdout is not None and owner.stdin is not None
        reaper = int(owner.stdout.readline())
        pids = [reaper, _server_pid(reaper)]
        os.kill(reaper, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while _alive(reaper) and time.monotonic() < deadline:
            time.sleep(0.05)
        if death_signal == "on":
            while _alive(pids[1]) and time.monotonic() < deadline:
                time.sleep(0.05)
            assert not _alive(pids[1]), "llama-server outlived its reaper"
        else:
            assert _alive(pids[1])  # the case `stop()` must handle itself
        owner.stdin.write(then + "\n")
        owner.stdin.flush()
        assert owner.stdout.readline().strip() == str(death_signal == "off")  # `running`
        if then == "stop":
            assert owner.stdout.readline().strip() == "False"
            assert not _alive(pids[1]), "stop() left the server of a dead reaper running"
        owner.stdin.close()
        owner.wait(timeout=30)
        assert not _alive(pids[1]), "llama-server outlived its owner's normal exit"
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
        for p in pids:
            if _alive(p):
                os.kill(p, signal.SIGKILL)
