"""A tool that pauses itself: raise `NeedsApproval` or `CallDeferred` from its body (or from
the validation of its arguments) and the conversation pauses on that call, like a call gated
by `requires_approval` (docs/approvals.md). On resume the tool runs again and finds the
decision in `ToolContext.approval` (`current_approval()` where there is no context, e.g. in
a validator); on a first run it is None.

What the tool did before it raised is its own business: the call is run again from the
start. Check first, act after the decision."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Literal

__all__ = ["CallDeferred", "NeedsApproval", "ToolPause"]


class ToolPause(Exception):
    """Base of the signals a tool raises to pause its call (`NeedsApproval`, `CallDeferred`)."""

    kind: Literal["approval", "deferred"] = "approval"

    def __init__(self, message: str | None = None, metadata: Mapping[str, Any] | None = None):
        if message is not None and not isinstance(message, str):
            raise TypeError(f"the reason must be a str, not {type(message).__name__}")
        if metadata is not None and not isinstance(metadata, Mapping):
            raise TypeError(f"metadata must be a mapping, not {type(metadata).__name__}")
        super().__init__(message or self.kind)
        self.message = message
        self.metadata: dict[str, Any] | None = None if metadata is None else _json(metadata)


def _json(metadata: Mapping[str, Any]) -> dict[str, Any]:
    """`metadata` as JSON data (it travels in a `ConversationState` and durable messages);
    what JSON cannot hold becomes its `str`."""
    value = json.loads(json.dumps(dict(metadata), default=str, ensure_ascii=False))
    assert isinstance(value, dict)
    return value


class NeedsApproval(ToolPause):
    """Raised by a tool: this call needs a person's decision before it goes on. `reason`
    is shown with the pending call (`PendingCall.message`), `metadata` (JSON data) too.
    `Approve()` runs the tool again with `ctx.approval` set to the decision; `Deny` answers
    the call without running it."""

    kind: Literal["approval", "deferred"] = "approval"

    def __init__(self, reason: str | None = None, metadata: Mapping[str, Any] | None = None):
        super().__init__(reason, metadata)
        self.reason = reason


class CallDeferred(ToolPause):
    """Raised by a tool: the result of this call comes from outside (another process, a
    browser). The call waits with `reason="deferred"`; a `DeferredResult` runs the tool
    again with `ctx.approval` set to it (the tool makes its answer from it), `Deny`
    answers the call without running it."""

    kind: Literal["approval", "deferred"] = "deferred"

    def __init__(self, metadata: Mapping[str, Any] | None = None, *, message: str | None = None):
        super().__init__(message, metadata)
