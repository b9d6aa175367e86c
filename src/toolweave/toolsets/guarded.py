"""`GuardedToolset`: guardrails around every call of a set's tools."""

from __future__ import annotations

from collections.abc import Sequence

from ..tools.guardrails import Guardrail, check_guardrails
from .abstract import Toolset, ToolsetTool
from .wrapper import WrapperToolset

__all__ = ["GuardedToolset"]


class GuardedToolset(WrapperToolset):
    """Offers the tools of `inner` with `guardrails` (`InputGuardrail`s, `OutputGuardrail`s)
    put before the ones their cards hold: a `ToolService` runs the service's guardrails,
    then this set's (an outer `.guarded` before an inner one), then the tool's own."""

    def __init__(self, inner: Toolset, *guardrails: Guardrail) -> None:
        super().__init__(inner)
        self.guardrails = check_guardrails(guardrails)

    @property
    def label(self) -> str:
        return f"{self.inner.label}.guarded(...)"

    def transform(self, tools: Sequence[ToolsetTool]) -> Sequence[ToolsetTool]:
        if not self.guardrails:
            return tools
        out = []
        for t in tools:
            kept = self._copies.get(id(t))
            if kept is not None and kept[0] is t:
                out.append(kept[2])
            else:
                card = t.card.model_copy(
                    update={"guardrails": (*self.guardrails, *t.card.guardrails)}
                )
                out.append(self.derived(t, card))
        return out


Toolset._transforms["guarded"] = GuardedToolset
