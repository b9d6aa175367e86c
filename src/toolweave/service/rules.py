"""Service-level approval rules (`ToolService.allow`, `ToolService.deny`) and how they
combine with a conversation's standing decisions (docs/approvals.md).

A rule names tools (names or shell-style globs) and optionally limits itself to some
arguments (`when`: an `ArgumentPattern`, or a function of the arguments). Rules and standing
decisions are evaluated on the validated arguments, defaults filled in (what the tool will
receive). Any deny that matches wins; else any allow that matches lets the call run without
asking; else the tool's own `requires_approval` decides.
"""

from __future__ import annotations

import fnmatch
import inspect
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from .approvals import Approve, ArgumentPattern, StandingDecision, check_pattern, matches_pattern

__all__ = ["ApprovalRule", "Verdict", "evaluate"]

logger = logging.getLogger("toolweave.service")

DENIED_BY_RULE = "This tool call is not allowed by the application's rules."


@dataclass(frozen=True, slots=True)
class ApprovalRule:
    """Allow or deny calls of the tools named by `tools` (names or globs), limited to the
    arguments `when` matches (a pattern or a function; None: any arguments)."""

    effect: Literal["allow", "deny"]
    tools: tuple[str, ...]
    when: ArgumentPattern | Callable[[dict[str, Any]], Any] | None = None
    message: str = DENIED_BY_RULE

    @classmethod
    def make(
        cls,
        effect: Literal["allow", "deny"],
        tools: Sequence[str],
        when: Any,
        message: str | None,
    ) -> ApprovalRule:
        """A checked rule (a `TypeError` / `ValueError` for what cannot be one)."""
        names = tuple(tools)
        if not names or not all(isinstance(n, str) and n for n in names):
            raise TypeError("name the tools a rule is for (names or globs, as str)")
        if when is not None and not callable(when):
            when = check_pattern(when)
        elif inspect.iscoroutinefunction(when):
            raise TypeError("a rule's when= function must be a plain (sync) function")
        if message is not None and not isinstance(message, str):
            raise TypeError("a rule's message must be a str")
        return cls(effect, names, when, message or DENIED_BY_RULE)

    def names(self, tool_name: str) -> bool:
        """Whether the rule is for `tool_name`."""
        return any(fnmatch.fnmatchcase(tool_name, pattern) for pattern in self.tools)

    def matches(self, tool_name: str, arguments: Mapping[str, Any] | None) -> bool:
        """Whether the rule covers this call (`arguments` None: they are not valid). A
        limit that cannot be checked (arguments not valid, a function that raises) makes a
        deny match and an allow not: when in doubt, the call is not let through."""
        if not self.names(tool_name):
            return False
        if self.when is None:
            return True
        if arguments is None:
            return self.effect == "deny"
        if not callable(self.when):
            return matches_pattern(self.when, arguments)
        try:
            return self.when(dict(arguments)) is True
        except Exception as e:
            logger.warning(
                "the %s rule for %s failed on a call of %s (%s: %s); treated as %s",
                self.effect,
                ", ".join(self.tools),
                tool_name,
                type(e).__name__,
                e,
                "matching" if self.effect == "deny" else "not matching",
            )
            return self.effect == "deny"


Verdict = tuple[Literal["deny"], str] | tuple[Literal["allow"], Approve]
"""What rules and standing decisions say about a call: denied (with the message the model
gets) or allowed (with the decision the tool sees as `ctx.approval` if it paused itself)."""


def evaluate(
    rules: Sequence[ApprovalRule],
    standing: Sequence[StandingDecision],
    tool_name: str,
    arguments: Mapping[str, Any] | None,
) -> Verdict | None:
    """The verdict for a call of `tool_name` with `arguments` (validated; None when not
    valid), or None: neither a rule nor a standing decision covers it. Deny wins."""
    for rule in rules:
        if rule.effect == "deny" and rule.matches(tool_name, arguments):
            return ("deny", rule.message)
    for decision in standing:
        if decision.decision == "deny" and decision.covers(tool_name, arguments):
            return ("deny", decision.message or "The user does not allow this tool call.")
    for rule in rules:
        if rule.effect == "allow" and rule.matches(tool_name, arguments):
            return ("allow", Approve())
    for decision in standing:
        if decision.decision == "approve" and decision.covers(tool_name, arguments):
            return ("allow", Approve(always=True, when=decision.when))
    return None
