"""`requires_approval`: when a call of a tool must wait for a person's decision (the loop's
pauses, docs/approvals.md; `toolweave mcp serve` asks through MCP elicitation)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable
from typing import Any

from ..context import ToolContext
from ..execution.requests import ToolExecutionRequest
from ..schema.arguments import parse_arguments

__all__ = ["ApprovalPolicy", "needs_approval"]

logger = logging.getLogger("toolweave.tools")

ApprovalPolicy = bool | Callable[[dict[str, Any], ToolContext], Any]
"""`requires_approval`: a bool, or a function of the call's arguments and its `ToolContext`
returning (or awaiting to) a bool, deciding per call."""


async def needs_approval(
    policy: ApprovalPolicy | None, call: ToolExecutionRequest, context: ToolContext
) -> bool:
    """Whether `call` must wait for approval under `policy` (a failing or unparsable policy
    check asks for approval: when in doubt, a human decides)."""
    if policy is None or policy is False:
        return False
    if policy is True:
        return True
    try:
        arguments = parse_arguments(call.arguments, tool_name=call.name)
        decided = policy(arguments if isinstance(arguments, dict) else {}, context)
        if inspect.isawaitable(decided):
            decided = await decided
    except Exception as e:
        logger.warning(
            "the approval policy of %s failed (%s: %s); the call %s waits for approval",
            call.name,
            type(e).__name__,
            e,
            call.id,
        )
        return True
    return bool(decided)
