"""Tool search: only the search tool and found tools are sent; found tools persist."""

from __future__ import annotations

from toolweave import (
    AiMessage,
    KeywordToolSearch,
    ScriptedChatModel,
    ToolCard,
    ToolService,
    UserMessage,
)
from toolweave.service.search import FOUND_TOOLS_ATTRIBUTE

from .helpers import ai_calls, call


def _service(n: int = 200) -> ToolService:
    service = ToolService(tool_search=KeywordToolSearch(max_results=2, always_visible={"help"}))
    service.tool(ToolCard(name="help", description="explains things"), lambda r, m: "help")
    for i in range(n):
        service.tool(
            ToolCard(name=f"tool_{i}", description=f"does thing number {i}"), lambda r, m: "ok"
        )
    service.tool(
        ToolCard(name="weather_now", description="current weather of a city"), lambda r, m: "sunny"
    )
    service.tool(
        ToolCard(name="forecast", description="weather forecast for days"), lambda r, m: "rain"
    )
    return service


def test_search_reveals_tools_and_they_persist() -> None:
    model = ScriptedChatModel(
        [
            ai_calls(call("tool_search_tool", '{"terms": ["Weather"]}', id="s")),
            ai_calls(call("weather_now", "{}", id="w")),
            AiMessage("sunny"),
            AiMessage("again"),
        ]
    )
    service = _service()
    result = service.chat(model, None, "weather?")
    first, second, _ = model.requests
    assert [c.name for c in first.tools] == ["help", "tool_search_tool"]
    assert result.tool_executions[0].result.text == "Tools found: weather_now, forecast"
    assert [c.name for c in second.tools] == ["help", "weather_now", "forecast", "tool_search_tool"]
    assert result.text == "sunny"
    search_message = result.messages[2]
    assert search_message.attributes[FOUND_TOOLS_ATTRIBUTE] == ["weather_now", "forecast"]
    service.chat(model, None, [*result.messages, UserMessage("and now?")])
    assert [c.name for c in model.requests[-1].tools] == [
        "help",
        "weather_now",
        "forecast",
        "tool_search_tool",
    ]


def test_bad_search_arguments_are_fed_back() -> None:
    model = ScriptedChatModel([ai_calls(call("tool_search_tool", '{"terms": 3}')), AiMessage("ok")])
    result = _service(3).chat(model, None, "x")
    assert result.tool_executions[0].has_failed
    assert "non-empty array of strings 'terms'" in result.tool_executions[0].result.text


def test_no_match() -> None:
    model = ScriptedChatModel(
        [ai_calls(call("tool_search_tool", '{"terms": ["zzz"]}')), AiMessage("ok")]
    )
    result = _service(3).chat(model, None, "x")
    assert result.tool_executions[0].result.text == "No matching tools found"
