"""`ApprovalRequiredToolset`: every call of a set waits for a decision."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..errors import ToolCardError
from .abstract import Toolset, ToolsetTool
from .wrapper import WrapperToolset

__all__ = ["ApprovalRequiredToolset"]


class ApprovalRequiredToolset(WrapperToolset):
    """Offers the tools of `inner` with `requires_approval=policy` on their cards: True, or
    a function of (arguments, `ToolContext`) returning a bool (docs/approvals.md); False
    lifts what the cards asked."""

    def __init__(self, inner: Toolset, policy: Any = True) -> None:
        super().__init__(inner)
        if not isinstance(policy, bool) and not callable(policy):
            raise ToolCardError(
                "an approval policy is a bool or a function of (arguments, ToolContext), "
                f"got {type(policy).__name__}"
            )
        self.policy = policy

    @property
    def label(self) -> str:
        return f"{self.inner.label}.with_approval()"

    def transform(self, tools: Sequence[ToolsetTool]) -> Sequence[ToolsetTool]:
        out = []
        for t in tools:
            if t.card.requires_approval is self.policy:
                out.append(t)
                continue
            kept = self._copies.get(id(t))
            if kept is not None and kept[0] is t:
                out.append(kept[2])
            else:
                card = t.card.model_copy(update={"requires_approval": self.policy})
                out.append(self.derived(t, card))
        return out


Toolset._transforms["with_approval"] = ApprovalRequiredToolset
