"""Several rounds with parallel calls through `ToolService`, per provider and per face
(sync, async, stream, eager async stream), the transcript server answering by round."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from servers.provider_server import ProviderServer
from toolweave.chat import ChatRequestParameters, ToolChoice, UserMessage

from .conftest import check_anthropic_request, check_gemini_request, check_openai_request
from .test_openai import WEATHER

try:
    from toolweave.service import ChatCompleted, ToolChatResult, ToolService
except ImportError:  # pragma: no cover - the loop is written concurrently
    pytest.skip("toolweave.service is not available", allow_module_level=True)

MODES = ["sync", "async", "stream", "astream_eager"]
FINAL = "Paris: sunny at 12:00; Tokyo and Lima: sunny."


def get_weather(city: str) -> str:
    """Current weather in a city."""
    return f"{city}: sunny"


def get_time(city: str) -> str:
    """Current time in a city."""
    return "12:00"


def _run(
    mode: str, model: Any, service: ToolService, messages: Any, parameters: Any = None
) -> ToolChatResult:
    if mode == "sync":
        return service.chat(model, parameters, messages)
    if mode == "async":
        return asyncio.run(service.achat(model, parameters, messages))
    if mode == "stream":
        events = list(service.chat_stream(model, parameters, messages))
        assert isinstance(events[-1], ChatCompleted)
        return events[-1].result

    async def consume() -> ToolChatResult:
        last = None
        async for event in service.achat_stream(model, parameters, messages, eager=True):
            last = event
        assert isinstance(last, ChatCompleted)
        return last.result

    return asyncio.run(consume())


def _transcript(provider: str, mode: str) -> str:
    return f"{provider}/loop_parallel" + ("_stream" if "stream" in mode else "")


def _check_result(result: ToolChatResult, server: ProviderServer) -> None:
    assert result.final_response is not None
    assert result.final_response.ai_message.text == FINAL
    executed = [
        (e.request.name, e.request.arguments_as_dict()["city"], e.result.result_text())
        for e in result.tool_executions
    ]
    assert executed == [
        ("get_weather", "Paris", "Paris: sunny"),
        ("get_time", "Paris", "12:00"),
        ("get_weather", "Tokyo", "Tokyo: sunny"),
        ("get_weather", "Lima", "Lima: sunny"),
    ]
    assert len(server.requests) == 3
    for body in server.bodies:
        assert body is not None


@pytest.mark.parametrize("mode", MODES)
def test_openai_rounds(mode: str, server: ProviderServer, openai_model: Any) -> None:
    server.enqueue_transcript(_transcript("openai", mode))
    service = ToolService().tools(get_weather, get_time)
    result = _run(mode, openai_model, service, [UserMessage("Weather and time?")])
    _check_result(result, server)
    second, third = server.bodies[1], server.bodies[2]
    assert [t["function"]["name"] for t in second["tools"]] == ["get_weather", "get_time"]
    assert second["messages"][-3]["tool_calls"][1]["id"] == "call_t1"
    assert second["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "call_w1", "content": "Paris: sunny"},
        {"role": "tool", "tool_call_id": "call_t1", "content": "12:00"},
    ]
    assert third["messages"][-2:] == [
        {"role": "tool", "tool_call_id": "call_w2", "content": "Tokyo: sunny"},
        {"role": "tool", "tool_call_id": "call_w3", "content": "Lima: sunny"},
    ]
    for body in server.bodies:
        assert body.get("stream", False) == ("stream" in mode)
        check_openai_request(body)


@pytest.mark.parametrize("mode", MODES)
def test_anthropic_rounds(mode: str, server: ProviderServer, anthropic_model: Any) -> None:
    server.enqueue_transcript(_transcript("anthropic", mode))
    service = ToolService().tools(get_weather, get_time)
    result = _run(mode, anthropic_model, service, [UserMessage("Weather and time?")])
    _check_result(result, server)
    second, third = server.bodies[1], server.bodies[2]
    assert second["messages"][-1] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "toolu_w1", "content": "Paris: sunny"},
            {"type": "tool_result", "tool_use_id": "toolu_t1", "content": "12:00"},
        ],
    }
    assert third["messages"][-2]["content"][0] == {"type": "text", "text": "Now the others."}
    assert [b["tool_use_id"] for b in third["messages"][-1]["content"]] == ["toolu_w2", "toolu_w3"]
    for body in server.bodies:
        check_anthropic_request(body)


@pytest.mark.parametrize("mode", MODES)
def test_gemini_rounds(mode: str, server: ProviderServer, gemini_model: Any) -> None:
    server.enqueue_transcript(_transcript("gemini", mode))
    service = ToolService().tools(get_weather, get_time)
    result = _run(mode, gemini_model, service, [UserMessage("Weather and time?")])
    _check_result(result, server)
    second = server.bodies[1]
    model_turn, answers = second["contents"][-2:]
    assert model_turn["role"] == "model"
    assert (
        model_turn["parts"][0]["thoughtSignature"]
        == "CiIBVKhc7oLy0Yl2c3w6Sp0Iu4ILMKM+p6Ysu4ha2gUp3BlRGiQA"
    )
    assert answers == {
        "role": "user",
        "parts": [
            {"functionResponse": {"name": "get_weather", "response": {"result": "Paris: sunny"}}},
            {"functionResponse": {"name": "get_time", "response": {"result": "12:00"}}},
        ],
    }
    for body in server.bodies:
        check_gemini_request(body)


def test_seed_through_the_loop_openai(server: ProviderServer, openai_model: Any) -> None:
    """The seed's §5.5: ToolService runs both rounds; the two requests are the seed's."""
    transcript = server.enqueue_transcript("openai/weather_seed")
    service = ToolService().tool(WEATHER, lambda request, memory_id=None: "杭州今天 22℃，天气晴。")
    result = service.chat(
        openai_model,
        ChatRequestParameters(tool_choice=ToolChoice.AUTO),
        [UserMessage("杭州今天天气怎么样？")],
    )
    assert result.final_response is not None
    assert result.final_response.ai_message.text == "杭州今天 22℃，天气晴，适合出行。"
    assert len(result.tool_executions) == 1
    assert server.bodies == [e["request"]["body"] for e in transcript["exchanges"]]


def test_seed_through_the_loop_anthropic(server: ProviderServer, anthropic_model: Any) -> None:
    transcript = server.enqueue_transcript("anthropic/weather_seed")
    service = ToolService().tool(WEATHER, lambda request, memory_id=None: "杭州今天 22℃，天气晴。")
    result = service.chat(
        anthropic_model,
        ChatRequestParameters(tool_choice=ToolChoice.AUTO),
        [UserMessage("杭州今天天气怎么样？")],
    )
    assert result.final_response is not None
    assert result.final_response.ai_message.text == "杭州今天 22℃，天气晴，适合出行。"
    assert server.bodies == [e["request"]["body"] for e in transcript["exchanges"]]
