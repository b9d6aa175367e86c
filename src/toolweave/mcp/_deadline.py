"""`CallDeadline`: one MCP call's deadline, as a bare loop timer on the calling task.

A bare ``loop.call_at`` costs a third of ``asyncio.timeout`` on every call. When it
fires it cancels the calling task, and cancels it again every `REDELIVER` seconds until
the call ends: a cancellation that code below swallows cannot make the deadline lapse.
(``asyncio.wait_for`` on Python 3.11 returns the result of an inner wait that finished in
the same loop step as the cancellation, dropping the cancellation: a server flooding a call
with notifications made that race likely.)
"""

from __future__ import annotations

import asyncio

__all__ = ["REDELIVER", "CallDeadline"]

REDELIVER = 0.1
"""Seconds between cancellations of a call past its deadline that has not ended yet."""


class CallDeadline:
    """Cancels the current task `timeout` seconds from now, and again until `settle`."""

    __slots__ = ("_handle", "_loop", "_task", "fired")

    def __init__(self, timeout: float) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._loop = loop = asyncio.get_running_loop()
        self.fired = 0
        """How many times the deadline cancelled the task."""
        self._handle = loop.call_at(loop.time() + timeout, self._expire)

    def _expire(self) -> None:
        self.fired += 1
        self._task.cancel()
        self._handle = self._loop.call_at(self._loop.time() + REDELIVER, self._expire)

    def settle(self) -> bool:
        """Stop the timer and take its cancellations back; whether the call ran out of time
        (false if someone else cancelled the task too: that cancellation goes on)."""
        self._handle.cancel()
        fired = self.fired
        if not fired:
            return False
        task = self._task
        for _ in range(fired):
            task.uncancel()
        return task.cancelling() == 0
