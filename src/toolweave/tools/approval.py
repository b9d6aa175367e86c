"""`requires_approval`: when a call of a tool must wait for a person's decision (the loop's
pauses, docs/approvals.md; `toolweave mcp serve` asks through MCP elicitation)."""

from __future__ import annotations

import inspect
import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..context import ToolContext
from ..execution.requests import ToolExecutionRequest
from ..schema.arguments import parse_arguments

if TYPE_CHECKING:
    from .base import Tool

__all__ = ["ApprovalPolicy", "needs_approval", "validated_arguments"]

logger = logging.getLogger("toolweave.tools")

ApprovalPolicy = bool | Callable[[dict[str, Any], ToolContext], Any]
"""`requires_approval`: a bool, or a function of the call's arguments (validated, defaults
filled in: what the tool will run with) and its `ToolContext` returning (or awaiting to) a
bool, deciding per call."""


async def validated_arguments(tool: Tool, call: ToolExecutionRequest) -> dict[str, Any]:
    """The arguments `call` runs `tool` with: parsed, validated and with the defaults filled
    in, exactly as the tool's own invoke prepares them (a long argument string off the event
    loop). An approval policy sees these, not the model's raw text. Raises
    `ToolArgumentsError` when the call's arguments are not valid (the call then cannot run)."""
    return await tool._aprepare_inputs(call.arguments, {})


async def needs_approval(
    policy: ApprovalPolicy | None,
    call: ToolExecutionRequest,
    context: ToolContext,
    *,
    arguments: Mapping[str, Any] | None = None,
) -> bool:
    """Whether `call` must wait for approval under `policy` (a failing or unparsable policy
    check asks for approval: when in doubt, a human decides). A policy function gets
    `arguments` (a copy: what it does to them does not reach the tool), which callers pass
    validated (`validated_arguments`); without them, the call's raw arguments parsed."""
    if policy is None or policy is False:
        return False
    if policy is True:
        return True
    try:
        if arguments is None:
            parsed = parse_arguments(call.arguments, tool_name=call.name)
            arguments = parsed if isinstance(parsed, dict) else {}
        decided = policy(dict(arguments), context)
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
