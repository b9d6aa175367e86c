"""AnthropicChatModel against the scripted loopback server."""

from __future__ import annotations

import json
from typing import Any

import pytest

from servers.provider_server import ProviderServer, load_transcript
from toolweave.chat import (
    AiMessage,
    ChatRequest,
    ChatRequestParameters,
    CompleteToolCall,
    FinishReason,
    PartialToolCall,
    ReasoningDelta,
    ResponseCompleted,
    SystemMessage,
    TextDelta,
    ToolChoice,
    ToolExecutionResultMessage,
    UserMessage,
)
from toolweave.errors import ProviderError, UnsupportedOptionError
from toolweave.execution import FileContent, ImageContent, TextContent, ToolExecutionRequest
from toolweave.providers import AnthropicChatModel

from .conftest import SECRET, calls_of, check_anthropic_request
from .test_openai import TIME, WEATHER

Q = "杭州今天天气怎么样？"
PARAMS = ChatRequestParameters(tools=[WEATHER], tool_choice=ToolChoice.AUTO)


def test_seed_weather_exchange_exact_requests(
    server: ProviderServer, anthropic_model: AnthropicChatModel
) -> None:
    transcript = server.enqueue_transcript("anthropic/weather_seed")
    first = anthropic_model.chat(ChatRequest([UserMessage(Q)], PARAMS))
    assert first.finish_reason is FinishReason.TOOL_EXECUTION
    assert first.ai_message.text == "我来查一下杭州的天气。"
    assert calls_of(first) == [["toolu_1", "get_weather", '{"city":"杭州"}']]
    call = first.ai_message.tool_execution_requests[0]
    second = ChatRequest(
        [
            UserMessage(Q),
            first.ai_message,
            ToolExecutionResultMessage(
                id=call.id, tool_name=call.name, text="杭州今天 22℃，天气晴。"
            ),
        ],
        PARAMS,
    )
    final = anthropic_model.chat(second)
    assert final.ai_message.text == "杭州今天 22℃，天气晴，适合出行。"
    assert final.finish_reason is FinishReason.STOP
    assert final.usage is not None and final.usage.input_tokens == 460
    assert server.bodies == [e["request"]["body"] for e in transcript["exchanges"]]
    for request in server.requests:
        assert request.path == "/v1/messages"
        assert request.headers["x-api-key"] == SECRET
        assert request.headers["anthropic-version"] == "2023-06-01"
        assert "authorization" not in request.headers
    for body in server.bodies:
        check_anthropic_request(body)


def _check_thinking_stream(events: list[Any], expected: dict[str, Any]) -> AiMessage:
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    response = final.response
    message = response.ai_message
    assert message.text == expected["text"]
    assert message.reasoning == expected["reasoning"]
    assert calls_of(response) == expected["calls"]
    assert response.finish_reason == expected["finish_reason"]
    u = response.usage
    assert u is not None and [u.input_tokens, u.output_tokens, u.total_tokens] == expected["usage"]
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == expected["reasoning"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == expected["text"]
    partials = [e for e in events if isinstance(e, PartialToolCall)]
    assert {p.index for p in partials} == {0, 1}  # sequential, not the block indexes 3 and 4
    assert "".join(p.arguments_delta for p in partials if p.index == 0) == expected["calls"][0][2]
    completes = [e for e in events if isinstance(e, CompleteToolCall)]
    assert [(c.index, c.request.arguments) for c in completes] == [
        (0, expected["calls"][0][2]),
        (1, "{}"),
    ]
    thinking = message.attributes["anthropic"]["thinking"]
    assert thinking[0]["type"] == "thinking" and thinking[0]["signature"].startswith("EqQB")
    assert thinking[1]["type"] == "redacted_thinking"
    return message


def _round_two(message: AiMessage) -> ChatRequest:
    w, t = message.tool_execution_requests
    return ChatRequest(
        [
            UserMessage("weather and time in Paris?"),
            message,
            ToolExecutionResultMessage(id=w.id, tool_name=w.name, text="sunny"),
            ToolExecutionResultMessage(
                id=t.id, tool_name=t.name, text="clock unavailable", is_error=True
            ),
        ],
        ChatRequestParameters(tools=[WEATHER, TIME]),
    )


def test_stream_thinking_and_input_json_delta_sync(
    server: ProviderServer, anthropic_model: AnthropicChatModel
) -> None:
    transcript = server.enqueue_transcript("anthropic/stream_thinking_tools")
    request = ChatRequest(
        [UserMessage("weather and time in Paris?")], ChatRequestParameters(tools=[WEATHER, TIME])
    )
    message = _check_thinking_stream(list(anthropic_model.stream(request)), transcript["expected"])
    events = list(anthropic_model.stream(_round_two(message)))
    assert isinstance(events[-1], ResponseCompleted)
    assert events[-1].response.ai_message.text == "Paris is sunny; the time is unknown."
    body = server.bodies[1]
    assert body["stream"] is True
    assert body["messages"][1:] == transcript["exchanges"][1]["request"]["messages_tail"]
    for b in server.bodies:
        check_anthropic_request(b)


async def test_stream_thinking_and_input_json_delta_async(
    server: ProviderServer, anthropic_model: AnthropicChatModel
) -> None:
    transcript = server.enqueue_transcript("anthropic/stream_thinking_tools")
    request = ChatRequest(
        [UserMessage("weather and time in Paris?")], ChatRequestParameters(tools=[WEATHER, TIME])
    )
    message = _check_thinking_stream(
        [e async for e in anthropic_model.astream(request)], transcript["expected"]
    )
    events = [e async for e in anthropic_model.astream(_round_two(message))]
    assert isinstance(events[-1], ResponseCompleted)
    response = events[-1].response
    assert response.ai_message.text == "Paris is sunny; the time is unknown."
    assert (
        server.bodies[1]["messages"][1:] == transcript["exchanges"][1]["request"]["messages_tail"]
    )


def test_error_event_after_200(server: ProviderServer, anthropic_model: AnthropicChatModel) -> None:
    server.enqueue_transcript("anthropic/stream_error")
    events: list[Any] = []
    with pytest.raises(ProviderError, match="Overloaded") as info:
        for e in anthropic_model.stream(ChatRequest([UserMessage("hi")])):
            events.append(e)
    assert events == [TextDelta("Hello")]
    assert "overloaded_error" in (info.value.body or "")
    assert len(server.requests) == 1


async def test_stream_cut_in_tool_use(
    server: ProviderServer, anthropic_model: AnthropicChatModel
) -> None:
    server.enqueue_transcript("anthropic/stream_cut")
    events: list[Any] = []
    with pytest.raises(ProviderError):
        async for e in anthropic_model.astream(ChatRequest([UserMessage("hi")])):
            events.append(e)
    assert not any(isinstance(e, CompleteToolCall) for e in events)
    assert len(server.requests) == 1


# request mapping ---------------------------------------------------------------------------
def _body(chat_model: AnthropicChatModel, **params: Any) -> dict[str, Any]:
    messages = params.pop("messages", [UserMessage("hi")])
    return chat_model.build_request_body(ChatRequest(messages, ChatRequestParameters(**params)))


@pytest.mark.parametrize(
    ("choice", "parallel", "wire"),
    [
        (ToolChoice.AUTO, None, {"type": "auto"}),
        (ToolChoice.REQUIRED, None, {"type": "any"}),
        (ToolChoice.NONE, None, {"type": "none"}),
        (ToolChoice.tool("get_time"), None, {"type": "tool", "name": "get_time"}),
        (ToolChoice.REQUIRED, False, {"type": "any", "disable_parallel_tool_use": True}),
        (None, False, {"type": "auto", "disable_parallel_tool_use": True}),
        (None, True, None),
        (
            ToolChoice.tool("get_time"),
            False,
            {"type": "tool", "name": "get_time", "disable_parallel_tool_use": True},
        ),
    ],
)
def test_tool_choice_mapping(choice: ToolChoice | None, parallel: bool | None, wire: Any) -> None:
    model = AnthropicChatModel("claude", api_key="k")
    body = _body(model, tools=[WEATHER, TIME], tool_choice=choice, parallel_tool_calls=parallel)
    assert body.get("tool_choice") == wire
    check_anthropic_request(body)


def test_no_tools_no_tool_choice() -> None:
    model = AnthropicChatModel("claude", api_key="k")
    body = _body(model, tool_choice=ToolChoice.AUTO, parallel_tool_calls=False)
    assert "tools" not in body and "tool_choice" not in body
    with pytest.raises(UnsupportedOptionError):
        _body(model, tool_choice=ToolChoice.REQUIRED)


def test_messages_mapping() -> None:
    model = AnthropicChatModel("claude", api_key="k", max_tokens=333)
    c1 = ToolExecutionRequest(id="toolu_a", name="chart", arguments="")
    c2 = ToolExecutionRequest(id="toolu_b", name="get_time", arguments='{"city":"Oslo"}')
    body = _body(
        model,
        messages=[
            SystemMessage("be brief"),
            SystemMessage("answer in English"),
            UserMessage("look", contents=(ImageContent(url="https://x.test/a.png"),)),
            AiMessage(tool_execution_requests=[c1, c2]),
            ToolExecutionResultMessage(
                id="toolu_a",
                tool_name="chart",
                text="a chart",
                contents=(
                    TextContent(text="a chart"),
                    ImageContent(data="aGk=", mime_type="image/png"),
                ),
            ),
            ToolExecutionResultMessage(
                id="toolu_b", tool_name="get_time", text="boom", is_error=True
            ),
            UserMessage("and now?"),
        ],
        tools=[TIME],
        temperature=0.1,
        top_p=0.5,
        stop=["END"],
    )
    assert body["max_tokens"] == 333
    assert body["system"] == [
        {"type": "text", "text": "be brief"},
        {"type": "text", "text": "answer in English"},
    ]
    assert body["stop_sequences"] == ["END"]
    assert body["messages"] == [
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image", "source": {"type": "url", "url": "https://x.test/a.png"}},
            ],
        },
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "toolu_a", "name": "chart", "input": {}},
                {
                    "type": "tool_use",
                    "id": "toolu_b",
                    "name": "get_time",
                    "input": {"city": "Oslo"},
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_a",
                    "content": [
                        {"type": "text", "text": "a chart"},
                        {
                            "type": "image",
                            "source": {"type": "base64", "media_type": "image/png", "data": "aGk="},
                        },
                    ],
                },
                {
                    "type": "tool_result",
                    "tool_use_id": "toolu_b",
                    "content": "boom",
                    "is_error": True,
                },
                {"type": "text", "text": "and now?"},
            ],
        },
    ]
    # The SDK's MessageCreateParams no longer lists temperature/top_p (newer models reject
    # them); we still map them for the models and compatible endpoints that accept them.
    check_anthropic_request(body, allow=("temperature", "top_p"))


def test_unsupported_file_type_refused(
    server: ProviderServer, anthropic_model: AnthropicChatModel
) -> None:
    message = UserMessage("read", contents=(FileContent(data="aGk=", mime_type="application/zip"),))
    with pytest.raises(UnsupportedOptionError) as info:
        anthropic_model.chat(ChatRequest([message]))
    assert info.value.provider == "anthropic"
    assert server.requests == []
    pdf = UserMessage("read", contents=(FileContent(data="aGk=", mime_type="application/pdf"),))
    body = anthropic_model.build_request_body(ChatRequest([pdf]))
    assert body["messages"][0]["content"][1]["type"] == "document"
    check_anthropic_request(body)


def test_custom_parameters_and_response_format() -> None:
    model = AnthropicChatModel("claude", api_key="k")
    body = _body(
        model,
        custom_parameters={
            "thinking": {"type": "enabled", "budget_tokens": 2000},
            "max_tokens": 4096,
        },
    )
    assert (
        body["thinking"] == {"type": "enabled", "budget_tokens": 2000}
        and body["max_tokens"] == 4096
    )
    check_anthropic_request(body)
    # response_format is mapped now: tests/providers/test_structured_output.py


def test_non_streaming_thinking_kept_and_sent_back(
    server: ProviderServer, anthropic_model: AnthropicChatModel
) -> None:
    content = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig=="},
        {"type": "tool_use", "id": "toolu_x", "name": "get_time", "input": {}},
    ]
    server.enqueue(
        {
            "json": {
                "id": "m",
                "type": "message",
                "role": "assistant",
                "model": "claude",
                "content": content,
                "stop_reason": "max_tokens",
                "stop_sequence": None,
                "usage": {"input_tokens": 3, "output_tokens": 4, "cache_read_input_tokens": 10},
            }
        }
    )
    response = anthropic_model.chat(ChatRequest([UserMessage("t?")]))
    assert response.finish_reason is FinishReason.LENGTH
    assert response.usage is not None and response.usage.input_tokens == 13
    assert response.ai_message.reasoning == "hmm"
    assert calls_of(response) == [["toolu_x", "get_time", "{}"]]
    body = anthropic_model.build_request_body(ChatRequest([UserMessage("t?"), response.ai_message]))
    assert body["messages"][1]["content"] == content


def test_recorded_transcripts_parse_with_the_sdk() -> None:
    from anthropic.types import Message, RawMessageStreamEvent
    from pydantic import TypeAdapter

    from toolweave.providers._sse import SSEDecoder

    events_adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    for name in [
        "anthropic/weather_seed",
        "anthropic/stream_thinking_tools",
        "anthropic/loop_parallel",
        "anthropic/loop_parallel_stream",
    ]:
        for exchange in load_transcript(name)["exchanges"]:
            response = exchange["response"]
            if "json" in response:
                Message.model_validate(response["json"])
            else:
                decoder = SSEDecoder()
                for e in [e for c in response["sse"] for e in decoder.feed(c)] + decoder.flush():
                    if e.event != "ping":
                        events_adapter.validate_python(json.loads(e.data))
            body = exchange["request"].get("body")
            if body:
                check_anthropic_request(body)
