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

`EmbeddingToolSearch(embed)` ranks by cosine similarity with the user's own embedding
function instead (no model is bundled). Any `ToolSearchStrategy` subclass works, for the
service and for a toolset's `.searchable(strategy)` (docs/toolsets.md).

`NativeToolSearch(fallback)` (`ToolService(tool_search="native")`) lets a provider that
searches tools itself do it: with such a model every tool is sent, the hidden ones marked
for deferred loading (`ChatRequestParameters.deferred_tools`) beside the provider's search
tool; with any other model `fallback` searches client-side as above.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from ..errors import ToolArgumentsError
from ..execution.results import ToolExecutionResult
from ..schema.parameters import ToolParameters
from ..tools.card import ToolCard

__all__ = [
    "FOUND_TOOLS_ATTRIBUTE",
    "EmbeddingToolSearch",
    "KeywordToolSearch",
    "NativeToolSearch",
    "ToolSearchStrategy",
    "found_result",
    "native_tool_search",
]

FOUND_TOOLS_ATTRIBUTE = "found_tools"


class ToolSearchStrategy:
    """Base class: a search tool card and a `search` over the hidden tools."""

    card: ToolCard
    always_visible: frozenset[str] = frozenset()

    def search(self, arguments: dict[str, Any], hidden: Sequence[ToolCard]) -> list[ToolCard]:
        """The hidden tools that match `arguments` (the search tool's arguments)."""
        raise NotImplementedError


def found_result(names: Sequence[str], **attributes: Any) -> ToolExecutionResult:
    """The search tool's result for the tools `names` found: the text the model reads, the
    names as the result, and `FOUND_TOOLS_ATTRIBUTE` (plus `attributes`) on the message."""
    text = f"Tools found: {', '.join(names)}" if names else "No matching tools found"
    return ToolExecutionResult(
        text=text,
        result=list(names),
        attributes={FOUND_TOOLS_ATTRIBUTE: list(names), **attributes},
    )


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


Embed = Callable[[Sequence[str]], Sequence[Sequence[float]]]
"""The user's embedding function: one vector per text, in order."""


class EmbeddingToolSearch(ToolSearchStrategy):
    """Semantic tool search with an embedding function of the caller's (`embed(texts)` ->
    one vector per text; no model is bundled). Each card is embedded once (its name and
    description, cached by that text); the model's `query` at each search. The best
    `max_results` by cosine similarity, at least `min_similarity`, ties in order."""

    def __init__(
        self,
        embed: Embed,
        *,
        max_results: int = 5,
        min_similarity: float = 0.0,
        always_visible: Iterable[str] = (),
        tool_name: str = "tool_search_tool",
    ) -> None:
        if max_results < 1:
            raise ValueError("max_results must be at least 1")
        self.embed = embed
        self.max_results = max_results
        self.min_similarity = min_similarity
        self.always_visible = frozenset(always_visible)
        self._vectors: dict[str, Sequence[float]] = {}
        self.card = ToolCard(
            name=tool_name,
            description=(
                "Search the available tools by describing what you need. Call this first "
                "when no visible tool fits the task; the tools found become callable."
            ),
            input_params=ToolParameters().add(
                "query", "string", "what the tool you need should do", required=True
            ),
        )

    def search(self, arguments: dict[str, Any], hidden: Sequence[ToolCard]) -> list[ToolCard]:
        query = arguments.get("query")
        if not isinstance(query, str) or not query.strip():
            raise ToolArgumentsError(
                f"{self.card.name} needs a non-empty string 'query', "
                'e.g. {"query": "the weather in a city"}.',
                tool_name=self.card.name,
            )
        texts = [f"{card.name}: {card.description}" for card in hidden]
        new = [t for t in dict.fromkeys(texts) if t not in self._vectors]
        if new:
            vectors = list(self.embed(new))
            if len(vectors) != len(new):
                raise ValueError(f"embed returned {len(vectors)} vectors for {len(new)} texts")
            self._vectors.update(zip(new, vectors, strict=True))
        wanted = next(iter(self.embed([query])))
        scored: list[tuple[float, int, ToolCard]] = []
        for order, (card, text) in enumerate(zip(hidden, texts, strict=True)):
            similarity = _cosine(wanted, self._vectors[text])
            if similarity >= self.min_similarity:
                scored.append((-similarity, order, card))
        scored.sort(key=lambda item: (item[0], item[1]))
        return [card for _, _, card in scored[: self.max_results]]


def _cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


class NativeToolSearch(ToolSearchStrategy):
    """The provider's own tool search where the model has one (OpenAI Responses'
    `tool_search`, Anthropic's tool search tool): every tool is sent, the hidden ones with
    deferred loading, and the provider finds and loads them; with any other model (and
    through a toolset's `.searchable`) `fallback` searches client-side (default:
    `KeywordToolSearch()`). `always_visible` tools are never deferred."""

    def __init__(
        self, fallback: ToolSearchStrategy | None = None, *, always_visible: Iterable[str] = ()
    ) -> None:
        if fallback is None:
            fallback = KeywordToolSearch(always_visible=always_visible)
        self.fallback = fallback
        self.card = fallback.card
        self.always_visible = frozenset(always_visible) | fallback.always_visible

    def search(self, arguments: dict[str, Any], hidden: Sequence[ToolCard]) -> list[ToolCard]:
        return self.fallback.search(arguments, hidden)


def native_tool_search(model: Any) -> bool:
    """Whether `model` searches deferred tools itself: a provider with
    `supports_tool_search` calling tools natively (not through structured output)."""
    return (
        getattr(model, "supports_tool_search", False) is True
        and getattr(model, "tool_calling", "native") == "native"
    )
