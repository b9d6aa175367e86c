"""Run a command, and stop it when the process that started this one is gone.

``python _reaper.py COMMAND [ARG ...]``: the parent keeps the write end of this process's
stdin open and never writes to it, so end of file means the parent ended, however it
ended (its exit handlers ran or not: SIGTERM's default action, SIGKILL, a crash); the
command is then stopped (SIGTERM, SIGKILL after a grace period). SIGTERM and SIGINT sent
here are passed on to the command and its exit is waited for. The exit status is the
command's (128 + N when signal N ended it). Standard library only: it runs apart from the
package, in a fresh interpreter.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
from types import FrameType

GRACE = 10.0
"""Seconds the command gets to exit after SIGTERM before it is killed."""


def _stop(child: subprocess.Popen[bytes]) -> None:
    if child.poll() is None:
        child.terminate()
        try:
            child.wait(GRACE)
        except subprocess.TimeoutExpired:
            child.kill()


def main(argv: list[str]) -> int:
    if not argv:
        print("usage: python _reaper.py COMMAND [ARG ...]", file=sys.stderr)
        return 2
    child = subprocess.Popen(argv, stdin=subprocess.DEVNULL)

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
