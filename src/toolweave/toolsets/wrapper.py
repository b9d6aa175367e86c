"""`WrapperToolset`: the base of the transforms, a toolset over another one."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from ..chat.request import ToolChoice
from ..tools.card import ToolCard
from .abstract import Toolset, ToolsetTool, same_or_new
from .step import StepContext

__all__ = ["WrapperToolset"]


class WrapperToolset(Toolset):
    """Offers what `inner` offers, passed through `transform` (identity by default).

    `transform` runs only when the inner set's tools changed since the last step (same
    tuple object): a static set under static transforms costs one identity check a step.
    A transform that depends on the step overrides `get_tools` instead."""

    def __init__(self, inner: Toolset) -> None:
        self.inner = inner
        self._seen: tuple[ToolsetTool, ...] | None = None
        self._made: tuple[ToolsetTool, ...] | None = None
        self._copies: dict[int, tuple[ToolsetTool, ToolCard, ToolsetTool]] = {}

    @property
    def label(self) -> str:
        return self.inner.label

    async def get_tools(self, ctx: StepContext) -> Sequence[ToolsetTool]:
        tools = await self.inner.get_tools(ctx)
        if tools is not self._seen or self._made is None:
            self._made = same_or_new(self._made, self.transform(tools))
            self._seen = tools if isinstance(tools, tuple) else None
        return self._made

    def transform(self, tools: Sequence[ToolsetTool]) -> Sequence[ToolsetTool]:
        """The tools to offer for the inner set's `tools`."""
        return tools

    def derived(self, tool: ToolsetTool, card: ToolCard, **changes: Any) -> ToolsetTool:
        """`tool` offered with `card`: the same copy as last time when neither changed (so
        the step's tuple keeps its identity), else a new one sharing the tool's limit."""
        if card is tool.card and not changes:
            return tool
        kept = self._copies.get(id(tool))
        if kept is not None and kept[0] is tool and (kept[1] is card or kept[1] == card):
            return kept[2]
        made = dataclasses.replace(tool, card=card, **changes)
        if len(self._copies) > 4 * len(self._made or ()) + 64:
            self._copies.clear()  # tools the inner set no longer offers
        self._copies[id(tool)] = (tool, card, made)
        return made

    async def instructions(self, ctx: StepContext) -> str | None:
        return await self.inner.instructions(ctx)

    async def tool_choice(self, ctx: StepContext) -> ToolChoice | None:
        choice = await self.inner.tool_choice(ctx)
        if choice is None or type(self).outer_name is WrapperToolset.outer_name:
            return choice
        return choice.renamed(self.outer_name)

    def outer_name(self, name: str) -> str:
        """The name this set offers the inner set's tool `name` under (a renaming
        transform overrides it, so a `ToolChoice` of the inner set keeps naming its tools)."""
        return name
