"""Registering many tools does no per-tool work until a tool is called (issue #18 W8), and
the bulk path still rejects every duplicate."""

from __future__ import annotations

import asyncio

import pytest

from toolweave import (
    AiMessage,
    KeywordToolSearch,
    ScriptedChatModel,
    ToolCardError,
    ToolService,
    tool,
)

from .helpers import ai_calls, call


def _lookup(key: str) -> str:
    """Look a key up."""
    return key


TOOLS = [tool(name=f"tool_{i}", description=f"Tool {i}.")(_lookup) for i in range(1000)]


def test_bulk_registration_keeps_tools_until_their_first_call() -> None:
    service = ToolService().tools(TOOLS)
    assert len(service) == 1000 and "tool_999" in service
    assert [c.name for c in service.tool_cards[:2]] == ["tool_0", "tool_1"]
    assert service._entries["tool_7"] is TOOLS[7]  # no executor made yet
    model = ScriptedChatModel([ai_calls(call("tool_7", '{"key": "k"}')), AiMessage("done")])
    result = asyncio.run(service.achat(model, None, "go"))
    assert result.tool_executions[0].result.text == "k"
    assert service._entries["tool_7"] is not TOOLS[7]  # made on the first call
    assert service._entries["tool_8"] is TOOLS[8]


def test_bulk_registration_rejects_duplicates() -> None:
    with pytest.raises(ToolCardError, match="tool_3"):
        ToolService().tools([*TOOLS[:5], TOOLS[3]])
    service = ToolService().tools(TOOLS[:5])
    with pytest.raises(ToolCardError, match="tool_4"):
        service.tools(TOOLS[4:10])
    search = KeywordToolSearch()
    named = tool(name=search.card.name, description="Clash.")(_lookup)
    with pytest.raises(ToolCardError, match=search.card.name):
        ToolService(tool_search=search).tools([TOOLS[0], named])


def test_bulk_registration_takes_mixed_items() -> None:
    def plain(x: int) -> int:
        """A plain function."""
        return x

    service = ToolService().tools([TOOLS[0], plain, [TOOLS[1]]])
    assert [c.name for c in service.tool_cards] == ["tool_0", "plain", "tool_1"]
