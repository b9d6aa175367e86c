"""`LimitedToolset`: result caps and an argument-retry budget for every tool of a set."""

from __future__ import annotations

from collections.abc import Sequence

from ..errors import ToolCardError
from .abstract import Toolset, ToolsetTool
from .wrapper import WrapperToolset

__all__ = ["LimitedToolset"]

_FIELDS = ("max_result_chars", "max_result_tokens", "max_argument_retries")


class LimitedToolset(WrapperToolset):
    """Offers the tools of `inner` with these limits: `max_result_chars` /
    `max_result_tokens` cap the result text the model receives (docs/policies.md, "Tool
    output limits"), `max_argument_retries` is the budget of argument errors and
    `ModelRetry`s (docs/policies.md, "Retries"). The most specific value wins: a card's
    own, then the innermost set's, then this one, then the service's."""

    def __init__(
        self,
        inner: Toolset,
        *,
        max_result_chars: int | None = None,
        max_result_tokens: int | None = None,
        max_argument_retries: int | None = None,
    ) -> None:
        super().__init__(inner)
        for name, value, least in (
            ("max_result_chars", max_result_chars, 1),
            ("max_result_tokens", max_result_tokens, 1),
            ("max_argument_retries", max_argument_retries, 0),
        ):
            if value is not None and value < least:
                raise ToolCardError(f"{name} must be at least {least} (or None), got {value}")
        self.limits = {
            "max_result_chars": max_result_chars,
            "max_result_tokens": max_result_tokens,
            "max_argument_retries": max_argument_retries,
        }

    @property
    def label(self) -> str:
        return f"{self.inner.label}.limited(...)"

    def transform(self, tools: Sequence[ToolsetTool]) -> Sequence[ToolsetTool]:
        out = []
        for t in tools:
            changes = {
                k: v for k, v in self.limits.items() if v is not None and getattr(t, k) is None
            }
            out.append(self.derived(t, t.card, **changes) if changes else t)
        return out


Toolset._transforms["limited"] = LimitedToolset
