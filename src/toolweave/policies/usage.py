"""Usage budgets: limits on the work one conversation may do (docs/policies.md, "Usage
limits").

`UsageLimits` bounds model requests, tool calls (in total and per tool) and tokens (as the
providers report them on each `ChatResponse`). Each limit is checked before the step it
limits: requests and tokens before each model request, tool calls before each tool round.
A step that would go past a limit is not taken; the conversation ends with
`UsageLimitExceeded` (its `partial_result` is the valid history so far), or, with
`on_exceeded="answer"`, the model is told which budget is spent and answers once more,
with tool calls turned off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from ..errors import ErrorCode, ToolweaveError

__all__ = ["RunUsage", "UsageLimitExceeded", "UsageLimits"]

_COUNTS = ("requests", "tool_calls", "input_tokens", "output_tokens", "total_tokens")


@dataclass(frozen=True, slots=True, kw_only=True)
class UsageLimits:
    """How much one conversation may do; None (the default of each field) is no limit.

    Give it as `ToolService(usage_limits=...)` for every conversation, or per conversation
    as `chat(..., usage_limits=...)`, which replaces the service's."""

    requests: int | None = None
    """Model requests (a structured-output correction is one too)."""
    tool_calls: int | None = None
    """Tool calls run, of every tool (calls waiting for approval count when they run)."""
    per_tool: Mapping[str, int] = field(default_factory=dict)
    """Tool calls run, per tool name (the name the model calls it by)."""
    input_tokens: int | None = None
    """Input tokens summed over the model calls (as the providers report them)."""
    output_tokens: int | None = None
    """Output tokens summed over the model calls."""
    total_tokens: int | None = None
    """Total tokens summed over the model calls (a provider's own total, else input plus
    output)."""
    on_exceeded: Literal["raise", "answer"] = "raise"
    """`"raise"`: end with `UsageLimitExceeded`; `"answer"`: tell the model the budget is
    spent and let it answer once more, with tool calls turned off (that last request is
    not counted against `requests`)."""

    def __post_init__(self) -> None:
        for name in _COUNTS:
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 0):
                raise ValueError(f"UsageLimits.{name} must be a non-negative int or None")
        per_tool = dict(self.per_tool)
        for tool, value in per_tool.items():
            if not isinstance(tool, str) or not isinstance(value, int) or value < 0:
                raise ValueError(
                    "UsageLimits.per_tool maps tool names to non-negative ints, got "
                    f"{tool!r}: {value!r}"
                )
        object.__setattr__(self, "per_tool", per_tool)
        if self.on_exceeded not in ("raise", "answer"):
            raise ValueError(
                f"UsageLimits.on_exceeded is 'raise' or 'answer', not {self.on_exceeded!r}"
            )

    @property
    def counts_tokens(self) -> bool:
        """Whether a token limit is set."""
        return (
            self.input_tokens is not None
            or self.output_tokens is not None
            or self.total_tokens is not None
        )


@dataclass(slots=True, kw_only=True)
class RunUsage:
    """What a conversation used so far: model requests, tool calls run (in total and per
    tool name) and tokens (None while no provider reported them)."""

    requests: int = 0
    tool_calls: int = 0
    per_tool: dict[str, int] = field(default_factory=dict)
    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None

    def copy(self) -> RunUsage:
        """An independent copy."""
        return RunUsage(
            requests=self.requests,
            tool_calls=self.tool_calls,
            per_tool=dict(self.per_tool),
            input_tokens=self.input_tokens,
            output_tokens=self.output_tokens,
            total_tokens=self.total_tokens,
        )


class UsageLimitExceeded(ToolweaveError, RuntimeError):
    """A conversation would have gone past one of its `UsageLimits`; the step that would
    have done so was not taken. `limit` names the field (`"requests"`, `"tool_calls"`,
    `"per_tool"`, `"input_tokens"`, ...), `tool_name` the tool for `"per_tool"`, `allowed`
    the limit, `used` what the conversation had used (or, for tool calls, would have with
    the round refused), `usage` a `RunUsage` of everything used; `partial_result` is the
    valid history so far (every tool call answered)."""

    default_code = ErrorCode.USAGE_LIMIT_EXCEEDED

    def __init__(
        self,
        message: str,
        *,
        limit: str,
        allowed: int,
        used: int,
        usage: RunUsage | None = None,
        tool_name: str | None = None,
    ) -> None:
        super().__init__(
            message,
            details={"limit": limit, "allowed": allowed, "used": used, "tool_name": tool_name},
        )
        self.limit = limit
        self.allowed = allowed
        self.used = used
        self.usage = usage if usage is not None else RunUsage()
        self.tool_name = tool_name
        self.partial_result: Any = None
        """The `ToolChatResult` of the history so far (set by the loop)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (self.message, self.limit, self.allowed, self.used, self.usage, self.tool_name),
        )


def _rebuild(
    message: str, limit: str, allowed: int, used: int, usage: RunUsage, tool_name: str | None
) -> UsageLimitExceeded:
    return UsageLimitExceeded(
        message, limit=limit, allowed=allowed, used=used, usage=usage, tool_name=tool_name
    )
