"""OpenAIResponsesChatModel and the Azure OpenAI models against the scripted loopback server.

The server's answers are built here in the Responses API's wire shapes and checked against
the official `openai` SDK's types (`Response`, `ResponseStreamEvent`), as are the request
bodies (`ResponseCreateParams*`)."""

from __future__ import annotations

import asyncio
import functools
import json
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from servers.provider_server import ProviderServer
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
from toolweave.execution import ImageContent, ToolExecutionRequest
from toolweave.providers import (
    AzureOpenAIChatModel,
    AzureOpenAIResponsesChatModel,
    OpenAIResponsesChatModel,
)
from toolweave.providers.openai_responses import ResponsesStreamParser
from toolweave.service import ChatCompleted, ToolService

from .conftest import SECRET, calls_of, check_openai_request, check_typed_dict, no_sleep
from .test_openai import WEATHER

Q = "杭州今天天气怎么样？"
PARAMS = ChatRequestParameters(tools=[WEATHER], tool_choice=ToolChoice.AUTO)


# wire shapes ------------------------------------------------------------------------------
def _response(output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    data: dict[str, Any] = {
        "id": "resp_0a1b2c",
        "object": "response",
        "created_at": 1764583200,
        "model": "gpt-5-mini-2025-08-07",
        "status": "completed",
        "output": output,
        "parallel_tool_calls": True,
        "tool_choice": "auto",
        "tools": [],
        "usage": {
            "input_tokens": 61,
            "input_tokens_details": {"cached_tokens": 0, "cache_write_tokens": 0},
            "output_tokens": 40,
            "output_tokens_details": {"reasoning_tokens": 24},
            "total_tokens": 101,
        },
    }
    data.update(extra)
    _sdk_response(data)
    return data


def _sdk_response(data: dict[str, Any]) -> None:
    from openai.types.responses import Response

    Response.model_validate(data)


def _call(call_id: str, name: str, args: str, item_id: str) -> dict[str, Any]:
    return {
        "type": "function_call",
        "id": item_id,
        "call_id": call_id,
        "name": name,
        "arguments": args,
        "status": "completed",
    }


def _message(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "msg_77",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


REASONING = {
    "type": "reasoning",
    "id": "rs_5e6f",
    "summary": [{"type": "summary_text", "text": "The user wants the weather."}],
    "encrypted_content": "gAAAAABo-ENCRYPTED-BLOB==",
}
WEB_SEARCH = {
    "type": "web_search_call",
    "id": "ws_01",
    "status": "completed",
    "action": {"type": "search", "query": "Hangzhou weather"},
}


@functools.cache
def _event_adapter() -> Any:
    from openai.types.responses import ResponseStreamEvent
    from pydantic import TypeAdapter

    return TypeAdapter(ResponseStreamEvent)


def _sse(events: list[dict[str, Any]]) -> list[str]:
    """The events as SSE chunks, numbered, each checked against the SDK's event union."""
    chunks = []
    for number, event in enumerate(events):
        event = {**event, "sequence_number": number}
        _event_adapter().validate_python(event)
        chunks.append(f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n")
    return chunks


def _stream_of(final: dict[str, Any], *, split: int = 3) -> list[str]:
    """A realistic stream for the response `final`: items added, deltas, items done, then
    `response.completed` (or `.incomplete`)."""
    created = {**final, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [{"type": "response.created", "response": created}]
    for position, item in enumerate(final["output"]):
        if item["type"] == "function_call":
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": position,
                    "item": {**item, "arguments": "", "status": "in_progress"},
                }
            )
            args = item["arguments"]
            for start in range(0, len(args), split):
                events.append(
                    {
                        "type": "response.function_call_arguments.delta",
                        "item_id": item["id"],
                        "output_index": position,
                        "delta": args[start : start + split],
                    }
                )
            events.append(
                {
                    "type": "response.function_call_arguments.done",
                    "item_id": item["id"],
                    "output_index": position,
                    "name": item["name"],
                    "arguments": args,
                }
            )
        elif item["type"] == "message":
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": position,
                    "item": {**item, "content": [], "status": "in_progress"},
                }
            )
            text = item["content"][0]["text"]
            for start in range(0, len(text), split):
                events.append(
                    {
                        "type": "response.output_text.delta",
                        "item_id": item["id"],
                        "output_index": position,
                        "content_index": 0,
                        "delta": text[start : start + split],
                        "logprobs": [],
                    }
                )
        elif item["type"] == "reasoning":
            events.append(
                {
                    "type": "response.output_item.added",
                    "output_index": position,
                    "item": {**item, "summary": []},
                }
            )
            for part in item["summary"]:
                events.append(
                    {
                        "type": "response.reasoning_summary_text.delta",
                        "item_id": item["id"],
                        "output_index": position,
                        "summary_index": 0,
                        "delta": part["text"],
                    }
                )
        events.append({"type": "response.output_item.done", "output_index": position, "item": item})
    kind = "response.incomplete" if final["status"] == "incomplete" else "response.completed"
    events.append({"type": kind, "response": final})
    return _sse(events)


def check_responses_request(body: dict[str, Any]) -> None:
    from openai.types.responses import response_create_params as p

    kind = (
        p.ResponseCreateParamsStreaming
        if body.get("stream")
        else p.ResponseCreateParamsNonStreaming
    )
    check_typed_dict(_adapter(kind), body)


@functools.cache
def _adapter(kind: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(kind)


FIRST = _response([_call("call_w1", "get_weather", '{"city":"杭州"}', "fc_w1")])
FINAL = _response([_message("杭州今天 22℃，天气晴。")])


@pytest.fixture
def model(server: ProviderServer) -> Iterator[OpenAIResponsesChatModel]:
    m = OpenAIResponsesChatModel(
        "gpt-5-mini", api_key=SECRET, base_url=f"{server.url}/v1", timeout=10.0
    )
    no_sleep(m)
    with m:
        yield m


def _second_round(first: AiMessage) -> ChatRequest:
    call = first.tool_execution_requests[0]
    return ChatRequest(
        [
            SystemMessage("Answer in Chinese."),
            UserMessage(Q),
            first,
            ToolExecutionResultMessage(id=call.id, tool_name=call.name, text="22℃，晴"),
        ],
        PARAMS,
    )


# the seed's weather exchange -------------------------------------------------------------
def test_weather_exchange_requests_and_answers(
    server: ProviderServer, model: OpenAIResponsesChatModel
) -> None:
    server.enqueue({"json": FIRST}, {"json": FINAL})
    first = model.chat(ChatRequest([SystemMessage("Answer in Chinese."), UserMessage(Q)], PARAMS))
    assert calls_of(first) == [["call_w1", "get_weather", '{"city":"杭州"}']]
    assert first.finish_reason is FinishReason.TOOL_EXECUTION
    assert first.id == "resp_0a1b2c" and first.model == "gpt-5-mini-2025-08-07"
    assert first.usage is not None
    assert (first.usage.input_tokens, first.usage.output_tokens) == (61, 40)
    assert first.usage.reasoning_tokens == 24
    final = model.chat(_second_round(first.ai_message))
    assert final.ai_message.text == "杭州今天 22℃，天气晴。"
    assert final.finish_reason is FinishReason.STOP
    one, two = server.bodies
    assert one == {
        "model": "gpt-5-mini",
        "instructions": "Answer in Chinese.",
        "input": [{"role": "user", "content": Q}],
        "store": False,
        "include": ["reasoning.encrypted_content"],
        "tools": [
            {
                "type": "function",
                "name": "get_weather",
                "description": WEATHER.description,
                "parameters": WEATHER.input_params,
                "strict": False,
            }
        ],
        "tool_choice": "auto",
    }
    assert two["input"] == [
        {"role": "user", "content": Q},
        {
            "type": "function_call",
            "call_id": "call_w1",
            "name": "get_weather",
            "arguments": '{"city":"杭州"}',
            "id": "fc_w1",
        },
        {"type": "function_call_output", "call_id": "call_w1", "output": "22℃，晴"},
    ]
    for request in server.requests:
        assert request.path == "/v1/responses"
        assert request.headers["authorization"] == f"Bearer {SECRET}"
    for body in server.bodies:
        check_responses_request(body)


@pytest.mark.parametrize("face", ["sync", "async"])
def test_weather_exchange_streamed(
    server: ProviderServer, model: OpenAIResponsesChatModel, face: str
) -> None:
    server.enqueue({"sse": _stream_of(FIRST)}, {"sse": _stream_of(FINAL)})

    def run(request: ChatRequest) -> list[Any]:
        if face == "sync":
            return list(model.stream(request))

        async def collect() -> list[Any]:
            return [e async for e in model.astream(request)]

        return asyncio.run(collect())

    events = run(ChatRequest([UserMessage(Q)], PARAMS))
    partials = [e for e in events if isinstance(e, PartialToolCall)]
    assert partials[0].id == "call_w1" and partials[0].name == "get_weather"
    assert "".join(p.arguments_delta for p in partials) == '{"city":"杭州"}'
    completes = [e for e in events if isinstance(e, CompleteToolCall)]
    assert [(c.index, c.request.id, c.request.arguments) for c in completes] == [
        (0, "call_w1", '{"city":"杭州"}')
    ]
    assert events.index(completes[0]) < len(events) - 1  # the loop can start it early
    done = events[-1]
    assert isinstance(done, ResponseCompleted)
    assert done.response.usage is not None and done.response.usage.reasoning_tokens == 24
    events2 = run(_second_round(done.response.ai_message))
    text = "".join(e.text for e in events2 if isinstance(e, TextDelta))
    assert text == "杭州今天 22℃，天气晴。"
    assert isinstance(events2[-1], ResponseCompleted)
    assert events2[-1].response.ai_message.text == text
    assert server.bodies[0]["stream"] is True
    for body in server.bodies:
        check_responses_request(body)


# parallel calls, error results and the loop -------------------------------------------------
def get_weather(city: str) -> str:
    """Current weather in a city."""
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"{city}: sunny"


PARALLEL = _response(
    [
        REASONING,
        _call("call_a", "get_weather", '{"city":"Paris"}', "fc_a"),
        _call("call_b", "get_weather", '{"city":"Atlantis"}', "fc_b"),
    ]
)
ANSWER = _response([_message("Paris is sunny; Atlantis does not exist.")])


@pytest.mark.parametrize("mode", ["sync", "async", "stream", "astream_eager"])
def test_parallel_calls_and_an_error_result_through_the_loop(
    server: ProviderServer, model: OpenAIResponsesChatModel, mode: str
) -> None:
    streamed = "stream" in mode
    server.enqueue(
        {"sse": _stream_of(PARALLEL)} if streamed else {"json": PARALLEL},
        {"sse": _stream_of(ANSWER)} if streamed else {"json": ANSWER},
    )
    service = ToolService().tools(get_weather)
    if mode == "sync":
        result = service.chat(model, None, "Weather in Paris and Atlantis?")
    elif mode == "async":
        result = asyncio.run(service.achat(model, None, "Weather in Paris and Atlantis?"))
    elif mode == "stream":
        last = list(service.chat_stream(model, None, "Weather in Paris and Atlantis?"))[-1]
        assert isinstance(last, ChatCompleted)
        result = last.result
    else:

        async def consume() -> Any:
            last = None
            async for event in service.achat_stream(
                model, None, "Weather in Paris and Atlantis?", eager=True
            ):
                last = event
            return last

        last = asyncio.run(consume())
        assert isinstance(last, ChatCompleted)
        result = last.result
    assert result.text == "Paris is sunny; Atlantis does not exist."
    assert [(e.request.id, e.result.is_error) for e in result.tool_executions] == [
        ("call_a", False),
        ("call_b", True),
    ]
    second = server.bodies[1]["input"]
    # the reasoning item goes back unchanged, before the calls it led to
    assert second[1] == REASONING
    assert [i.get("type") for i in second] == [
        None,
        "reasoning",
        "function_call",
        "function_call",
        "function_call_output",
        "function_call_output",
    ]
    outputs = {i["call_id"]: i["output"] for i in second if i.get("type") == "function_call_output"}
    assert outputs["call_a"] == "Paris: sunny"
    assert "no such city" in outputs["call_b"]
    for body in server.bodies:
        check_responses_request(body)


# structured output ------------------------------------------------------------------------
class Forecast(BaseModel):
    city: str
    degrees: int


def test_structured_output(server: ProviderServer, model: OpenAIResponsesChatModel) -> None:
    server.enqueue({"json": _response([_message('{"city":"Paris","degrees":22}')])})
    result = ToolService().chat(model, None, "Forecast for Paris", output_type=Forecast)
    assert result.output == Forecast(city="Paris", degrees=22)
    body = server.bodies[0]
    fmt = body["text"]["format"]
    assert fmt["type"] == "json_schema" and fmt["strict"] is True
    assert fmt["schema"]["required"] == ["city", "degrees"]
    assert fmt["schema"]["additionalProperties"] is False
    check_responses_request(body)


# reasoning, hosted tools, options ---------------------------------------------------------
def test_reasoning_and_hosted_items_round_trip(
    server: ProviderServer, model: OpenAIResponsesChatModel
) -> None:
    hosted = OpenAIResponsesChatModel(
        "gpt-5",
        api_key=SECRET,
        base_url=f"{server.url}/v1",
        reasoning_effort="high",
        reasoning_summary="auto",
        hosted_tools=[{"type": "web_search"}],
    )
    no_sleep(hosted)
    first_answer = _response(
        [REASONING, WEB_SEARCH, _call("call_w1", "get_weather", '{"city":"杭州"}', "fc_w1")]
    )
    server.enqueue({"sse": _stream_of(first_answer)}, {"json": FINAL})
    events = list(hosted.stream(ChatRequest([UserMessage(Q)], PARAMS)))
    reasoning = "".join(e.text for e in events if isinstance(e, ReasoningDelta))
    assert reasoning == "The user wants the weather."
    done = events[-1]
    assert isinstance(done, ResponseCompleted)
    message = done.response.ai_message
    assert message.reasoning == "The user wants the weather."
    # the hosted search is kept, and is not a function call
    assert calls_of(done.response) == [["call_w1", "get_weather", '{"city":"杭州"}']]
    hosted.chat(_second_round(message))
    one, two = server.bodies
    assert one["reasoning"] == {"effort": "high", "summary": "auto"}
    assert one["tools"][-1] == {"type": "web_search"}
    assert two["input"][1:3] == [REASONING, WEB_SEARCH]
    assert two["input"][3]["type"] == "function_call"
    for body in server.bodies:
        check_responses_request(body)
    hosted.close()


def test_message_mapping_and_options() -> None:
    model = OpenAIResponsesChatModel("gpt-5", api_key="k")
    call = ToolExecutionRequest(id="c1", name="get_weather", arguments='{"city":"Oslo"}')
    request = ChatRequest(
        [
            UserMessage("look", contents=(ImageContent(data="aGk=", mime_type="image/jpeg"),)),
            AiMessage("let me check", tool_execution_requests=[call]),
            ToolExecutionResultMessage(
                id="c1",
                tool_name="get_weather",
                text="see the map",
                contents=(ImageContent(url="https://example.com/map.png"),),
            ),
        ],
        ChatRequestParameters(
            tools=[WEATHER],
            tool_choice=ToolChoice.tool("get_weather"),
            parallel_tool_calls=False,
            max_tokens=300,
            temperature=0.1,
        ),
    )
    body = model.build_request_body(request)
    assert body["input"] == [
        {
            "role": "user",
            "content": [
                {"type": "input_text", "text": "look"},
                {
                    "type": "input_image",
                    "image_url": "data:image/jpeg;base64,aGk=",
                    "detail": "auto",
                },
            ],
        },
        {"role": "assistant", "content": "let me check"},
        {
            "type": "function_call",
            "call_id": "c1",
            "name": "get_weather",
            "arguments": '{"city":"Oslo"}',
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": [
                {"type": "input_text", "text": "see the map"},
                {
                    "type": "input_image",
                    "image_url": "https://example.com/map.png",
                    "detail": "auto",
                },
            ],
        },
    ]
    assert body["tool_choice"] == {"type": "function", "name": "get_weather"}
    assert (body["parallel_tool_calls"], body["max_output_tokens"], body["temperature"]) == (
        False,
        300,
        0.1,
    )
    check_responses_request(body)
    with pytest.raises(UnsupportedOptionError, match="stop"):
        model.build_request_body(ChatRequest([UserMessage("x")], ChatRequestParameters(stop="END")))


def test_store_and_chain_send_only_the_new_items(server: ProviderServer) -> None:
    model = OpenAIResponsesChatModel(
        "gpt-5", api_key=SECRET, base_url=f"{server.url}/v1", store=True, chain=True
    )
    server.enqueue({"json": FIRST}, {"json": FINAL})
    first = model.chat(ChatRequest([SystemMessage("Answer in Chinese."), UserMessage(Q)], PARAMS))
    model.chat(_second_round(first.ai_message))
    one, two = server.bodies
    assert one["store"] is True and "include" not in one and "previous_response_id" not in one
    assert two["previous_response_id"] == "resp_0a1b2c"
    assert two["instructions"] == "Answer in Chinese."
    assert two["input"] == [
        {"type": "function_call_output", "call_id": "call_w1", "output": "22℃，晴"}
    ]
    with pytest.raises(ValueError, match="store=True"):
        OpenAIResponsesChatModel("gpt-5", api_key="k", chain=True)
    model.close()


# ends of a response ---------------------------------------------------------------------
def test_incomplete_response_is_a_length_finish(
    server: ProviderServer, model: OpenAIResponsesChatModel
) -> None:
    cut = _response(
        [_message("It is")],
        status="incomplete",
        incomplete_details={"reason": "max_output_tokens"},
    )
    server.enqueue({"json": cut}, {"sse": _stream_of(cut)})
    assert model.chat(ChatRequest([UserMessage(Q)])).finish_reason is FinishReason.LENGTH
    last = list(model.stream(ChatRequest([UserMessage(Q)])))[-1]
    assert isinstance(last, ResponseCompleted)
    assert last.response.finish_reason is FinishReason.LENGTH


def test_failed_error_and_truncated_streams(
    server: ProviderServer, model: OpenAIResponsesChatModel
) -> None:
    failed = {
        **FINAL,
        "status": "failed",
        "output": [],
        "error": {"code": "server_error", "message": "The model crashed"},
    }
    _sdk_response(failed)
    server.enqueue(
        {"sse": _sse([{"type": "response.failed", "response": failed}])},
        {
            "sse": _sse(
                [
                    {
                        "type": "error",
                        "code": "rate_limit_exceeded",
                        "message": "Slow down",
                        "param": None,
                    }
                ]
            )
        },
        {"sse": _stream_of(FIRST)[:-1]},
        {"json": {"id": "resp_1", "object": "response", "output": "nope"}},
    )
    with pytest.raises(ProviderError, match="The model crashed"):
        list(model.stream(ChatRequest([UserMessage(Q)])))
    with pytest.raises(ProviderError, match="Slow down"):
        list(model.stream(ChatRequest([UserMessage(Q)])))
    with pytest.raises(ProviderError, match=r"no response\.completed"):
        list(model.stream(ChatRequest([UserMessage(Q)], PARAMS)))
    with pytest.raises(ProviderError) as info:
        model.chat(ChatRequest([UserMessage(Q)]))
    assert info.value.code == 183004


def test_a_completed_call_never_changes(
    server: ProviderServer, model: OpenAIResponsesChatModel
) -> None:
    chunks = _stream_of(FIRST)
    # a stray delta after the call's arguments were done
    late = {
        "type": "response.function_call_arguments.delta",
        "item_id": "fc_w1",
        "output_index": 0,
        "delta": "garbage",
        "sequence_number": 99,
    }
    chunks.insert(-2, f"data: {json.dumps(late)}\n\n")
    server.enqueue({"sse": chunks})
    events = list(model.stream(ChatRequest([UserMessage(Q)], PARAMS)))
    completes = [e for e in events if isinstance(e, CompleteToolCall)]
    assert [c.request.arguments for c in completes] == ['{"city":"杭州"}']
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    assert calls_of(last.response) == [["call_w1", "get_weather", '{"city":"杭州"}']]


# Azure --------------------------------------------------------------------------------------
def test_azure_chat_completions_url_key_and_masking(server: ProviderServer) -> None:
    model = AzureOpenAIChatModel(
        "gpt-4o-prod", endpoint=f"{server.url}/", api_key=SECRET, max_retries=0
    )
    server.enqueue(
        {
            "json": {
                "id": "chatcmpl-1",
                "object": "chat.completion",
                "created": 1,
                "model": "gpt-4o",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "hi"},
                        "finish_reason": "stop",
                    }
                ],
            }
        },
        {"status": 401, "json": {"error": {"message": f"bad key {SECRET}"}}},
    )
    assert model.chat(ChatRequest([UserMessage("hello")])).ai_message.text == "hi"
    request = server.requests[0]
    assert request.path == "/openai/deployments/gpt-4o-prod/chat/completions"
    assert request.query == "api-version=2024-10-21"
    assert request.headers["api-key"] == SECRET
    assert "authorization" not in request.headers
    assert server.bodies[0]["model"] == "gpt-4o-prod"
    check_openai_request(server.bodies[0])
    with pytest.raises(ProviderError) as info:
        model.chat(ChatRequest([UserMessage("hello")]))
    assert SECRET not in str(info.value) and SECRET not in repr(model)
    model.close()


def test_azure_responses_with_a_token_provider_and_the_v1_scheme(server: ProviderServer) -> None:
    tokens = iter(["tok-1", "tok-2", "tok-3"])
    model = AzureOpenAIResponsesChatModel(
        "gpt-5-prod", endpoint=server.url, token_provider=lambda: next(tokens)
    )
    server.enqueue({"json": FINAL}, {"json": FINAL}, {"sse": _stream_of(FINAL)})
    model.chat(ChatRequest([UserMessage("hello")]))
    asyncio.run(model.achat(ChatRequest([UserMessage("hello")])))
    list(model.stream(ChatRequest([UserMessage("hello")])))
    assert [r.headers["authorization"] for r in server.requests] == [
        "Bearer tok-1",
        "Bearer tok-2",
        "Bearer tok-3",
    ]
    assert all("api-key" not in r.headers for r in server.requests)
    assert server.requests[0].path == "/openai/responses"
    assert server.requests[0].query == "api-version=2025-04-01-preview"
    assert server.bodies[0]["model"] == "gpt-5-prod"
    for body in server.bodies:
        check_responses_request(body)
    v1 = AzureOpenAIChatModel("d", endpoint=server.url, api_key="k", api_version="v1")
    assert v1._url("d", False) == f"{server.url}/openai/v1/chat/completions"
    model.close()
    v1.close()


def test_azure_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("AZURE_OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("AZURE_OPENAI_ENDPOINT", raising=False)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-must-not-leak")
    with pytest.raises(ValueError, match="AZURE_OPENAI_ENDPOINT"):
        AzureOpenAIChatModel("d")
    monkeypatch.setenv("AZURE_OPENAI_ENDPOINT", "https://res.openai.azure.com/")
    with pytest.raises(ValueError, match="AZURE_OPENAI_API_KEY"):
        AzureOpenAIResponsesChatModel("d")
    monkeypatch.setenv("AZURE_OPENAI_API_KEY", "azure-key")
    model = AzureOpenAIChatModel("d", api_version="2025-01-01-preview")
    assert model._url("d", False) == (
        "https://res.openai.azure.com/openai/deployments/d/chat/completions"
        "?api-version=2025-01-01-preview"
    )
    assert model._http._headers["api-key"] == "azure-key"
    assert "authorization" not in model._http._headers
    with pytest.raises(ValueError, match="not both"):
        AzureOpenAIChatModel("d", api_key="k", token_provider=lambda: "t")


def test_a_missing_key_is_reported_before_sending(monkeypatch: pytest.MonkeyPatch) -> None:
    from toolweave.errors import MissingApiKeyError

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(MissingApiKeyError, match="OPENAI_API_KEY"):
        OpenAIResponsesChatModel("gpt-5").chat(ChatRequest([UserMessage("hi")]))


def test_calls_only_in_the_completed_response_are_announced(
    server: ProviderServer, model: OpenAIResponsesChatModel
) -> None:
    """A server that sends only `response.completed` (no item events) still gets its calls
    run: they are announced when the final object arrives."""
    server.enqueue({"sse": _sse([{"type": "response.completed", "response": FIRST}])})
    events = list(model.stream(ChatRequest([UserMessage(Q)], PARAMS)))
    completes = [e for e in events if isinstance(e, CompleteToolCall)]
    assert [(c.index, c.request.id) for c in completes] == [(0, "call_w1")]
    last = events[-1]
    assert isinstance(last, ResponseCompleted)
    assert calls_of(last.response) == [["call_w1", "get_weather", '{"city":"杭州"}']]


def test_a_call_without_a_call_id_is_announced_once(
    server: ProviderServer, model: OpenAIResponsesChatModel
) -> None:
    """A function_call item without call_id (nor id) gets a generated id each time it is
    read: the copy in response.completed is the same call (same output index), not a second
    one to run."""
    item = {"type": "function_call", "name": "get_weather", "arguments": ""}
    done = {**item, "arguments": '{"city":"Oslo"}'}
    final = {"id": "r1", "status": "completed", "output": [done]}
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": item},
        {"type": "response.function_call_arguments.done", "output_index": 0, "arguments": "{}"},
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": final},
    ]
    server.enqueue({"sse": [f"data: {json.dumps(e)}\n\n" for e in events]})
    out = list(model.stream(ChatRequest([UserMessage(Q)], PARAMS)))
    completes = [e for e in out if isinstance(e, CompleteToolCall)]
    assert len(completes) == 1
    last = out[-1]
    assert isinstance(last, ResponseCompleted)
    assert last.response.ai_message.tool_execution_requests == [completes[0].request]


def test_an_entra_token_echoed_by_the_server_is_masked(server: ProviderServer) -> None:
    token = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.entra-token-payload"
    model = AzureOpenAIResponsesChatModel(
        "gpt-5-prod", endpoint=server.url, token_provider=lambda: token, max_retries=0
    )
    echo = {"status": 400, "json": {"error": {"message": f"token {token} is not for this"}}}
    server.enqueue(echo, echo)
    with pytest.raises(ProviderError) as info:
        model.chat(ChatRequest([UserMessage("hello")]))
    assert token not in str(info.value) and token not in str(info.value.body)
    with pytest.raises(ProviderError) as info:
        asyncio.run(model.achat(ChatRequest([UserMessage("hello")])))
    assert token not in str(info.value) and token not in str(info.value.body)
    assert token not in repr(model)
    model.close()


def test_a_token_per_request_does_not_grow_the_masked_secrets(server: ProviderServer) -> None:
    tokens = (f"eyJ-minted-token-number-{i:06d}" for i in range(10_000))
    model = AzureOpenAIResponsesChatModel(
        "gpt-5-prod", endpoint=server.url, token_provider=lambda: next(tokens)
    )
    for _ in range(50):
        model._request_headers()
    assert len(model._http._secrets) <= 10
    last = model._request_headers()
    assert last is not None
    assert last["authorization"].removeprefix("Bearer ") in model._http._secrets
    model.close()


@pytest.mark.parametrize(
    "item",
    [
        {"type": "message", "role": "assistant", "content": "Hello"},
        {"type": "reasoning", "summary": "thinking"},
    ],
)
def test_an_item_whose_parts_are_not_a_list_is_response_invalid(
    server: ProviderServer, model: OpenAIResponsesChatModel, item: dict[str, Any]
) -> None:
    """Not silently an empty answer: a string where the parts belong was read character by
    character and every character skipped."""
    body = {"id": "r", "status": "completed", "output": [item]}
    server.enqueue({"json": body})
    with pytest.raises(ProviderError) as info:
        model.chat(ChatRequest([UserMessage(Q)]))
    assert info.value.code == 183004 and "not a list" in str(info.value)


@pytest.mark.parametrize("token", [None, "", "  ", b"bytes-token-123"])
def test_a_token_provider_returning_no_token_sends_nothing(
    server: ProviderServer, token: Any
) -> None:
    from toolweave.errors import AuthenticationError

    model = AzureOpenAIResponsesChatModel(
        "gpt-5-prod", endpoint=server.url, token_provider=lambda: token, max_retries=0
    )
    with pytest.raises(AuthenticationError, match="no usable token"):
        model.chat(ChatRequest([UserMessage("hello")]))

    async def provider() -> Any:
        return token

    amodel = AzureOpenAIResponsesChatModel(
        "gpt-5-prod", endpoint=server.url, token_provider=provider, max_retries=0
    )
    with pytest.raises(AuthenticationError, match="no usable token"):
        asyncio.run(amodel.achat(ChatRequest([UserMessage("hello")])))
    assert server.requests == []
    model.close()
    amodel.close()


def test_a_history_with_foreign_output_items_is_still_sent(
    server: ProviderServer, model: OpenAIResponsesChatModel
) -> None:
    """Output items kept in an AiMessage come back from stored (maybe edited) states: one
    that is not an object is left out, not an AttributeError while building the request."""
    ai = AiMessage("Hi.", attributes={"openai_responses": {"id": "r0", "output": [1, "x", None]}})
    server.enqueue({"json": FINAL})
    model.chat(ChatRequest([UserMessage("hello"), ai, UserMessage("again")]))
    assert server.bodies[0]["input"][1] == {"role": "assistant", "content": "Hi."}


@pytest.mark.parametrize("arguments_done", [True, False], ids=["arguments-done", "item-only"])
def test_the_finished_item_names_a_call_the_earlier_events_did_not(
    server: ProviderServer, model: OpenAIResponsesChatModel, arguments_done: bool
) -> None:
    """A server whose `output_item.added` lacks the name and call_id (and streams the
    arguments) is completed from `output_item.done`: the call runs as get_weather with its
    own id, once, and the final response agrees."""
    added = {"type": "function_call", "id": "fc_1", "arguments": ""}
    done = {
        "type": "function_call",
        "id": "fc_1",
        "call_id": "call_1",
        "name": "get_weather",
        "arguments": '{"city":"Oslo"}',
    }
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {"type": "response.function_call_arguments.delta", "output_index": 0, "delta": '{"ci'},
        {
            "type": "response.function_call_arguments.delta",
            "output_index": 0,
            "delta": 'ty":"Oslo"}',
        },
    ]
    if arguments_done:
        events.append(
            {
                "type": "response.function_call_arguments.done",
                "output_index": 0,
                "arguments": '{"city":"Oslo"}',
            }
        )
    events += [
        {"type": "response.output_item.done", "output_index": 0, "item": done},
        {"type": "response.completed", "response": _response([done])},
    ]
    server.enqueue({"sse": [f"data: {json.dumps(e)}\n\n" for e in events]})
    out = list(model.stream(ChatRequest([UserMessage(Q)], PARAMS)))
    completes = [e for e in out if isinstance(e, CompleteToolCall)]
    assert [(c.request.id, c.request.name, c.request.arguments) for c in completes] == [
        ("call_1", "get_weather", '{"city":"Oslo"}')
    ]
    last = out[-1]
    assert isinstance(last, ResponseCompleted)
    assert calls_of(last.response) == [["call_1", "get_weather", '{"city":"Oslo"}']]


def test_a_call_still_open_at_the_end_is_completed_from_the_final_object(
    server: ProviderServer, model: OpenAIResponsesChatModel
) -> None:
    added = {"type": "function_call", "id": "fc_1", "arguments": ""}
    final = {**added, "call_id": "call_1", "name": "get_weather", "arguments": '{"city":"Oslo"}'}
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": added},
        {"type": "response.completed", "response": _response([final])},
    ]
    server.enqueue({"sse": [f"data: {json.dumps(e)}\n\n" for e in events]})
    out = list(model.stream(ChatRequest([UserMessage(Q)], PARAMS)))
    completes = [e for e in out if isinstance(e, CompleteToolCall)]
    assert [(c.request.id, c.request.name) for c in completes] == [("call_1", "get_weather")]
    assert calls_of(out[-1].response) == [["call_1", "get_weather", '{"city":"Oslo"}']]  # type: ignore[union-attr]


def _moved_call_stream(item_id: str | None) -> list[str]:
    """A call without call_id streamed at output_index 1 (a reasoning item at 0), listed at
    position 0 in `response.completed` (the reasoning item after it)."""
    item: dict[str, Any] = {"type": "function_call", "name": "get_weather", "arguments": ""}
    if item_id:
        item["id"] = item_id
    done = {**item, "arguments": '{"city":"Paris"}'}
    reasoning = {"type": "reasoning", "id": "rs_1", "summary": []}
    final = {"id": "r1", "status": "completed", "output": [done, reasoning]}
    events = [
        {"type": "response.output_item.added", "output_index": 0, "item": reasoning},
        {"type": "response.output_item.added", "output_index": 1, "item": item},
        {"type": "response.function_call_arguments.delta", "output_index": 1, "delta": '{"ci'},
        {
            "type": "response.function_call_arguments.done",
            "output_index": 1,
            "arguments": '{"city":"Paris"}',
        },
        {"type": "response.output_item.done", "output_index": 1, "item": done},
        {"type": "response.completed", "response": final},
    ]
    return [f"data: {json.dumps(e)}\n\n" for e in events]


@pytest.mark.parametrize("item_id", ["fc_moved", None], ids=["item-id", "no-id"])
@pytest.mark.parametrize("mode", ["stream", "astream_eager"])
def test_a_call_listed_at_another_position_in_the_final_object_runs_once(
    server: ProviderServer, model: OpenAIResponsesChatModel, item_id: str | None, mode: str
) -> None:
    """Guarantee 5 against a hostile stream: the final object lists the streamed call at
    another output position. Calls are matched by item id, then by content, never by
    position: one CompleteToolCall, and the tool runs once."""
    server.enqueue(
        {"sse": _moved_call_stream(item_id)}, {"sse": _stream_of(_response([_message("ok")]))}
    )
    ran: list[str] = []

    def get_weather(city: str) -> str:
        """Current weather in a city."""
        ran.append(city)
        return f"{city}: sunny"

    service = ToolService().tools(get_weather)
    if mode == "stream":
        last = list(service.chat_stream(model, None, "Weather in Paris?"))[-1]
    else:

        async def consume() -> Any:
            last = None
            async for event in service.achat_stream(model, None, "Weather in Paris?", eager=True):
                last = event
            return last

        last = asyncio.run(consume())
    assert isinstance(last, ChatCompleted)
    assert ran == ["Paris"]
    assert len(last.result.tool_executions) == 1
    calls = [i for i in server.bodies[1]["input"] if i.get("type") == "function_call"]
    outputs = [i for i in server.bodies[1]["input"] if i.get("type") == "function_call_output"]
    assert len(calls) == 1 and [o["call_id"] for o in outputs] == [calls[0]["call_id"]]
    if item_id:  # the item id stands in for the missing call_id, streamed or not
        assert calls[0]["call_id"] == item_id


def test_final_calls_are_matched_by_identity_then_content() -> None:
    """Two anonymous calls listed in reverse order, a streamed call whose copy has other
    text for the same JSON, and one call with its own call_id only in the final object:
    three streamed calls announced once each, the new one announced too."""
    from toolweave.providers._http import HttpTransport
    from toolweave.providers._sse import SSEEvent

    parser = ResponsesStreamParser(HttpTransport(provider="t", headers={}, secrets=()))
    a = {"type": "function_call", "name": "f", "arguments": '{"x":1}'}
    b = {"type": "function_call", "name": "f", "arguments": '{"x":2}'}
    c = {"type": "function_call", "name": "g", "arguments": '{"y": 1}', "id": "fc_c"}
    new = {"type": "function_call", "name": "f", "arguments": "{}", "call_id": "call_new"}
    events: list[dict[str, Any]] = []
    for position, item in enumerate([a, b, c]):
        events.append(
            {"type": "response.output_item.added", "output_index": position, "item": item}
        )
        events.append({"type": "response.output_item.done", "output_index": position, "item": item})
        if item is c:
            c = {**c, "arguments": '{ "y" : 1 }', "id": None}  # same JSON, id dropped
    final = {"id": "r", "status": "completed", "output": [new, c, b, a]}
    events.append({"type": "response.completed", "response": final})
    out = [e for event in events for e in parser.feed(SSEEvent(data=json.dumps(event)))]
    completes = [e.request for e in out if isinstance(e, CompleteToolCall)]
    assert [(r.name, r.arguments) for r in completes] == [
        ("f", '{"x":1}'),
        ("f", '{"x":2}'),
        ("g", '{"y": 1}'),
        ("f", "{}"),
    ]
    assert completes[2].id == "fc_c" and completes[3].id == "call_new"
    last = out[-1]
    assert isinstance(last, ResponseCompleted)
    assert last.response.ai_message.tool_execution_requests == completes


NON_ASCII_TOKEN = "eyJ0eXAiOiJKV1Qi.pay\u00e9load-secret-part"


def _raising() -> str:
    raise RuntimeError("IMDS endpoint refused: Authorization: Bearer sk-leaked-in-text-0123")


async def _async_token() -> str:
    return "eyJ-async-token-0123456789"


def _run_azure_face(model: Any, face: str) -> Any:
    request = ChatRequest([UserMessage("hello")])
    if face == "chat":
        return model.chat(request)
    if face == "achat":
        return asyncio.run(model.achat(request))
    if face == "stream":
        return list(model.stream(request))
    if face == "astream":

        async def consume() -> list[Any]:
            return [e async for e in model.astream(request)]

        return asyncio.run(consume())
    service = ToolService().tools(get_weather)
    if face == "service.chat":
        return service.chat(model, None, "hello")
    if face == "service.achat":
        return asyncio.run(service.achat(model, None, "hello"))
    return list(service.chat_stream(model, None, "hello"))


@pytest.mark.parametrize(
    "face",
    ["chat", "achat", "stream", "astream", "service.chat", "service.achat", "service.chat_stream"],
)
@pytest.mark.parametrize(
    ("provider", "cause"),
    [
        (_raising, RuntimeError),
        (lambda: None, ValueError),
        (lambda: b"eyJ-bytes-token", ValueError),
        (lambda: NON_ASCII_TOKEN, ValueError),
        (lambda: "eyJ-ok\r\nX-Injected: 1", ValueError),
        (_async_token, ValueError),
    ],
    ids=["raises", "none", "bytes", "non-ascii", "header-injection", "async"],
)
@pytest.mark.parametrize("cls", [AzureOpenAIResponsesChatModel, AzureOpenAIChatModel])
def test_a_failing_token_provider_is_an_authentication_error(
    server: ProviderServer, face: str, provider: Any, cause: type, cls: Any
) -> None:
    """A token provider that raises, returns None, bytes, a token that cannot go in a header,
    or is async on a sync face: `AuthenticationError` (183001) with the cause kept, the token
    and anything credential-like in the provider's text masked, nothing sent; every face,
    through ToolService too. (An async provider works on the async faces.)"""
    from toolweave.errors import AuthenticationError

    if provider is _async_token and (face.startswith("a") or face.startswith("service")):
        pytest.skip("an async provider works on the async faces (ToolService uses them)")
    model = cls("gpt-5-prod", endpoint=server.url, token_provider=provider, max_retries=0)
    with model, pytest.raises(AuthenticationError) as info:
        _run_azure_face(model, face)
    error = info.value
    assert error.code == 183001 and error.provider == "azure.ai.openai"
    assert isinstance(error.__cause__, cause)
    text = f"{error} {error!r} {error.message}"
    assert "sk-leaked-in-text" not in text and NON_ASCII_TOKEN not in text
    assert "X-Injected" not in text
    assert server.requests == []


def test_a_final_copy_whose_call_id_changed_is_not_a_second_call() -> None:
    """The stream shows pay(A) as call c0; the final object lists pay(A) as c1 and, at
    another position, pay(B) as c2: pay(A) is announced once (as streamed), pay(B) is the
    one call the final object adds."""
    from toolweave.providers._http import HttpTransport
    from toolweave.providers._sse import SSEEvent

    parser = ResponsesStreamParser(HttpTransport(provider="t", headers={}, secrets=()))
    a = {"type": "function_call", "name": "pay", "arguments": '{"to":"A"}', "call_id": "c0"}
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": a},
        {"type": "response.output_item.done", "output_index": 0, "item": a},
    ]
    final = [
        {**a, "arguments": '{"to":"B"}', "call_id": "c2"},
        {**a, "call_id": "c1"},
    ]
    events.append(
        {"type": "response.completed", "response": {"status": "completed", "output": final}}
    )
    out = [e for event in events for e in parser.feed(SSEEvent(data=json.dumps(event)))]
    completes = [e.request for e in out if isinstance(e, CompleteToolCall)]
    assert [(r.id, r.arguments) for r in completes] == [("c0", '{"to":"A"}'), ("c2", '{"to":"B"}')]
