"""`SourceToolset`: the tools of a `ToolSource` (an MCP server's listing), kept in step."""

from __future__ import annotations

import fnmatch
import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import ToolCardError
from ..execution.executor import DefaultToolExecutor
from ..tools.base import Tool
from ..tools.card import ToolCard
from ..tools.source import ToolSource
from .abstract import Toolset, ToolsetTool
from .step import StepContext

__all__ = ["NameFilter", "SourceToolset"]

logger = logging.getLogger("toolweave.toolsets")

NameFilter = Iterable[str] | str | Callable[[ToolCard], bool]
"""Names (each may be a glob: `"get_*"`), one name or glob, or a predicate of the card."""


def _matcher(spec: NameFilter) -> Callable[[ToolCard], bool]:
    if callable(spec):
        return spec
    patterns = [spec] if isinstance(spec, str) else list(spec)
    exact = {p for p in patterns if not any(c in p for c in "*?[")}
    globs = [p for p in patterns if p not in exact]

    def matches(card: ToolCard) -> bool:
        return card.name in exact or any(fnmatch.fnmatchcase(card.name, g) for g in globs)

    return matches


class SourceToolset(Toolset):
    """The tools of a `ToolSource`, listed again before the step that follows each change
    notice (an MCP server's `notifications/tools/list_changed`): added tools appear,
    removed ones go, changed ones are replaced.

    `listing` is what `McpClient.list_tools()` returns (a list of tools whose
    `tool_source` is the client), or a `ToolSource` itself (listed at the first step).
    `include` and `exclude` (names, globs or a predicate of the card) apply to every
    listing, so a filtered set keeps following the server. `instructions` (e.g. the
    server's own) are added to the system text. `max_concurrency`, `parallel_safe` and
    `requires_approval` apply to every tool, as for `ToolService.tools`."""

    def __init__(
        self,
        listing: Sequence[Tool] | ToolSource,
        *,
        include: NameFilter | None = None,
        exclude: NameFilter | None = None,
        instructions: str | None = None,
        label: str | None = None,
        max_concurrency: int | None = None,
        parallel_safe: bool | None = None,
        requires_approval: Any = None,
    ) -> None:
        if isinstance(listing, ToolSource) and not isinstance(listing, list):
            source: ToolSource = listing
            tools: Sequence[Tool] | None = None
        else:
            found = getattr(listing, "tool_source", None)
            if not isinstance(found, ToolSource):
                raise ToolCardError(
                    "SourceToolset needs a ToolSource or a listing that has one (what "
                    "McpClient.list_tools() returns); use FunctionToolset for fixed tools"
                )
            source, tools = found, listing
        self.source = source
        self._include = _matcher(include) if include is not None else None
        self._exclude = _matcher(exclude) if exclude is not None else None
        self._instructions = instructions
        self._label = label
        self._options = (max_concurrency, parallel_safe, requires_approval)
        self._by_name: dict[str, ToolsetTool] = {}
        self._offered: tuple[ToolsetTool, ...] | None = None
        self._changes = 1 if tools is None else 0
        self._applied = 0
        if tools is not None:
            self._apply(tools)
        source.watch(self._changed)

    @property
    def label(self) -> str:
        return self._label or f"SourceToolset({self.source!r})"

    def _changed(self) -> None:
        self._changes += 1  # from the source's thread: read at the next step

    def _keeps(self, card: ToolCard) -> bool:
        if self._include is not None and not self._include(card):
            return False
        return self._exclude is None or not self._exclude(card)

    def _apply(self, tools: Sequence[Tool]) -> None:
        by_name: dict[str, ToolsetTool] = {}
        for t in tools:
            if not isinstance(t, Tool):
                raise ToolCardError(f"the listing of {self.source!r} holds a {type(t).__name__}")
            name = t.card.name
            if name in by_name or not self._keeps(t.card):
                continue
            old = self._by_name.get(name)
            if old is not None and old.card == t.card:
                by_name[name] = old
                continue
            max_concurrency, parallel_safe, requires_approval = self._options
            by_name[name] = ToolsetTool.of(
                t.card,
                DefaultToolExecutor(t, propagate_errors=True),
                max_concurrency=max_concurrency,
                parallel_safe=parallel_safe,
                requires_approval=requires_approval,
            )
        if list(by_name.values()) != list(self._by_name.values()) or self._offered is None:
            self._by_name = by_name
            self._offered = tuple(by_name.values())

    async def get_tools(self, ctx: StepContext) -> Sequence[ToolsetTool]:
        seen = self._changes
        if seen != self._applied:
            try:
                tools = await self.source.alist()
            except Exception as e:  # the old tools stay; calls to a dead server fail anyway
                logger.warning("could not list the tools of %r again: %s", self.source, e)
                self._applied = max(self._applied, seen)
            else:
                if seen >= self._applied:  # else a concurrent step applied a newer listing
                    self._applied = seen
                    self._apply(tools)
        return self._offered or ()

    async def instructions(self, ctx: StepContext) -> str | None:
        return self._instructions
