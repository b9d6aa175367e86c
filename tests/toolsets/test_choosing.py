"""`.choosing(fn)` and `Toolset.tool_choice`: a toolset offers all its tools but restricts,
per round, which the model may call; the exact tools and `tool_choice` of every request
the model received (`ScriptedChatModel.requests`), through the four faces."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave import (
    AiMessage,
    ChatRequestParameters,
    ScriptedChatModel,
    ToolCard,
    ToolChoice,
    ToolService,
    tool,
)
from toolweave.service.search import KeywordToolSearch
from toolweave.toolsets import CombinedToolset, FunctionToolset, StepContext

from ..service.helpers import MODES, ai_calls, call, run


@tool
def search(query: str) -> str:
    """Search the notes."""
    return f"found {query}"


@tool
def summarize(text: str) -> str:
    """Summarize a text."""
    return text[:10]


@tool
def publish(text: str) -> str:
    """Publish a text."""
    return "published"


@tool
def note(text: str) -> str:
    """Take a note."""
    return "noted"


def sent(model: ScriptedChatModel) -> list[tuple[list[str], ToolChoice | None]]:
    """Per request: the tool names offered and the tool choice sent."""
    return [
        ([c.name for c in r.parameters.tools or ()], r.parameters.tool_choice)
        for r in model.requests
    ]


def research_first(ctx: StepContext, cards: list[ToolCard]) -> ToolChoice | None:
    """Round 0: search (or summarize) must be called; round 1: not publish; then: any."""
    if ctx.round == 0:
        return ToolChoice.allowed_tools(["search", "summarize"], required=True)
    if ctx.round == 1:
        return ToolChoice.allowed_tools(["search", "summarize"])
    return None


def three_rounds() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            ai_calls(call("search", '{"query": "q"}', id="c1")),
            ai_calls(call("summarize", '{"text": "long text"}', id="c2")),
            ai_calls(call("publish", '{"text": "t"}', id="c3")),
            AiMessage("done"),
        ]
    )


ALL = ["search", "summarize", "publish"]


@pytest.mark.parametrize("mode", MODES)
def test_a_choosing_toolset_offers_every_tool_and_restricts_the_choice_per_round(
    mode: str,
) -> None:
    model = three_rounds()
    toolset = FunctionToolset(search, summarize, publish).choosing(research_first)
    result = run(mode, ToolService(toolsets=[toolset]), model)
    assert result.text == "done"
    assert sent(model) == [
        (ALL, ToolChoice.allowed_tools(["search", "summarize"], required=True)),
        (ALL, ToolChoice.allowed_tools(["search", "summarize"])),
        (ALL, None),
        (ALL, None),
    ]
    # the tools did not change: one parameters object for the rounds whose choice matched
    assert model.requests[2].parameters is model.requests[3].parameters


@pytest.mark.parametrize("mode", MODES)
def test_a_sets_choice_restricts_only_its_own_tools_and_follows_its_names(mode: str) -> None:
    docs = FunctionToolset(search, summarize, publish).choosing(research_first).prefixed("docs")
    service = ToolService(toolsets=[docs]).tools(note)
    model = ScriptedChatModel([ai_calls(call("docs_search", '{"query": "q"}')), AiMessage("ok")])
    run(mode, service, model)
    names = ["note", "docs_search", "docs_summarize", "docs_publish"]
    assert sent(model) == [
        # the service's own `note` gives no choice: it stays allowed
        (names, ToolChoice.allowed_tools(["note", "docs_search", "docs_summarize"], required=True)),
        (names, ToolChoice.allowed_tools(["note", "docs_search", "docs_summarize"])),
    ]


def test_choices_of_combined_sets_merge() -> None:
    def only(name: str, required: bool = False) -> Any:
        return lambda ctx, cards: ToolChoice.allowed_tools([name], required=required)

    both = CombinedToolset(
        FunctionToolset(search, summarize).choosing(only("search", required=True)),
        FunctionToolset(publish, note).choosing(lambda ctx, cards: ToolChoice.NONE),
    )
    model = ScriptedChatModel([AiMessage("ok")])
    ToolService(toolsets=[both]).chat(model, None, "hi")
    assert sent(model) == [(["search", "summarize", "publish", "note"], ToolChoice.tool("search"))]

    quiet = FunctionToolset(publish).choosing(lambda ctx, cards: ToolChoice.NONE)
    model = ScriptedChatModel([AiMessage("ok")])
    ToolService(toolsets=[quiet]).chat(model, None, "hi")
    assert sent(model) == [(["publish"], ToolChoice.NONE)]

    everything = FunctionToolset(publish, note).choosing(lambda ctx, cards: ToolChoice.REQUIRED)
    model = ScriptedChatModel([AiMessage("ok")])
    ToolService(toolsets=[everything]).chat(model, None, "hi")
    assert sent(model) == [(["publish", "note"], ToolChoice.REQUIRED)]


def test_the_callers_none_stands_and_a_required_subset_is_reset_to_its_auto_form() -> None:
    toolset = FunctionToolset(search, summarize, publish).choosing(research_first)
    model = ScriptedChatModel([AiMessage("ok")])
    none = ChatRequestParameters(tool_choice=ToolChoice.NONE)
    ToolService(toolsets=[toolset]).chat(model, none, "hi")
    assert sent(model) == [(ALL, ToolChoice.NONE)]

    # the caller's own subset, required: after the first round the subset stays, not forced
    model = ScriptedChatModel([ai_calls(call("search", '{"query": "q"}')), AiMessage("ok")])
    forced = ChatRequestParameters(tool_choice=ToolChoice.allowed_tools(["search"], required=True))
    ToolService().tools(search, publish).chat(model, forced, "hi")
    assert sent(model) == [
        (["search", "publish"], ToolChoice.allowed_tools(["search"], required=True)),
        (["search", "publish"], ToolChoice.allowed_tools(["search"])),
    ]


def test_a_choose_function_returning_something_else_is_a_type_error() -> None:
    toolset = FunctionToolset(search).choosing(lambda ctx, cards: "search")
    with pytest.raises(TypeError, match="not a ToolChoice"):
        ToolService(toolsets=[toolset]).chat(ScriptedChatModel(["ok"]), None, "hi")


def test_the_choice_covers_the_tools_sent_and_leaves_the_search_and_callers_tools_free() -> None:
    def only(*names: str) -> Any:
        return lambda ctx, cards: ToolChoice.allowed_tools(names)

    given = ChatRequestParameters(tools=[note.card])
    search_tool = KeywordToolSearch(always_visible=["search"])
    # summarize is allowed but hidden by the service's tool search: not named on the wire
    toolset = FunctionToolset(search, summarize, publish).choosing(only("summarize"))
    model = ScriptedChatModel([AiMessage("ok")])
    ToolService(toolsets=[toolset], tool_search=search_tool).chat(model, given, "hi")
    assert sent(model) == [
        (
            ["note", "search", "tool_search_tool"],
            ToolChoice.allowed_tools(["note", "tool_search_tool"]),
        )
    ]
    # everything sent is allowed: plain AUTO
    toolset = FunctionToolset(search, summarize, publish).choosing(only("search"))
    model = ScriptedChatModel([AiMessage("ok")])
    ToolService(toolsets=[toolset], tool_search=search_tool).chat(model, given, "hi")
    assert sent(model) == [(["note", "search", "tool_search_tool"], ToolChoice.AUTO)]
