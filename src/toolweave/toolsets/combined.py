"""`CombinedToolset`: the union of several toolsets."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from ..chat.request import ToolChoice
from .abstract import ToolNameConflictError, Toolset, ToolsetTool, same_or_new
from .choosing import merge_choices
from .step import StepContext

__all__ = ["CombinedToolset", "check_unique"]


def check_unique(offered: Sequence[tuple[Toolset, Sequence[ToolsetTool]]]) -> None:
    """Raise `ToolNameConflictError` naming both sets when a name is offered twice."""
    owners: dict[str, Toolset] = {}
    for toolset, tools in offered:
        for t in tools:
            name = t.card.name
            first = owners.get(name)
            if first is not None:
                raise ToolNameConflictError(name, first.label, toolset.label)
            owners[name] = toolset


class CombinedToolset(Toolset):
    """Offers the tools of every toolset given, in order; a name offered by two of them in
    one step is a `ToolNameConflictError` naming both. Instructions are joined."""

    def __init__(self, *toolsets: Toolset, label: str | None = None) -> None:
        self.toolsets = tuple(toolsets)
        self._label = label
        self._seen: tuple[Sequence[ToolsetTool], ...] | None = None
        self._made: tuple[ToolsetTool, ...] | None = None

    @property
    def label(self) -> str:
        if self._label is not None:
            return self._label
        return f"CombinedToolset({', '.join(t.label for t in self.toolsets)})"

    async def get_tools(self, ctx: StepContext) -> Sequence[ToolsetTool]:
        if len(self.toolsets) == 1:
            results: tuple[Sequence[ToolsetTool], ...] = (await self.toolsets[0].get_tools(ctx),)
        else:
            results = tuple(await asyncio.gather(*(t.get_tools(ctx) for t in self.toolsets)))
        seen = self._seen
        if (
            self._made is not None
            and seen is not None
            and all(a is b for a, b in zip(seen, results, strict=True))
        ):
            return self._made
        check_unique(list(zip(self.toolsets, results, strict=True)))
        self._made = same_or_new(self._made, [t for tools in results for t in tools])
        self._seen = results
        return self._made

    async def tool_choice(self, ctx: StepContext) -> ToolChoice | None:
        choices = [await t.tool_choice(ctx) for t in self.toolsets]
        if all(c is None for c in choices) or self._seen is None:
            return None
        return merge_choices(
            [
                (c, [t.card.name for t in tools])
                for c, tools in zip(choices, self._seen, strict=True)
            ]
        )

    async def instructions(self, ctx: StepContext) -> str | None:
        texts = [await t.instructions(ctx) for t in self.toolsets]
        joined = "\n\n".join(t for t in texts if t)
        return joined or None
