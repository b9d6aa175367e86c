"""Tool search: for toolsets too large to send every turn.

With `ToolService(tool_search=KeywordToolSearch())` the model first sees only the
always-visible tools plus a search tool; calling it with search terms reveals the best
matching tools, which stay visible for the rest of the conversation (they are remembered in
the `found_tools` attribute of the search result message, so a continued conversation keeps
them).

Scoring (LangChain4j's `SimpleToolSearchStrategy` rules): terms are split on whitespace,
lower-cased and de-duplicated; a tool scores +2 for each term its name contains and +1 for
each term its description contains; tools below `min_score` are dropped; the best
`max_results` are returned, ties in registration order.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..errors import ToolArgumentsError
from ..schema.parameters import ToolParameters
from ..tools.card import ToolCard

__all__ = ["FOUND_TOOLS_ATTRIBUTE", "KeywordToolSearch", "ToolSearchStrategy"]

FOUND_TOOLS_ATTRIBUTE = "found_tools"


class ToolSearchStrategy:
    """Base class: a search tool card and a `search` over the hidden tools."""

    card: ToolCard
    always_visible: frozenset[str] = frozenset()

    def search(self, arguments: dict[str, Any], hidden: Sequence[ToolCard]) -> list[ToolCard]:
        """The hidden tools that match `arguments` (the search tool's arguments)."""
        raise NotImplementedError


class KeywordToolSearch(ToolSearchStrategy):
    """Keyword scoring over tool names and descriptions (see the module docstring)."""

    def __init__(
        self,
        *,
        max_results: int = 5,
        min_score: int = 1,
        always_visible: Iterable[str] = (),
        tool_name: str = "tool_search_tool",
    ) -> None:
        if max_results < 1:
            raise ValueError("max_results must be at least 1")
        self.max_results = max_results
        self.min_score = min_score
        self.always_visible = frozenset(always_visible)
        self.card = ToolCard(
            name=tool_name,
            description=(
                "Search the available tools by keywords. Call this first when no visible tool "
                "fits the task; the tools found become callable."
            ),
            input_params=ToolParameters().add(
                "terms",
                "array",
                "keywords describing the tool you need",
                required=True,
                items={"type": "string"},
            ),
        )

    def search(self, arguments: dict[str, Any], hidden: Sequence[ToolCard]) -> list[ToolCard]:
        raw = arguments.get("terms")
        if isinstance(raw, str):
            raw = [raw]
        if not isinstance(raw, list) or not all(isinstance(t, str) for t in raw) or not raw:
            raise ToolArgumentsError(
                f"{self.card.name} needs a non-empty array of strings 'terms', "
                'e.g. {"terms": ["weather", "forecast"]}.',
                tool_name=self.card.name,
            )
        terms: list[str] = []
        for chunk in raw:
            for term in chunk.lower().split():
                if term not in terms:
                    terms.append(term)
        scored: list[tuple[int, int, ToolCard]] = []
        for order, card in enumerate(hidden):
            name = card.name.lower()
            description = card.description.lower()
            score = sum(2 for t in terms if t in name) + sum(1 for t in terms if t in description)
            if score >= self.min_score:
                scored.append((-score, order, card))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [card for _, _, card in scored[: self.max_results]]
