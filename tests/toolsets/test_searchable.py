"""`.searchable(strategy)`: the model sees a search tool plus the tools of the set found so
far; keyword search built in, an embedding strategy with the caller's own function. The
exact tools of every request (`ScriptedChatModel.requests`), through the four faces."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from toolweave import AiMessage, ScriptedChatModel, ToolCardError, ToolService, tool
from toolweave.service.search import EmbeddingToolSearch, KeywordToolSearch
from toolweave.toolsets import FunctionToolset

from ..service.helpers import MODES, ai_calls, call, run


@tool
def get_weather(city: str) -> str:
    """Current weather conditions in a city."""
    return f"sunny in {city}"


@tool
def get_stock(symbol: str) -> str:
    """Latest stock price for a ticker symbol."""
    return "42.0"


@tool
def get_news(topic: str) -> str:
    """Headlines about a topic."""
    return "nothing new"


def offered(model: ScriptedChatModel) -> list[list[str]]:
    return [[c.name for c in r.parameters.tools or ()] for r in model.requests]


SEARCH = "tool_search_tool"


@pytest.mark.parametrize("mode", MODES)
def test_a_searchable_set_shows_the_search_tool_and_then_what_was_found(mode: str) -> None:
    model = ScriptedChatModel(
        [
            ai_calls(call(SEARCH, '{"terms": ["weather"]}', id="s1")),
            ai_calls(call("get_weather", '{"city": "Oslo"}', id="w1")),
            AiMessage("sunny"),
        ]
    )
    toolset = FunctionToolset(get_weather, get_stock, get_news).searchable(
        KeywordToolSearch(always_visible=["get_news"])
    )
    result = run(mode, ToolService(toolsets=[toolset]), model)
    assert result.text == "sunny"
    assert offered(model) == [
        ["get_news", SEARCH],
        ["get_weather", "get_news", SEARCH],
        ["get_weather", "get_news", SEARCH],
    ]
    found = result.tool_executions[0].result
    assert found.text == "Tools found: get_weather" and found.result == ["get_weather"]
    assert [e.result.text for e in result.tool_executions][1] == "sunny in Oslo"

    # the finds are in the history: a continued conversation sees the same tools
    model = ScriptedChatModel([AiMessage("still sunny")])
    ToolService(toolsets=[toolset]).chat(model, None, [*result.messages])
    assert offered(model) == [["get_weather", "get_news", SEARCH]]


def test_a_hidden_tool_called_directly_is_unknown_and_bad_arguments_are_an_error_result() -> None:
    model = ScriptedChatModel(
        [
            ai_calls(call("get_stock", '{"symbol": "X"}', id="x1")),
            ai_calls(call(SEARCH, '{"terms": []}', id="s1")),
            AiMessage("ok"),
        ]
    )
    toolset = FunctionToolset(get_weather, get_stock).searchable()
    result = ToolService(toolsets=[toolset]).chat(model, None, "hi")
    first, second = (e.result for e in result.tool_executions)
    assert first.is_error and "get_stock" in first.text
    assert second.is_error and "non-empty array of strings 'terms'" in second.text
    assert offered(model) == [[SEARCH], [SEARCH], [SEARCH]]


WORDS = ["weather", "stock", "news", "rain", "price"]


def bag_of_words(texts: Sequence[str]) -> list[list[float]]:
    """The caller's embedding function (here: counts of a few words)."""
    calls.append(list(texts))
    return [[float(t.lower().count(w)) for w in WORDS] for t in texts]


calls: list[list[str]] = []


def test_an_embedding_strategy_ranks_by_similarity_and_embeds_each_card_once() -> None:
    calls.clear()
    strategy = EmbeddingToolSearch(bag_of_words, max_results=1, min_similarity=0.1)
    model = ScriptedChatModel(
        [
            ai_calls(call(SEARCH, '{"query": "will it rain, what is the weather"}', id="s1")),
            ai_calls(call(SEARCH, '{"query": "share price of a stock"}', id="s2")),
            ai_calls(call(SEARCH, '{"query": "zzz"}', id="s3")),
            AiMessage("done"),
        ]
    )
    toolset = FunctionToolset(get_weather, get_stock, get_news).searchable(strategy)
    result = ToolService(toolsets=[toolset]).chat(model, None, "hi")
    assert [e.result.result for e in result.tool_executions] == [
        ["get_weather"],
        ["get_stock"],
        [],
    ]
    assert offered(model) == [
        [SEARCH],
        ["get_weather", SEARCH],
        ["get_weather", "get_stock", SEARCH],
        ["get_weather", "get_stock", SEARCH],
    ]
    # the three cards in one batch at the first search, never again; then each query
    assert [len(texts) for texts in calls] == [3, 1, 1, 1]
    assert strategy.card.input_params is not None


def test_a_tool_named_like_the_search_tool_is_an_error() -> None:
    @tool(name=SEARCH)
    def clash() -> str:
        """Clash."""
        return "x"

    toolset = FunctionToolset(clash).searchable()
    with pytest.raises(ToolCardError, match="search tool"):
        ToolService(toolsets=[toolset]).chat(ScriptedChatModel(["ok"]), None, "hi")
