"""`PrefixedToolset`: every tool of a set under a prefixed name."""

from __future__ import annotations

from collections.abc import Sequence

from ..tools.card import check_tool_name
from .abstract import Toolset, ToolsetTool
from .wrapper import WrapperToolset

__all__ = ["PrefixedToolset"]


class PrefixedToolset(WrapperToolset):
    """Offers each tool of `inner` as `prefix + separator + name` (calls run the tool)."""

    def __init__(self, inner: Toolset, prefix: str, *, separator: str = "_") -> None:
        super().__init__(inner)
        check_tool_name(prefix + separator + "x")
        self.prefix = prefix + separator

    @property
    def label(self) -> str:
        return f"{self.inner.label}.prefixed({self.prefix!r})"

    def outer_name(self, name: str) -> str:
        return self.prefix + name

    def transform(self, tools: Sequence[ToolsetTool]) -> Sequence[ToolsetTool]:
        out = []
        for t in tools:
            kept = self._copies.get(id(t))
            if kept is not None and kept[0] is t:
                out.append(kept[2])
                continue
            name = check_tool_name(self.prefix + t.card.name)
            out.append(self.derived(t, t.card.model_copy(update={"name": name})))
        return out


Toolset._transforms["prefixed"] = PrefixedToolset
