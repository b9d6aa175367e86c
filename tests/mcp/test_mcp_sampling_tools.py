"""Tools in sampling requests (spec 2025-11-25): a `ChatModel` answering
``sampling/createMessage`` gets the server's tools as tool specifications and its tool
choice; its tool calls go back as ``tool_use`` content (stop reason ``toolUse``) and the
server's ``tool_result`` content comes back as tool result messages (issue #16)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from mcp_support import SERVERS, TEST_TIMEOUT, stdio_config

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest
from toolweave.chat.messages import SystemMessage, ToolExecutionResultMessage, UserMessage
from toolweave.chat.request import ToolChoice
from toolweave.mcp import McpClient

SERVER = str(SERVERS / "mcp_sampling_tools_server.py")


def data(result: Any) -> Any:
    return json.loads("".join(getattr(b, "text", "") for b in result.content))


async def test_the_model_calls_the_servers_tool_and_gets_its_result() -> None:
    call = ToolExecutionRequest(id="u1", name="get_weather", arguments='{"city": "Oslo"}')
    model = ScriptedChatModel(
        [AiMessage("Let me look.", tool_execution_requests=[call]), AiMessage("Sunny, go out.")]
    )
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(stdio_config(SERVER), sampling=model) as c:
        got = data(await c.call_tool("forecast", {"city": "Oslo", "choice": "required"}))
    first, second = got["results"]
    # what the server received
    assert first == {
        "role": "assistant",
        "content": [
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "u1", "name": "get.weather", "input": {"city": "Oslo"}},
        ],
        "model": "toolweave",
        "stopReason": "toolUse",
    }
    assert second["stopReason"] == "endTurn"
    assert second["content"] == {"type": "text", "text": "Sunny, go out."}
    # what the model received
    ask, follow_up = model.requests
    (card,) = ask.parameters.tools
    assert card.name == "get_weather"  # a name a provider accepts; the server's is get.weather
    assert card.description == "Current weather of a city."
    assert card.input_params["required"] == ["city"]
    assert ask.parameters.tool_choice == ToolChoice.REQUIRED
    assert ask.parameters.max_tokens == 200
    assert ask.messages == (
        SystemMessage(text="You are a weather bot."),
        UserMessage("Weather in Oslo?"),
    )
    _system, _user, ai, result = follow_up.messages
    assert ai.text == "Let me look." and ai.tool_execution_requests == (call,)
    assert isinstance(result, ToolExecutionResultMessage)
    assert (result.id, result.tool_name, result.text, result.is_error) == (
        "u1",
        "get_weather",
        "Sunny in Oslo",
        False,
    )


@pytest.mark.parametrize(
    ("mode", "expected"), [("auto", ToolChoice.AUTO), ("none", ToolChoice.NONE)]
)
async def test_tool_choice_is_mapped_and_a_plain_answer_ends_the_turn(
    mode: str, expected: ToolChoice
) -> None:
    model = ScriptedChatModel([AiMessage("No tools needed.")])
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(stdio_config(SERVER), sampling=model) as c:
        got = data(await c.call_tool("forecast", {"city": "Rome", "choice": mode}))
    assert got["results"] == [
        {
            "role": "assistant",
            "content": {"type": "text", "text": "No tools needed."},
            "model": "toolweave",
            "stopReason": "endTurn",
        }
    ]
    assert model.requests[0].parameters.tool_choice == expected


async def test_a_sampling_callback_does_not_declare_tools() -> None:
    async def answer(params: Any) -> str:
        return "unused"

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(stdio_config(SERVER), sampling=answer) as c:
        got = data(await c.call_tool("forecast", {"city": "Rome"}))
    assert "tools" in got["error"] and got["results"] == []


async def test_tools_sent_to_a_callback_anyway_are_an_error_to_the_server() -> None:
    asked: list[Any] = []

    async def answer(params: Any) -> str:
        asked.append(params)
        return "unused"

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(stdio_config(SERVER), sampling=answer) as c:
        got = data(await c.call_tool("forecast", {"city": "Rome", "raw": True}))
    assert "does not support tools in sampling" in got["error"]
    assert asked == []
