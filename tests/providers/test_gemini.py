"""GeminiChatModel against the scripted loopback server."""

from __future__ import annotations

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
from toolweave.errors import AuthenticationError, ProviderError, UnsupportedOptionError
from toolweave.execution import ImageContent, TextContent, ToolExecutionRequest
from toolweave.providers import GeminiChatModel
from toolweave.providers.gemini_chat import GENERATED_ID_PREFIX

from .conftest import SECRET, calls_of, check_gemini_request
from .test_openai import TIME, WEATHER

Q = "杭州今天天气怎么样？"
PARAMS = ChatRequestParameters(tools=[WEATHER], tool_choice=ToolChoice.AUTO)


def test_weather_with_thought_signature_sent_back(
    server: ProviderServer, gemini_model: GeminiChatModel
) -> None:
    transcript = server.enqueue_transcript("gemini/weather_thought_signature")
    first = gemini_model.chat(ChatRequest([UserMessage(Q)], PARAMS))
    assert first.finish_reason is FinishReason.TOOL_EXECUTION
    [call] = first.ai_message.tool_execution_requests
    assert call.name == "get_weather" and call.arguments == '{"city":"杭州"}'
    assert call.id.startswith(GENERATED_ID_PREFIX)
    assert first.usage is not None and first.usage.output_tokens == 55  # candidates + thoughts
    assert first.id == "resp-1" and first.model == "gemini-2.5-flash"
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
    final = gemini_model.chat(second)
    assert final.ai_message.text == "杭州今天 22℃，天气晴，适合出行。"
    assert final.finish_reason is FinishReason.STOP
    assert server.bodies == [e["request"]["body"] for e in transcript["exchanges"]]
    for request, exchange in zip(server.requests, transcript["exchanges"], strict=True):
        assert request.path == exchange["request"]["path"]
        assert request.query == ""
        assert request.headers["x-goog-api-key"] == SECRET
        assert SECRET not in request.path + request.query
    for body in server.bodies:
        check_gemini_request(body)


def _check_stream(events: list[Any], expected: dict[str, Any]) -> AiMessage:
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    response = final.response
    message = response.ai_message
    assert message.text == expected["text"]
    assert message.reasoning == expected["reasoning"]
    got = calls_of(response)
    assert [
        [None if c[0].startswith(GENERATED_ID_PREFIX) else c[0], c[1], c[2]] for c in got
    ] == expected["calls"]
    assert response.finish_reason == expected["finish_reason"]
    u = response.usage
    assert u is not None and [u.input_tokens, u.output_tokens, u.total_tokens] == expected["usage"]
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == expected["text"]
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == expected["reasoning"]
    partials = [e for e in events if isinstance(e, PartialToolCall)]
    completes = [e for e in events if isinstance(e, CompleteToolCall)]
    assert [p.index for p in partials] == [c.index for c in completes] == [0, 1]
    assert [c.request for c in completes] == list(message.tool_execution_requests)
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


def test_stream_function_calls_and_signatures_sync(
    server: ProviderServer, gemini_model: GeminiChatModel
) -> None:
    transcript = server.enqueue_transcript("gemini/stream_function_calls")
    request = ChatRequest(
        [UserMessage("weather and time in Paris?")], ChatRequestParameters(tools=[WEATHER, TIME])
    )
    message = _check_stream(list(gemini_model.stream(request)), transcript["expected"])
    events = list(gemini_model.stream(_round_two(message)))
    assert isinstance(events[-1], ResponseCompleted)
    assert events[-1].response.ai_message.text == "Paris is sunny."
    first, second = server.requests
    assert first.path == "/v1beta/models/gemini-2.5-flash:streamGenerateContent"
    assert first.query == "alt=sse"
    assert second.body["contents"][1:] == transcript["exchanges"][1]["request"]["contents_tail"]
    for body in server.bodies:
        check_gemini_request(body)


async def test_stream_function_calls_and_signatures_async(
    server: ProviderServer, gemini_model: GeminiChatModel
) -> None:
    transcript = server.enqueue_transcript("gemini/stream_function_calls")
    request = ChatRequest(
        [UserMessage("weather and time in Paris?")], ChatRequestParameters(tools=[WEATHER, TIME])
    )
    message = _check_stream(
        [e async for e in gemini_model.astream(request)], transcript["expected"]
    )
    events = [e async for e in gemini_model.astream(_round_two(message))]
    assert isinstance(events[-1], ResponseCompleted)
    assert (
        server.bodies[1]["contents"][1:] == transcript["exchanges"][1]["request"]["contents_tail"]
    )


def test_stream_cut(server: ProviderServer, gemini_model: GeminiChatModel) -> None:
    server.enqueue_transcript("gemini/stream_cut")
    events: list[Any] = []
    with pytest.raises(ProviderError):
        for e in gemini_model.stream(ChatRequest([UserMessage("hi")])):
            events.append(e)
    assert events == [TextDelta("Let me ")]
    assert len(server.requests) == 1


def test_invalid_key_is_an_authentication_error(
    server: ProviderServer, gemini_model: GeminiChatModel
) -> None:
    server.enqueue(
        {
            "status": 400,
            "json": {
                "error": {
                    "code": 400,
                    "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                    "details": [
                        {
                            "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                            "reason": "API_KEY_INVALID",
                        }
                    ],
                }
            },
        }
    )
    with pytest.raises(AuthenticationError) as info:
        gemini_model.chat(ChatRequest([UserMessage("hi")]))
    assert info.value.status == 400 and "API key not valid" in str(info.value)
    assert SECRET not in str(info.value)
    assert len(server.requests) == 1


# request mapping ---------------------------------------------------------------------------
def _body(chat_model: GeminiChatModel, **params: Any) -> dict[str, Any]:
    messages = params.pop("messages", [UserMessage("hi")])
    return chat_model.build_request_body(ChatRequest(messages, ChatRequestParameters(**params)))


@pytest.mark.parametrize(
    ("choice", "wire"),
    [
        (ToolChoice.AUTO, {"mode": "AUTO"}),
        (ToolChoice.REQUIRED, {"mode": "ANY"}),
        (ToolChoice.NONE, {"mode": "NONE"}),
        (ToolChoice.tool("get_time"), {"mode": "ANY", "allowedFunctionNames": ["get_time"]}),
    ],
)
def test_tool_config(choice: ToolChoice, wire: dict[str, Any]) -> None:
    model = GeminiChatModel("gemini-2.5-flash", api_key="k")
    body = _body(model, tools=[WEATHER, TIME], tool_choice=choice, parallel_tool_calls=True)
    assert body["toolConfig"] == {"functionCallingConfig": wire}
    check_gemini_request(body)


def test_parallel_false_refused_before_sending(
    server: ProviderServer, gemini_model: GeminiChatModel
) -> None:
    request = ChatRequest(
        [UserMessage("hi")], ChatRequestParameters(tools=[WEATHER], parallel_tool_calls=False)
    )
    with pytest.raises(UnsupportedOptionError) as info:
        gemini_model.chat(request)
    assert info.value.provider == "gemini" and "parallel_tool_calls" in info.value.option
    with pytest.raises(UnsupportedOptionError):
        gemini_model.stream(request)
    assert server.requests == []


def test_schema_modes_and_generation_config() -> None:
    openapi = GeminiChatModel("models/gemini-2.5-flash", api_key="k")
    assert openapi.model == "gemini-2.5-flash"
    decl = _body(openapi, tools=[TIME])["tools"][0]["functionDeclarations"][0]
    assert "parameters" in decl and "parametersJsonSchema" not in decl
    js = GeminiChatModel("gemini-2.5-flash", api_key="k", schema_mode="json_schema")
    decl = _body(js, tools=[TIME])["tools"][0]["functionDeclarations"][0]
    assert "parametersJsonSchema" in decl
    body = _body(
        openapi,
        messages=[SystemMessage("be brief"), UserMessage("hi")],
        temperature=0.2,
        top_p=0.8,
        max_tokens=64,
        stop=["END"],
        custom_parameters={
            "generationConfig": {"thinkingConfig": {"thinkingBudget": 0}},
            "safetySettings": [],
        },
    )
    assert body["systemInstruction"] == {"parts": [{"text": "be brief"}]}
    assert body["generationConfig"] == {
        "temperature": 0.2,
        "topP": 0.8,
        "maxOutputTokens": 64,
        "stopSequences": ["END"],
        "thinkingConfig": {"thinkingBudget": 0},
    }
    del body["safetySettings"]
    check_gemini_request(body)
    # response_format is mapped now: tests/providers/test_structured_output.py


def test_messages_mapping_without_kept_parts() -> None:
    model = GeminiChatModel("gemini-2.5-flash", api_key="k")
    c1 = ToolExecutionRequest(id="fc_9", name="chart", arguments='{"n":1}')
    c2 = ToolExecutionRequest(id=f"{GENERATED_ID_PREFIX}x_1", name="get_time", arguments="")
    body = _body(
        model,
        messages=[
            UserMessage("look", contents=(ImageContent(data="aGk=", mime_type="image/jpeg"),)),
            AiMessage("ok", tool_execution_requests=[c1, c2]),
            ToolExecutionResultMessage(
                id="fc_9",
                tool_name="chart",
                text="a chart",
                contents=(TextContent(text="a chart"), ImageContent(data="aGk=")),
            ),
            ToolExecutionResultMessage(id=c2.id, tool_name="get_time", text="boom", is_error=True),
            UserMessage("thanks"),
        ],
    )
    assert body["contents"] == [
        {
            "role": "user",
            "parts": [{"text": "look"}, {"inlineData": {"mimeType": "image/jpeg", "data": "aGk="}}],
        },
        {
            "role": "model",
            "parts": [
                {"text": "ok"},
                {"functionCall": {"name": "chart", "args": {"n": 1}, "id": "fc_9"}},
                {"functionCall": {"name": "get_time", "args": {}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "name": "chart",
                        "response": {
                            "result": "a chart\n[attachment 1: image (image/png, 2 B), "
                            "in the next user part]"
                        },
                        "id": "fc_9",
                    }
                },
                {"functionResponse": {"name": "get_time", "response": {"error": "boom"}}},
                # Gemini 2.x takes no media in function responses: it follows them
                {"text": "[attachment 1 of tool call fc_9 (chart)]"},
                {"inlineData": {"mimeType": "image/png", "data": "aGk="}},
                {"text": "thanks"},
            ],
        },
    ]
    check_gemini_request(body)


def test_recorded_transcripts_parse_with_the_sdk() -> None:
    from google.genai import types

    from toolweave.providers._sse import SSEDecoder

    for name in [
        "gemini/weather_thought_signature",
        "gemini/stream_function_calls",
        "gemini/loop_parallel",
        "gemini/loop_parallel_stream",
    ]:
        for exchange in load_transcript(name)["exchanges"]:
            response = exchange["response"]
            if "json" in response:
                types.GenerateContentResponse.model_validate(response["json"])
            else:
                decoder = SSEDecoder()
                for e in [e for c in response["sse"] for e in decoder.feed(c)] + decoder.flush():
                    types.GenerateContentResponse.model_validate_json(e.data)
            body = exchange["request"].get("body")
            if body:
                check_gemini_request(body)
