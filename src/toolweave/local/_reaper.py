"""Run a command, and stop it when the process that started this one is gone.

``python _reaper.py [--no-parent-death-signal] COMMAND [ARG ...]``: the parent keeps its
end of this process's stdin (a socket pair on POSIX, else a pipe) open and never writes to
it, so end of file means the parent ended, however it ended (its exit handlers ran or not:
SIGTERM's default action, SIGKILL, a crash); the command is then stopped (SIGTERM, SIGKILL
after a grace period). Once started, the command's pid is written back on stdin (one line)
so the parent can find it if this process is gone. On Linux the command also gets SIGKILL
when this process dies (PR_SET_PDEATHSIG), so killing the reaper alone does not leave it
running. SIGTERM and SIGINT sent here are passed on to the command and its exit is waited
for. The exit status is the command's (128 + N when signal N ended it). Standard library
only: it runs apart from the package, in a fresh interpreter.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable
from types import FrameType

GRACE = 10.0
"""Seconds the command gets to exit after SIGTERM before it is killed."""

_PR_SET_PDEATHSIG = 1


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(GRACE)
        except subprocess.TimeoutExpired:
            child.kill()


def _die_with(parent: int) -> Callable[[], None] | None:
    """A `preexec_fn` that has the kernel SIGKILL the command when `parent` dies (Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (ImportError, OSError, AttributeError):
        return None

    def set_signal() -> None:
        if prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0 and os.getppid() != parent:
            os._exit(1)  # the reaper died before the signal was armed

    return set_signal


def main(argv: list[str]) -> int:
    death_signal = True
    if argv[:1] == ["--no-parent-death-signal"]:
        argv, death_signal = argv[1:], False
    if not argv:
        print(
            "usage: python _reaper.py [--no-parent-death-signal] COMMAND [ARG ...]",
            file=sys.stderr,
        )
        return 2
    preexec = _die_with(os.getpid()) if death_signal else None
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL, preexec_fn=preexec)
    try:
        os.write(0, f"{child.pid}\n".encode())
    except OSError:
        pass  # stdin is a read-only pipe (Windows): the parent does without the pid

    def pass_on(signum: int, _frame: FrameType | None) -> None:
        if child.poll() is None:
            child.send_signal(signum)

    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, pass_on)

    def watch_parent() -> None:
        try:  # the raw descriptor: a buffered reader's lock would stall the shutdown
            while os.read(0, 4096):
                pass
        except OSError:
            pass
        _stop(child)

    threading.Thread(target=watch_parent, daemon=True).start()
    code = child.wait()
    return 128 - code if code < 0 else code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
