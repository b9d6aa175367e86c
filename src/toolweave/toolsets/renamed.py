"""`RenamedToolset`: some tools of a set under other names."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..tools.card import check_tool_name
from .abstract import Toolset, ToolsetTool
from .wrapper import WrapperToolset

__all__ = ["RenamedToolset"]


class RenamedToolset(WrapperToolset):
    """Offers the tools of `inner` named in `names` (old name -> new name) under their new
    names, the others as they are. A name the set does not offer is ignored (a live set may
    offer it later)."""

    def __init__(self, inner: Toolset, names: Mapping[str, str]) -> None:
        super().__init__(inner)
        self.names = {old: check_tool_name(new) for old, new in names.items()}

    @property
    def label(self) -> str:
        return f"{self.inner.label}.renamed({self.names!r})"

    def outer_name(self, name: str) -> str:
        return self.names.get(name, name)

    def transform(self, tools: Sequence[ToolsetTool]) -> Sequence[ToolsetTool]:
        out = []
        for t in tools:
            new = self.names.get(t.card.name)
            if new is None:
                out.append(t)
                continue
            kept = self._copies.get(id(t))
            if kept is not None and kept[0] is t:
                out.append(kept[2])
            else:
                out.append(self.derived(t, t.card.model_copy(update={"name": new})))
        return out


Toolset._transforms["renamed"] = RenamedToolset
