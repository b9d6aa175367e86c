"""`ChoosingToolset`: a function picks, every step, which of a set's tools the model may
call (a `ToolChoice`), while every tool stays offered; and `merge_choices`, the one choice
for the union of several sets."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..chat.request import ToolChoice
from .abstract import Toolset, ToolsetTool
from .step import StepContext
from .wrapper import WrapperToolset

__all__ = ["ChoosingToolset", "merge_choices"]


class ChoosingToolset(WrapperToolset):
    """Offers what `inner` offers; per step, `choose(ctx, cards)` (sync or async) returns
    the `ToolChoice` for the set's tools: `ToolChoice.allowed_tools([...])` (optionally
    `required=True`), `ToolChoice.tool(name)`, `REQUIRED`, `NONE`, or None (no
    restriction). The names are the set's as it offers them."""

    def __init__(self, inner: Toolset, choose: Callable[..., Any]) -> None:
        super().__init__(inner)
        self.choose = choose
        self._chosen: tuple[StepContext, ToolChoice | None] | None = None

    @property
    def label(self) -> str:
        return f"{self.inner.label}.choosing(...)"

    async def get_tools(self, ctx: StepContext) -> Sequence[ToolsetTool]:
        tools = await super().get_tools(ctx)
        choice = self.choose(ctx, [t.card for t in tools])
        if inspect.isawaitable(choice):
            choice = await choice
        if choice is not None and not isinstance(choice, ToolChoice):
            raise TypeError(
                f"the choose function of {self.inner.label} returned {choice!r}, not a "
                "ToolChoice or None"
            )
        self._chosen = (ctx, choice)
        return tools

    async def tool_choice(self, ctx: StepContext) -> ToolChoice | None:
        chosen = self._chosen
        if chosen is not None and chosen[0] is ctx:
            return chosen[1]
        return await self.inner.tool_choice(ctx)


def merge_choices(
    answers: Sequence[tuple[ToolChoice | None, Sequence[str]]],
) -> ToolChoice | None:
    """One choice for the union of sets, from each set's (choice, tool names) of the step:
    None when no set restricts; else each set allows what its choice names among its tools
    (all of them when it gives None), the union is allowed, and a call is required when
    any set's choice requires one. Allowing every tool is plain `AUTO` / `REQUIRED`; allowing
    none is `NONE`."""
    if all(choice is None for choice, _ in answers):
        return None
    names: list[str] = []
    every = True
    required = False
    for choice, offered in answers:
        if choice is None:
            names.extend(offered)
            continue
        required = required or choice.forces
        allowed = choice.names_in(offered)
        every = every and len(allowed) == len(offered)
        names.extend(allowed)
    if not names:
        return ToolChoice.NONE
    if every:
        return ToolChoice.REQUIRED if required else ToolChoice.AUTO
    if required and len(names) == 1:
        return ToolChoice.tool(names[0])
    return ToolChoice.allowed_tools(names, required=required)


Toolset._transforms["choosing"] = ChoosingToolset
