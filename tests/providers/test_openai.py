"""OpenAIChatModel against the scripted loopback server."""

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
    StreamAccumulator,
    SystemMessage,
    TextDelta,
    ToolChoice,
    ToolExecutionResultMessage,
    UserMessage,
)
from toolweave.errors import ProviderError, UnsupportedOptionError
from toolweave.execution import ImageContent, TextContent, ToolExecutionRequest
from toolweave.providers import OpenAIChatModel
from toolweave.tools import ToolCard

from .conftest import SECRET, calls_of, check_openai_request

WEATHER = ToolCard(
    name="get_weather",
    description="查询指定城市的当前天气",
    input_params={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "城市名"}},
        "required": ["city"],
    },
    strict=False,
)
TIME = ToolCard(
    name="get_time",
    description="Current time in a city",
    input_params={
        "type": "object",
        "properties": {"city": {"type": "string"}, "tz": {"type": "string"}},
        "required": ["city"],
    },
)
Q = "杭州今天天气怎么样？"
PARAMS = ChatRequestParameters(tools=[WEATHER], tool_choice=ToolChoice.AUTO)


def _second_round(first: AiMessage) -> ChatRequest:
    call = first.tool_execution_requests[0]
    return ChatRequest(
        [
            UserMessage(Q),
            first,
            ToolExecutionResultMessage(
                id=call.id, tool_name=call.name, text="杭州今天 22℃，天气晴。"
            ),
        ],
        PARAMS,
    )


def test_seed_weather_exchange_exact_requests(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    transcript = server.enqueue_transcript("openai/weather_seed")
    first = openai_model.chat(ChatRequest([UserMessage(Q)], PARAMS))
    assert first.finish_reason is FinishReason.TOOL_EXECUTION
    assert first.ai_message.text is None
    assert calls_of(first) == [["call_abc123", "get_weather", '{"city":"杭州"}']]
    assert first.usage is not None and first.usage.total_tokens == 80
    assert first.id == "chatcmpl-9xYzAbC456" and first.model == "gpt-4o-mini"
    final = openai_model.chat(_second_round(first.ai_message))
    assert final.ai_message.text == "杭州今天 22℃，天气晴，适合出行。"
    assert final.finish_reason is FinishReason.STOP
    expected = [e["request"]["body"] for e in transcript["exchanges"]]
    assert server.bodies == expected
    for request in server.requests:
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == f"Bearer {SECRET}"
        assert request.headers["content-type"] == "application/json"
    for body in server.bodies:
        check_openai_request(body)


async def test_seed_weather_exchange_streamed_async(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    transcript = server.enqueue_transcript("openai/weather_seed_stream")
    events = [e async for e in openai_model.astream(ChatRequest([UserMessage(Q)], PARAMS))]
    partials = [e for e in events if isinstance(e, PartialToolCall)]
    assert partials[0].id == "call_abc123" and partials[0].name == "get_weather"
    assert "".join(p.arguments_delta for p in partials) == '{"city":"杭州"}'
    completes = [e for e in events if isinstance(e, CompleteToolCall)]
    assert [(c.index, c.request.arguments) for c in completes] == [(0, '{"city":"杭州"}')]
    # the call completes before the response does (the loop can start it early)
    assert events.index(completes[0]) < len(events) - 1
    first = events[-1]
    assert isinstance(first, ResponseCompleted)
    assert first.response.usage is not None and first.response.usage.input_tokens == 62
    events2 = [e async for e in openai_model.astream(_second_round(first.response.ai_message))]
    text = "".join(e.text for e in events2 if isinstance(e, TextDelta))
    assert text == "杭州今天 22℃，天气晴，适合出行。"
    final = events2[-1]
    assert isinstance(final, ResponseCompleted) and final.response.ai_message.text == text
    assert server.bodies == [e["request"]["body"] for e in transcript["exchanges"]]
    for body in server.bodies:
        check_openai_request(body)


TRICKY = [
    "openai/stream_several_calls_one_delta",
    "openai/stream_missing_index",
    "openai/stream_deepseek_sentinels",
    "openai/stream_split_ids",
    "openai/stream_zero_args",
    "openai/stream_index_reused",
]


def _check_stream(events: list[Any], expected: dict[str, Any]) -> None:
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    response = final.response
    assert response.ai_message.text == expected["text"]
    assert calls_of(response) == expected["calls"]
    assert response.finish_reason == expected["finish_reason"]
    if expected.get("reasoning"):
        assert response.ai_message.reasoning == expected["reasoning"]
        assert (
            "".join(e.text for e in events if isinstance(e, ReasoningDelta))
            == expected["reasoning"]
        )
    if expected["usage"]:
        u = response.usage
        assert (
            u is not None and [u.input_tokens, u.output_tokens, u.total_tokens] == expected["usage"]
        )
    # one CompleteToolCall per call, in index order, agreeing with the final message
    completes = [e for e in events if isinstance(e, CompleteToolCall)]
    assert [c.index for c in completes] == list(range(len(expected["calls"])))
    assert [c.request for c in completes] == list(response.ai_message.tool_execution_requests)
    # the partial events alone rebuild the same calls
    acc = StreamAccumulator()
    for e in events:
        acc.feed(e)
    rebuilt = acc.ai_message()
    assert [(c.name, json.loads(c.arguments)) for c in rebuilt.tool_execution_requests] == [
        (name, json.loads(args)) for _, name, args in expected["calls"]
    ]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == (expected["text"] or "")


@pytest.mark.parametrize("name", TRICKY)
def test_tricky_streams_sync(
    name: str, server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    transcript = server.enqueue_transcript(name)
    events = list(
        openai_model.stream(
            ChatRequest([UserMessage("go")], ChatRequestParameters(tools=[WEATHER, TIME]))
        )
    )
    _check_stream(events, transcript["expected"])


@pytest.mark.parametrize("name", TRICKY)
async def test_tricky_streams_async(
    name: str, server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    transcript = server.enqueue_transcript(name)
    events = [e async for e in openai_model.astream(ChatRequest([UserMessage("go")]))]
    _check_stream(events, transcript["expected"])


def test_several_calls_in_one_delta_complete_in_order(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    server.enqueue_transcript("openai/stream_several_calls_one_delta")
    events = list(openai_model.stream(ChatRequest([UserMessage("go")])))
    kinds = [type(e).__name__ for e in events]
    # call 0 completes as soon as call 1 starts, before the stream ends
    first_complete = kinds.index("CompleteToolCall")
    assert first_complete < kinds.index("ResponseCompleted") - 1
    assert (
        isinstance(events[first_complete], CompleteToolCall) and events[first_complete].index == 0
    )


def test_stream_cut_mid_tool_call_is_a_provider_error_without_retry(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    server.enqueue_transcript("openai/stream_cut")
    seen: list[Any] = []
    with pytest.raises(ProviderError) as info:
        for event in openai_model.stream(ChatRequest([UserMessage("go")])):
            seen.append(event)
    assert "not retried" in info.value.message
    assert isinstance(info.value.__cause__, Exception)
    assert len(server.requests) == 1
    assert any(isinstance(e, PartialToolCall) for e in seen)
    assert not any(isinstance(e, CompleteToolCall) for e in seen)


async def test_stream_cut_async(server: ProviderServer, openai_model: OpenAIChatModel) -> None:
    server.enqueue_transcript("openai/stream_cut")
    with pytest.raises(ProviderError):
        async for _ in openai_model.astream(ChatRequest([UserMessage("go")])):
            pass
    assert len(server.requests) == 1


def test_stream_without_end_is_truncated(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    server.enqueue_transcript("openai/stream_truncated")
    with pytest.raises(ProviderError, match="ended before"):
        list(openai_model.stream(ChatRequest([UserMessage("go")])))
    assert len(server.requests) == 1


def test_error_event_in_stream(server: ProviderServer, openai_model: OpenAIChatModel) -> None:
    server.enqueue_transcript("openai/stream_error_event")
    events: list[Any] = []
    with pytest.raises(ProviderError, match="server had an error") as info:
        for e in openai_model.stream(ChatRequest([UserMessage("go")])):
            events.append(e)
    assert events == [TextDelta("Hel")]
    assert info.value.status == 200
    assert len(server.requests) == 1


# request mapping ---------------------------------------------------------------------------
def _body(chat_model: OpenAIChatModel, **params: Any) -> dict[str, Any]:
    messages = params.pop("messages", [UserMessage("hi")])
    return chat_model.build_request_body(ChatRequest(messages, ChatRequestParameters(**params)))


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice.AUTO, "auto"),
        (ToolChoice.REQUIRED, "required"),
        (ToolChoice.NONE, "none"),
        (ToolChoice.tool("get_time"), {"type": "function", "function": {"name": "get_time"}}),
    ],
)
def test_tool_choice_mapping(choice: ToolChoice, wire: Any) -> None:
    model = OpenAIChatModel("m", api_key="k")
    body = _body(model, tools=[WEATHER, TIME], tool_choice=choice, parallel_tool_calls=False)
    assert body["tool_choice"] == wire
    assert body["parallel_tool_calls"] is False
    check_openai_request(body)


def test_no_tools_means_no_tool_fields() -> None:
    model = OpenAIChatModel("m", api_key="k")
    body = _body(model, tool_choice=ToolChoice.AUTO, parallel_tool_calls=True)
    assert "tools" not in body and "tool_choice" not in body and "parallel_tool_calls" not in body
    with pytest.raises(UnsupportedOptionError, match="tool_choice"):
        _body(model, tool_choice=ToolChoice.REQUIRED)
    with pytest.raises(UnsupportedOptionError, match="nope"):
        _body(model, tools=[WEATHER], tool_choice=ToolChoice.tool("nope"))


def test_strict_tools() -> None:
    auto = OpenAIChatModel("m", api_key="k")
    # TIME has strict=None: strict when the schema allows it (the optional tz becomes nullable)
    fn = _body(auto, tools=[WEATHER, TIME])["tools"][1]["function"]
    assert fn["strict"] is True
    assert fn["parameters"]["additionalProperties"] is False
    assert sorted(fn["parameters"]["required"]) == ["city", "tz"]
    # WEATHER declares strict=False: kept non-strict whatever the model default
    strict_model = OpenAIChatModel("m", api_key="k", strict_tools=True)
    assert "strict" not in _body(strict_model, tools=[WEATHER])["tools"][0]["function"]
    off = OpenAIChatModel("m", api_key="k", strict_tools=False)
    assert "strict" not in _body(off, tools=[TIME])["tools"][0]["function"]
    check_openai_request(_body(auto, tools=[WEATHER, TIME]))


def test_messages_mapping_and_sdk_types() -> None:
    model = OpenAIChatModel("m", api_key="k")
    call = ToolExecutionRequest(id="c1", name="get_time", arguments='{"city":"Oslo"}')
    body = _body(
        model,
        messages=[
            SystemMessage("be brief"),
            UserMessage(
                "look", contents=(ImageContent(data="aGk=", mime_type="image/jpeg"),), name="ann"
            ),
            AiMessage("thinking aloud", tool_execution_requests=[call]),
            ToolExecutionResultMessage(id="c1", tool_name="get_time", text="12:00", is_error=False),
            AiMessage("done"),
        ],
        tools=[TIME],
        temperature=0.2,
        top_p=0.9,
        max_tokens=50,
        stop=["END"],
    )
    assert body["messages"] == [
        {"role": "system", "content": "be brief"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "data:image/jpeg;base64,aGk="}},
            ],
            "name": "ann",
        },
        {
            "role": "assistant",
            "content": "thinking aloud",
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "get_time", "arguments": '{"city":"Oslo"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "12:00"},
        {"role": "assistant", "content": "done"},
    ]
    assert (body["temperature"], body["top_p"], body["max_tokens"], body["stop"]) == (
        0.2,
        0.9,
        50,
        ["END"],
    )
    check_openai_request(body)


def test_images_in_tool_results_follow_in_a_user_message(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    messages = [
        UserMessage("chart?"),
        AiMessage(tool_execution_requests=[ToolExecutionRequest(id="c1", name="chart")]),
        ToolExecutionResultMessage(
            id="c1",
            tool_name="chart",
            text="a chart",
            contents=(TextContent(text="a chart"), ImageContent(data="aGk=")),
        ),
    ]
    body = openai_model.build_request_body(ChatRequest(messages))
    assert body["messages"][-2:] == [
        {
            "role": "tool",
            "tool_call_id": "c1",
            "content": "a chart\n[attachment 1: image (image/png, 2 B), in the next user message]",
        },
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "[attachment 1 of tool call c1 (chart)]"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,aGk="}},
            ],
        },
    ]
    check_openai_request(body)
    # a model known to take text only gets a description instead
    text_only = OpenAIChatModel("gpt-3.5-turbo", api_key="k")
    body = text_only.build_request_body(ChatRequest(messages))
    assert body["messages"][-1] == {
        "role": "tool",
        "tool_call_id": "c1",
        "content": "a chart\n[image (image/png, 2 B): not shown, gpt-3.5-turbo takes text only]",
    }
    # text-only parts are fine
    ok = ToolExecutionResultMessage(
        id="c1", tool_name="chart", text="a chart", contents=(TextContent(text="a chart"),)
    )
    body = openai_model.build_request_body(ChatRequest([*messages[:2], ok]))
    assert body["messages"][-1] == {"role": "tool", "tool_call_id": "c1", "content": "a chart"}


def test_tool_calling_modes(server: ProviderServer, openai_model: OpenAIChatModel) -> None:
    # response_format: tests/providers/test_structured_output.py; constrained mode: tests/e2e
    with pytest.raises(UnsupportedOptionError, match="tool_calling"):
        OpenAIChatModel("m", api_key="k", tool_calling="bogus")  # type: ignore[arg-type]
    assert OpenAIChatModel("m", api_key="k", tool_calling="native").tool_calling == "native"
    assert (
        OpenAIChatModel("m", api_key="k", tool_calling="constrained").tool_calling == "constrained"
    )


def test_custom_parameters_merged_last() -> None:
    model = OpenAIChatModel("m", api_key="k")
    body = _body(
        model,
        temperature=0.5,
        custom_parameters={
            "temperature": 0.1,
            "seed": 7,
            "max_completion_tokens": 99,
            "stream_options": None,
        },
    )
    assert body["temperature"] == 0.1 and body["seed"] == 7 and body["max_completion_tokens"] == 99
    streamed = model.build_request_body(
        ChatRequest(
            [UserMessage("x")],
            ChatRequestParameters(custom_parameters={"stream_options": {"extra": 1}}),
        ),
        stream=True,
    )
    assert streamed["stream_options"] == {"include_usage": True, "extra": 1}


def test_model_and_default_parameters() -> None:
    model = OpenAIChatModel(
        "m", api_key="k", default_parameters=ChatRequestParameters(temperature=0.3)
    )
    assert _body(model)["temperature"] == 0.3
    assert _body(model, model="other", temperature=1.0)["model"] == "other"
    assert _body(model, temperature=1.0)["temperature"] == 1.0


def test_reasoning_content_non_streaming_and_send_back(server: ProviderServer) -> None:
    server.enqueue(
        {
            "json": {
                "id": "x",
                "object": "chat.completion",
                "created": 1,
                "model": "deepseek-reasoner",
                "choices": [
                    {
                        "index": 0,
                        "finish_reason": "tool_calls",
                        "message": {
                            "role": "assistant",
                            "content": "",
                            "reasoning_content": "Need the weather.",
                            "tool_calls": [
                                {
                                    "id": "c9",
                                    "type": "function",
                                    "function": {"name": "get_weather", "arguments": ""},
                                }
                            ],
                        },
                    }
                ],
            }
        }
    )
    with OpenAIChatModel(
        "deepseek-reasoner", api_key="k", base_url=f"{server.url}/v1", send_reasoning=True
    ) as model:
        response = model.chat(ChatRequest([UserMessage("w?")]))
        message = response.ai_message
        assert message.reasoning == "Need the weather." and message.text is None
        assert calls_of(response) == [["c9", "get_weather", "{}"]]
        body = model.build_request_body(ChatRequest([UserMessage("w?"), message]))
        assert body["messages"][-1]["reasoning_content"] == "Need the weather."
    plain = OpenAIChatModel("m", api_key="k")
    assert (
        "reasoning_content" not in plain.build_request_body(ChatRequest([message]))["messages"][0]
    )


def test_env_key_and_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    model = OpenAIChatModel("gpt-4o")
    assert model._http._headers["authorization"] == f"Bearer {SECRET}"
    assert SECRET not in repr(model) and SECRET not in repr(model._http)
    assert model.base_url == "https://api.openai.com/v1"


def test_recorded_transcripts_parse_with_the_sdk() -> None:
    # Real servers deviate from the OpenAI types; these transcripts record such deviations.
    deviating = {"openai/stream_missing_index", "openai/stream_deepseek_sentinels"}
    names = [
        "openai/weather_seed",
        "openai/weather_seed_stream",
        "openai/loop_parallel",
        "openai/loop_parallel_stream",
        *TRICKY,
    ]
    for name in names:
        if name in deviating:
            with pytest.raises(ValueError):
                _validate_exchanges(name)
        else:
            _validate_exchanges(name)


def _validate_exchanges(name: str) -> None:
    from openai.types.chat import ChatCompletion, ChatCompletionChunk

    from toolweave.providers._sse import SSEDecoder

    for exchange in load_transcript(name)["exchanges"]:
        response = exchange["response"]
        if "json" in response:
            ChatCompletion.model_validate(response["json"])
        else:
            decoder = SSEDecoder()
            events = [e for c in response["sse"] for e in decoder.feed(c)] + decoder.flush()
            for e in events:
                if not e.is_done:
                    ChatCompletionChunk.model_validate_json(e.data)
        body = exchange["request"].get("body")
        if body:
            check_openai_request(body)
