"""Structured output per provider: `response_format` request bodies (checked against the
official SDK request types), answers parsed into typed output through
`ToolService.chat(..., output_type=...)` against the loopback transcript server, streamed
partial objects, and the correction path end to end."""

from __future__ import annotations

import asyncio
import itertools
import json
from enum import StrEnum
from typing import Any

import pytest
from pydantic import BaseModel

from servers.provider_server import ProviderServer, load_transcript
from toolweave import (
    ChatCompleted,
    PartialOutput,
    StructuredOutputError,
    ToolChatResult,
    ToolService,
    tool,
)
from toolweave.chat import (
    ChatRequest,
    ChatRequestParameters,
    FinishReason,
    TextDelta,
    ToolChoice,
    UserMessage,
)
from toolweave.errors import SchemaError, UnsupportedOptionError
from toolweave.providers import AnthropicChatModel, GeminiChatModel, OpenAIChatModel
from toolweave.tools.card import ToolCard

from .conftest import (
    SECRET,
    check_anthropic_request,
    check_gemini_request,
    check_openai_request,
    no_sleep,
)


class Unit(StrEnum):
    C = "celsius"
    F = "fahrenheit"


class Reading(BaseModel):
    value: float
    unit: Unit
    at: str | None = None


class Report(BaseModel):
    city: str
    readings: list[Reading]
    note: str | None = None


EXPECTED_REPORT = Report(
    city="Paris",
    readings=[Reading(value=21.5, unit=Unit.C, at="12:00"), Reading(value=70.1, unit=Unit.F)],
)
SCHEMA: dict[str, Any] = {
    "title": "Answer",
    "description": "The answer and its sources.",
    "type": "object",
    "properties": {
        "answer": {"type": "integer"},
        "confidence": {"type": "string", "enum": ["low", "high"]},
        "sources": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"url": {"type": "string"}, "title": {"type": ["string", "null"]}},
                "required": ["url", "title"],
                "additionalProperties": False,
            },
        },
    },
    "required": ["answer", "confidence", "sources"],
    "additionalProperties": False,
}
EXPECTED_ANSWER = {
    "answer": 42,
    "confidence": "high",
    "sources": [
        {"url": "https://example.org/a", "title": "A"},
        {"url": "https://example.org/b", "title": None},
    ],
}
QUESTION = "Weather report for Paris?"


@tool
def temperature(city: str) -> str:
    """Current temperature readings for a city."""
    return f"{city}: 21.5 celsius at 12:00, 70.1 fahrenheit"


# helpers ----------------------------------------------------------------------------------
def _run(
    mode: str, service: ToolService, model: Any, messages: Any, output_type: Any
) -> tuple[ToolChatResult, list[Any]]:
    """Run one conversation through a face; return the result and the stream events."""
    if mode == "sync":
        return service.chat(model, None, messages, output_type=output_type), []
    if mode == "async":
        return asyncio.run(service.achat(model, None, messages, output_type=output_type)), []
    if mode == "stream":
        events = list(service.chat_stream(model, None, messages, output_type=output_type))
    else:

        async def consume() -> list[Any]:
            return [
                e
                async for e in service.achat_stream(
                    model, None, messages, eager=True, output_type=output_type
                )
            ]

        events = asyncio.run(consume())
    assert isinstance(events[-1], ChatCompleted)
    return events[-1].result, events


def _check_exchanges(server: ProviderServer, transcript: dict[str, Any]) -> None:
    """Every request matches its transcript entry: path, query, and each expected body key."""
    exchanges = transcript["exchanges"]
    assert len(server.requests) == len(exchanges)
    for recorded, exchange in zip(server.requests, exchanges, strict=True):
        expected = exchange["request"]
        assert recorded.path == expected["path"]
        if "query" in expected:
            assert recorded.query == expected["query"]
        for key, value in expected.get("body", {}).items():
            if key == "messages" and expected.get("messages_prefix"):
                assert recorded.body[key][: len(value)] == value
            else:
                assert recorded.body[key] == value, key


def _check_partials(events: list[Any], final: Any, minimum: int = 4) -> None:
    """PartialOutput values grow as the JSON text grows and end with the whole object."""
    partials = [e.value for e in events if isinstance(e, PartialOutput)]
    assert len(partials) >= minimum
    assert partials[-1] == final
    assert all(p != q for p, q in itertools.pairwise(partials))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert json.loads(text) == final


def _sdk_check(provider: str, body: dict[str, Any]) -> None:
    if provider == "openai":
        check_openai_request(body)
    elif provider == "anthropic":
        check_anthropic_request(body)
    else:
        check_gemini_request(body)


def _body(model: Any, **params: Any) -> dict[str, Any]:
    return model.build_request_body(  # type: ignore[no-any-return]
        ChatRequest([UserMessage(QUESTION)], ChatRequestParameters(**params))
    )


def _card(name: str) -> ToolCard:
    return ToolCard(
        name=name,
        description=f"The {name} tool.",
        input_params={"type": "object", "properties": {"q": {"type": "string"}}},
    )


# request bodies ---------------------------------------------------------------------------
def test_openai_response_format_strict_when_lossless() -> None:
    model = OpenAIChatModel("gpt-4o-mini", api_key="k")
    transcript = load_transcript("structured_openai_tools")
    body = _body(model, response_format=Report)
    assert (
        body["response_format"] == transcript["exchanges"][0]["request"]["body"]["response_format"]
    )
    check_openai_request(body)
    body = _body(model, response_format=SCHEMA, tools=[temperature.card])
    rf = load_transcript("structured_openai_dict")["exchanges"][0]["request"]["body"]
    assert body["response_format"] == rf["response_format"]
    check_openai_request(body)
    check_openai_request(_body(model, response_format=Report) | {"stream": True})


def test_openai_response_format_non_strict_when_the_schema_cannot_be_strict() -> None:
    model = OpenAIChatModel("gpt-4o-mini", api_key="k")

    class Defaults(BaseModel):
        name: str
        tags: list[str] = []

    class Free(BaseModel):
        data: dict[str, Any]

    cases: list[Any] = [list[Reading], Defaults, Free, {"type": "array", "items": {}}]
    for spec in cases:
        rf = _body(model, response_format=spec)["response_format"]
        assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is False
        schema = spec.model_json_schema() if isinstance(spec, type) else None
        if schema is not None:
            assert rf["json_schema"]["schema"] == schema  # sent as it is
        check_openai_request(_body(model, response_format=spec))
    rf = _body(model, response_format=list[Reading])["response_format"]["json_schema"]
    assert rf["name"] == "list" and rf["schema"]["items"] == {"$ref": "#/$defs/Reading"}


def test_anthropic_forced_tool_without_other_tools() -> None:
    model = AnthropicChatModel("claude-sonnet-4-5", api_key="k")
    body = _body(model, response_format=Report)
    assert body["tool_choice"] == {"type": "tool", "name": "final_answer"}
    [answer] = body["tools"]
    assert answer["name"] == "final_answer" and "final answer" in answer["description"]
    assert answer["input_schema"] == Report.model_json_schema()
    check_anthropic_request(body)
    check_anthropic_request(_body(model, response_format=Report) | {"stream": True})


def test_anthropic_forced_tool_with_other_tools() -> None:
    model = AnthropicChatModel("claude-sonnet-4-5", api_key="k")
    body = _body(model, response_format=Report, tools=[temperature.card, _card("search")])
    assert [t["name"] for t in body["tools"]] == ["temperature", "search", "final_answer"]
    assert body["tool_choice"] == {"type": "any"}
    check_anthropic_request(body)
    # AUTO and REQUIRED: tools may be called first, every turn is a tool call
    for choice in (ToolChoice.AUTO, ToolChoice.REQUIRED):
        assert _body(model, response_format=Report, tools=[temperature.card], tool_choice=choice)[
            "tool_choice"
        ] == {"type": "any"}
    # NONE: no other tool may be called, the answer is forced
    body = _body(
        model, response_format=Report, tools=[temperature.card], tool_choice=ToolChoice.NONE
    )
    assert body["tool_choice"] == {"type": "tool", "name": "final_answer"}
    # a specific tool stays forced; the answer tool may be named too
    body = _body(
        model,
        response_format=Report,
        tools=[temperature.card],
        tool_choice=ToolChoice.tool("temperature"),
        parallel_tool_calls=False,
    )
    assert body["tool_choice"] == {
        "type": "tool",
        "name": "temperature",
        "disable_parallel_tool_use": True,
    }
    check_anthropic_request(body)
    body = _body(
        model,
        response_format=Report,
        tools=[temperature.card],
        tool_choice=ToolChoice.tool("final_answer"),
    )
    assert body["tool_choice"] == {"type": "tool", "name": "final_answer"}
    # extended thinking cannot be combined with a forced tool
    body = _body(
        model,
        response_format=Report,
        tools=[temperature.card],
        custom_parameters={"thinking": {"type": "enabled", "budget_tokens": 2000}},
    )
    assert body["tool_choice"] == {"type": "auto"}
    check_anthropic_request(body)


def test_anthropic_non_object_output_is_wrapped_and_strict_follows_strict_tools() -> None:
    model = AnthropicChatModel("claude-sonnet-4-5", api_key="k")
    [answer] = _body(model, response_format=list[Reading])["tools"]
    schema = answer["input_schema"]
    assert schema["type"] == "object" and schema["required"] == ["value"]
    assert schema["properties"]["value"] == {"type": "array", "items": {"$ref": "#/$defs/Reading"}}
    assert set(schema["$defs"]) == {"Reading", "Unit"}
    strict = AnthropicChatModel("claude-sonnet-4-5", api_key="k", strict_tools=True)
    [answer] = _body(strict, response_format=Report)["tools"]
    assert answer["strict"] is True
    assert answer["input_schema"]["additionalProperties"] is False
    check_anthropic_request(_body(strict, response_format=Report))


def test_anthropic_refuses_a_user_tool_named_final_answer(server: ProviderServer) -> None:
    model = AnthropicChatModel("claude-sonnet-4-5", api_key=SECRET, base_url=server.url)
    with model, pytest.raises(UnsupportedOptionError, match="final_answer") as info:
        model.chat(
            ChatRequest(
                [UserMessage(QUESTION)],
                ChatRequestParameters(response_format=Report, tools=[_card("final_answer")]),
            )
        )
    assert info.value.option == "response_format" and info.value.provider == "anthropic"
    assert server.requests == []
    # without response_format, a tool of that name is an ordinary tool
    model2 = AnthropicChatModel("claude-sonnet-4-5", api_key="k")
    assert _body(model2, tools=[_card("final_answer")])["tools"][0]["name"] == "final_answer"


def test_gemini_response_schema_per_schema_mode() -> None:
    openapi = GeminiChatModel("gemini-2.5-flash", api_key="k")
    body = _body(openapi, response_format=Report, temperature=0)
    expected = load_transcript("structured_gemini_tools")["exchanges"][0]["request"]["body"]
    assert body["generationConfig"] == {"temperature": 0, **expected["generationConfig"]}
    check_gemini_request(body)
    json_schema = GeminiChatModel("gemini-2.5-flash", api_key="k", schema_mode="json_schema")
    body = _body(json_schema, response_format=SCHEMA)
    expected = load_transcript("structured_gemini_dict_stream")["exchanges"][0]["request"]["body"]
    assert body["generationConfig"] == expected["generationConfig"]
    check_gemini_request(body)
    # a non-object root is fine for Gemini
    body = _body(openapi, response_format=list[Unit])
    assert body["generationConfig"]["responseSchema"] == {
        "type": "array",
        "items": {"type": "string", "enum": ["celsius", "fahrenheit"], "format": "enum"},
    }
    check_gemini_request(body)


class Node(BaseModel):
    name: str
    children: list[Node] = []


def test_gemini_refusals_name_provider_and_option(server: ProviderServer) -> None:
    openapi = GeminiChatModel("gemini-2.5-flash", api_key=SECRET, base_url=server.url)
    with openapi:
        # a recursive type cannot be expressed in the OpenAPI subset
        with pytest.raises(UnsupportedOptionError, match="json_schema") as info:
            openapi.chat(
                ChatRequest([UserMessage(QUESTION)], ChatRequestParameters(response_format=Node))
            )
        assert (info.value.provider, info.value.option) == ("gemini", "response_format")
        # Gemini 2.x rejects a response schema together with function declarations
        with pytest.raises(UnsupportedOptionError, match="function") as info:
            list(
                openapi.stream(
                    ChatRequest(
                        [UserMessage(QUESTION)],
                        ChatRequestParameters(response_format=Report, tools=[temperature.card]),
                    )
                )
            )
        assert (info.value.provider, info.value.option) == ("gemini", "response_format")
    assert server.requests == []
    json_schema = GeminiChatModel("gemini-2.5-flash", api_key="k", schema_mode="json_schema")
    body = _body(json_schema, response_format=Node)
    assert body["generationConfig"]["responseJsonSchema"]["$defs"]["Node"]["properties"]
    gemini3 = GeminiChatModel("gemini-3-flash-preview", api_key="k")
    assert "tools" in _body(gemini3, response_format=Report, tools=[temperature.card])


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_invalid_schema_is_a_schema_error_before_sending(
    provider: str, server: ProviderServer
) -> None:
    cls: Any = {"openai": OpenAIChatModel, "anthropic": AnthropicChatModel}.get(
        provider, GeminiChatModel
    )
    base = f"{server.url}/v1" if provider == "openai" else server.url
    request = ChatRequest(
        [UserMessage(QUESTION)], ChatRequestParameters(response_format={"type": "objekt"})
    )
    model = cls("m", api_key=SECRET, base_url=base)
    with model, pytest.raises(SchemaError, match=f"{provider}: response_format"):
        model.chat(request)
    assert server.requests == []


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
def test_custom_parameters_still_merge_last(provider: str) -> None:
    model: Any
    if provider == "openai":
        model = OpenAIChatModel("m", api_key="k")
        body = _body(model, response_format=Report, custom_parameters={"response_format": None})
        assert "response_format" not in body
    elif provider == "anthropic":
        model = AnthropicChatModel("m", api_key="k")
        body = _body(
            model,
            response_format=Report,
            custom_parameters={"tool_choice": {"type": "auto", "name": None}},
        )
        assert body["tool_choice"] == {"type": "auto"}
    else:
        model = GeminiChatModel("gemini-2.5-flash", api_key="k")
        body = _body(
            model,
            response_format=Report,
            custom_parameters={"generationConfig": {"responseMimeType": "text/x.enum"}},
        )
        assert body["generationConfig"]["responseMimeType"] == "text/x.enum"
        assert "responseSchema" in body["generationConfig"]
    _sdk_check(provider, body)


# responses through the loop ------------------------------------------------------------
CASES = [
    ("openai", "structured_openai_tools", ["sync", "async"]),
    ("openai", "structured_openai_tools_stream", ["stream", "astream_eager"]),
    ("anthropic", "structured_anthropic_tools", ["sync", "async"]),
    ("anthropic", "structured_anthropic_tools_stream", ["stream", "astream_eager"]),
    ("gemini", "structured_gemini_tools", ["sync", "async", "stream"]),
]


def _model(provider: str, server: ProviderServer, **kw: Any) -> Any:
    model: Any
    if provider == "openai":
        model = OpenAIChatModel(
            "gpt-4o-mini", api_key=SECRET, base_url=f"{server.url}/v1", timeout=10.0, **kw
        )
    elif provider == "anthropic":
        model = AnthropicChatModel(
            "claude-sonnet-4-5", api_key=SECRET, base_url=server.url, timeout=10.0, **kw
        )
    else:
        model = GeminiChatModel(
            kw.pop("model", "gemini-3-flash-preview"),
            api_key=SECRET,
            base_url=server.url,
            timeout=10.0,
            **kw,
        )
    no_sleep(model)
    return model


@pytest.mark.parametrize(
    ("provider", "name", "mode"),
    [(p, n, m) for p, n, modes in CASES for m in modes],
)
def test_tools_then_a_typed_report(
    provider: str, name: str, mode: str, server: ProviderServer
) -> None:
    transcript = load_transcript(name)
    if provider == "gemini" and "stream" in mode:
        # the same Gemini exchange, each JSON response served as one SSE event
        for exchange in transcript["exchanges"]:
            payload = json.dumps(exchange["response"]["json"], ensure_ascii=False)
            server.enqueue({"sse": [f"data: {payload}\r\n\r\n"]})
    else:
        server.enqueue_transcript(transcript)
    with _model(provider, server) as model:
        result, events = _run(mode, ToolService().tools(temperature), model, QUESTION, Report)
    assert result.output == EXPECTED_REPORT
    assert isinstance(result.output.readings[1].unit, Unit)
    assert [e.request.name for e in result.tool_executions] == ["temperature"]
    assert result.final_response is not None
    assert result.final_response.finish_reason is FinishReason.STOP
    final = result.final_response.ai_message
    assert not final.tool_execution_requests
    assert Report.model_validate_json(final.text or "") == EXPECTED_REPORT
    if provider == "gemini" and "stream" in mode:
        for recorded in server.requests:
            assert recorded.path.endswith(":streamGenerateContent")
        for body, exchange in zip(server.bodies, transcript["exchanges"], strict=True):
            assert body["generationConfig"] == exchange["request"]["body"]["generationConfig"]
    else:
        _check_exchanges(server, transcript)
    for body in server.bodies:
        _sdk_check(provider, body)
    if events:
        one_event = provider == "gemini"  # the whole answer in one SSE event
        _check_partials(events, json.loads(final.text or ""), 1 if one_event else 4)


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_openai_dict_schema(mode: str, server: ProviderServer) -> None:
    transcript = server.enqueue_transcript("structured_openai_dict")
    with _model("openai", server) as model:
        result, _ = _run(mode, ToolService(), model, "What is the answer?", SCHEMA)
    assert result.output == EXPECTED_ANSWER
    _check_exchanges(server, transcript)
    check_openai_request(server.bodies[0])


@pytest.mark.parametrize("mode", ["stream", "astream_eager", "sync"])
def test_gemini_dict_schema_streamed(mode: str, server: ProviderServer) -> None:
    transcript = load_transcript("structured_gemini_dict_stream")
    if mode == "sync":
        # the same answer, non-streaming
        server.enqueue(
            {
                "json": {
                    "candidates": [
                        {
                            "content": {
                                "role": "model",
                                "parts": [{"text": json.dumps(EXPECTED_ANSWER)}],
                            },
                            "finishReason": "STOP",
                        }
                    ]
                }
            }
        )
    else:
        server.enqueue_transcript(transcript)
    with _model("gemini", server, model="gemini-2.5-flash", schema_mode="json_schema") as model:
        result, events = _run(mode, ToolService(), model, "What is the answer?", SCHEMA)
    assert result.output == EXPECTED_ANSWER
    body = server.bodies[0]
    assert (
        body["generationConfig"]
        == transcript["exchanges"][0]["request"]["body"]["generationConfig"]
    )
    check_gemini_request(body)
    if mode != "sync":
        _check_exchanges(server, transcript)
        _check_partials(events, EXPECTED_ANSWER)


@pytest.mark.parametrize("mode", ["stream", "astream_eager"])
def test_anthropic_wrapped_list_streamed(mode: str, server: ProviderServer) -> None:
    transcript = server.enqueue_transcript("structured_anthropic_list_stream")
    with _model("anthropic", server) as model:
        result, events = _run(mode, ToolService(), model, QUESTION, list[Reading])
    assert result.output == [
        Reading(value=21.5, unit=Unit.C),
        Reading(value=70.1, unit=Unit.F, at="9:00"),
    ]
    _check_exchanges(server, transcript)
    check_anthropic_request(server.bodies[0])
    # a wrapped answer arrives whole, unwrapped, at its content_block_stop
    [delta] = [e for e in events if isinstance(e, TextDelta)]
    assert json.loads(delta.text) == [
        {"value": 21.5, "unit": "celsius"},
        {"value": 70.1, "unit": "fahrenheit", "at": "9:00"},
    ]
    assert result.final_response is not None
    assert result.final_response.finish_reason is FinishReason.STOP


def test_anthropic_answer_tool_next_to_another_call_is_text(server: ProviderServer) -> None:
    server.enqueue(
        {
            "json": {
                "id": "msg_x",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": [
                    {"type": "text", "text": "Checking."},
                    {
                        "type": "tool_use",
                        "id": "t1",
                        "name": "temperature",
                        "input": {"city": "Paris"},
                    },
                    {
                        "type": "tool_use",
                        "id": "t2",
                        "name": "final_answer",
                        "input": {"city": "P"},
                    },
                ],
                "stop_reason": "tool_use",
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        }
    )
    with _model("anthropic", server) as model:
        response = model.chat(
            ChatRequest(
                [UserMessage(QUESTION)],
                ChatRequestParameters(response_format=Report, tools=[temperature.card]),
            )
        )
    message = response.ai_message
    assert message.text == '{"city":"P"}'
    assert [c.name for c in message.tool_execution_requests] == ["temperature"]
    assert response.finish_reason is FinishReason.TOOL_EXECUTION
    # sent back, the answer is a plain text block before the remaining tool_use
    model2 = AnthropicChatModel("claude-sonnet-4-5", api_key="k")
    body = model2.build_request_body(
        ChatRequest(
            [UserMessage(QUESTION), message],
            ChatRequestParameters(response_format=Report, tools=[temperature.card]),
        )
    )
    assert body["messages"][1]["content"] == [
        {"type": "text", "text": '{"city":"P"}'},
        {"type": "tool_use", "id": "t1", "name": "temperature", "input": {"city": "Paris"}},
    ]


# the correction path, end to end ------------------------------------------------------------
@pytest.mark.parametrize("mode", ["sync", "async"])
def test_anthropic_wrong_answer_is_corrected(mode: str, server: ProviderServer) -> None:
    transcript = server.enqueue_transcript("structured_anthropic_correction")
    with _model("anthropic", server) as model:
        result, _ = _run(mode, ToolService(max_argument_retries=1), model, QUESTION, Report)
    assert result.output == EXPECTED_REPORT
    _check_exchanges(server, transcript)
    second = server.bodies[1]
    check_anthropic_request(second)
    # the invalid answer went back as plain text, followed by the correction request
    correction = second["messages"][2]
    assert correction["role"] == "user"
    assert correction["content"].startswith("Your answer could not be used.")
    assert "readings.0.value" in correction["content"]
    assert "readings.0.unit" in correction["content"]
    assert len(result.intermediate_responses) == 1
    assert result.intermediate_responses[0].finish_reason is FinishReason.STOP


def test_anthropic_correction_budget_exhausted(server: ProviderServer) -> None:
    server.enqueue_transcript("structured_anthropic_correction")
    with _model("anthropic", server) as model, pytest.raises(StructuredOutputError) as info:
        ToolService(max_argument_retries=0).chat(model, None, QUESTION, output_type=Report)
    assert info.value.raw_text == '{"city":"Paris","readings":[{"value":"hot","unit":"kelvin"}]}'
    assert len(server.requests) == 1


def _openai_text(text: str) -> dict[str, Any]:
    message = {"role": "assistant", "content": text}
    return {"json": {"choices": [{"index": 0, "finish_reason": "stop", "message": message}]}}


@pytest.mark.parametrize("depth", [300, 100_000])
def test_an_answer_nested_too_deeply_is_a_typed_error_then_corrected(
    server: ProviderServer, depth: int
) -> None:
    """A structured answer nested past the depth limit (under the recursion limit or far
    past it) is an output error the model is told about, never a raw RecursionError."""
    deep = "[" * depth + "]" * depth
    server.enqueue(_openai_text(deep), _openai_text(json.dumps(EXPECTED_ANSWER)))
    with _model("openai", server) as model:
        result = ToolService(max_argument_retries=1).chat(
            model, None, "What is the answer?", output_type=SCHEMA
        )
        assert result.output == EXPECTED_ANSWER
        correction = server.bodies[1]["messages"][-1]["content"]
        assert "nested too deeply" in correction
        server.enqueue(_openai_text(deep))
        with pytest.raises(StructuredOutputError, match="nested too deeply"):
            ToolService(max_argument_retries=0).chat(
                model, None, "What is the answer?", output_type=SCHEMA
            )


def test_a_wrapped_answer_nested_too_deeply_is_left_as_text() -> None:
    from toolweave.providers._answer import answer_text

    deep = '{"value": ' + "[" * 100_000 + "]" * 100_000 + "}"
    assert answer_text(deep, True) == deep  # validating it then says why
