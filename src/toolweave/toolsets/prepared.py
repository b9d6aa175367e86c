"""`PreparedToolset`: a function chooses and edits the cards of a set, every step."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import ToolCardError
from .abstract import Toolset, ToolsetTool, same_or_new
from .step import StepContext
from .wrapper import WrapperToolset

__all__ = ["PreparedToolset"]


class PreparedToolset(WrapperToolset):
    """Per step, `prepare(ctx, cards)` (sync or async) gets the cards `inner` offers and
    returns the cards to offer: leave some out to hide those tools, return a changed copy
    (`card.model_copy(update={...})`: a description, a narrower `input_params`) to change
    one. Names must stay (use `.renamed` to rename); returning None offers the cards
    unchanged. Unchanged cards (equal to last step's) keep the request cached."""

    def __init__(self, inner: Toolset, prepare: Callable[..., Any]) -> None:
        super().__init__(inner)
        self.prepare = prepare

    @property
    def label(self) -> str:
        return f"{self.inner.label}.prepared(...)"

    async def get_tools(self, ctx: StepContext) -> Sequence[ToolsetTool]:
        tools = await self.inner.get_tools(ctx)
        cards = self.prepare(ctx, [t.card for t in tools])
        if inspect.isawaitable(cards):
            cards = await cards
        if cards is None:
            self._made = same_or_new(self._made, tools)
            return self._made
        by_name = {t.card.name: t for t in tools}
        out = []
        for card in cards:
            t = by_name.get(card.name)
            if t is None:
                raise ToolCardError(
                    f"the prepare function of {self.inner.label} returned a card named "
                    f"{card.name!r}, which the set does not offer (names must stay; use "
                    ".renamed({...}) to rename)"
                )
            out.append(self.derived(t, card))
        self._made = same_or_new(self._made, out)
        return self._made


Toolset._transforms["prepared"] = PreparedToolset
