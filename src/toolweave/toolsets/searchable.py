"""`SearchableToolset`: tool search as a transform. The model sees a search tool plus the
tools of the set found so far in the conversation; the search itself is a
`ToolSearchStrategy` (`toolweave.service.search`: `KeywordToolSearch`,
`EmbeddingToolSearch(embed)`, or one of yours), the same strategies
`ToolService(tool_search=...)` takes."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..chat.messages import ToolExecutionResultMessage
from ..errors import ToolCardError
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecutionResult
from ..schema.arguments import parse_arguments
from ..tools.card import ToolCard
from .abstract import Toolset, ToolsetTool
from .step import StepContext
from .wrapper import WrapperToolset

__all__ = ["FOUND_BY_ATTRIBUTE", "SearchableToolset", "is_search_tool"]

FOUND_BY_ATTRIBUTE = "found_by"
"""On a search result message: the name of the search tool that found its tools (so each
searchable set knows its own finds, from the history alone)."""


def _search() -> Any:
    # the strategies live with the service's tool search; imported when first needed, as
    # the service package imports this one
    from ..service import search

    return search


class SearchableToolset(WrapperToolset):
    """Offers `strategy`'s search tool and, of `inner`'s tools, those found so far in the
    conversation (and the strategy's `always_visible`). The finds are read from the
    history (the search results carry them), so a continued or replayed conversation sees
    the same tools; calling the search tool searches the tools not visible yet.

    Apply it outermost: the search reports the names this set offers."""

    def __init__(self, inner: Toolset, strategy: Any = None) -> None:
        super().__init__(inner)
        self.strategy = strategy if strategy is not None else _search().KeywordToolSearch()
        self._last: tuple[Sequence[ToolsetTool], tuple[str, ...], tuple[ToolsetTool, ...]] | None
        self._last = None

    @property
    def label(self) -> str:
        return f"{self.inner.label}.searchable(...)"

    def found(self, messages: Sequence[Any]) -> tuple[str, ...]:
        """The names this set's search tool found in `messages`, first find first."""
        name = self.strategy.card.name
        key = _search().FOUND_TOOLS_ATTRIBUTE
        names: dict[str, None] = {}
        for m in messages:
            if (
                isinstance(m, ToolExecutionResultMessage)
                and m.attributes.get(FOUND_BY_ATTRIBUTE) == name
            ):
                names.update(dict.fromkeys(m.attributes.get(key) or ()))
        return tuple(names)

    async def get_tools(self, ctx: StepContext) -> Sequence[ToolsetTool]:
        tools = await self.inner.get_tools(ctx)
        found = self.found(ctx.messages)
        last = self._last
        if last is not None and last[0] is tools and last[1] == found:
            return last[2]
        card: ToolCard = self.strategy.card
        if any(t.card.name == card.name for t in tools):
            raise ToolCardError(
                f"{self.inner.label} offers a tool named {card.name!r}, the name of its "
                "search tool; give the strategy another tool_name"
            )
        shown = set(found) | set(self.strategy.always_visible)
        visible = [t for t in tools if t.card.name in shown]
        hidden = tuple(t.card for t in tools if t.card.name not in shown)
        search = ToolsetTool.of(card, _SearchExecutor(self.strategy, hidden))
        made = (*visible, search)
        self._last = (tools, found, made)
        return made


class _SearchExecutor:
    """Runs the search tool of one step over the cards hidden in it."""

    def __init__(self, strategy: Any, hidden: tuple[ToolCard, ...]) -> None:
        self.strategy = strategy
        self.hidden = hidden

    async def aexecute_with_result(
        self, request: ToolExecutionRequest, memory_id: Any = None, **kwargs: Any
    ) -> ToolExecutionResult:
        arguments = parse_arguments(request.arguments, tool_name=request.name)
        cards = self.strategy.search(arguments, self.hidden)
        names = [c.name for c in cards]
        result: ToolExecutionResult = _search().found_result(
            names, **{FOUND_BY_ATTRIBUTE: self.strategy.card.name}
        )
        return result


def is_search_tool(tool: Any) -> bool:
    """Whether `tool` (a `ToolsetTool`) is a `.searchable` set's own search tool (which a
    provider-native search must not defer)."""
    return isinstance(getattr(tool, "executor", None), _SearchExecutor)


Toolset._transforms["searchable"] = SearchableToolset
