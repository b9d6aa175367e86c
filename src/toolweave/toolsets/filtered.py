"""`FilteredToolset`: the tools of a set that a predicate keeps, asked every step."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..tools.card import ToolCard
from .abstract import Toolset, ToolsetTool, same_or_new
from .step import StepContext
from .wrapper import WrapperToolset

__all__ = ["FilteredToolset"]


class FilteredToolset(WrapperToolset):
    """Offers the tools of `inner` for which `predicate(ctx, card)` is true. The predicate
    is asked for every tool at every step, so it may depend on the step (the round, the
    messages, the `context`); when it keeps the same tools the step's tuple is the last
    one (the request is not rebuilt)."""

    def __init__(self, inner: Toolset, predicate: Callable[[StepContext, ToolCard], bool]) -> None:
        super().__init__(inner)
        self.predicate = predicate

    @property
    def label(self) -> str:
        return f"{self.inner.label}.filtered(...)"

    async def get_tools(self, ctx: StepContext) -> Sequence[ToolsetTool]:
        tools = await self.inner.get_tools(ctx)
        self._made = same_or_new(self._made, [t for t in tools if self.predicate(ctx, t.card)])
        return self._made


Toolset._transforms["filtered"] = FilteredToolset
