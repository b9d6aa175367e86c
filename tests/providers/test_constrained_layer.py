"""Constrained tool calling as a layer over any chat model: the same loop, repeat policy and
"auto" probe through OpenAIChatModel (Chat Completions `response_format`) and
GeminiChatModel (`responseSchema` / `responseJsonSchema`) against the loopback server, and
`ConstrainedChatModel` over a model that is not an HTTP provider at all. The OpenAI-specific
details (schemas, streaming splits, policy options) are in tests/e2e/test_constrained.py."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import jsonschema
import pytest

from servers.provider_server import ProviderServer
from toolweave import (
    AiMessage,
    ChatCompleted,
    ChatRequest,
    ChatRequestParameters,
    CompleteToolCall,
    ScriptedChatModel,
    TextDelta,
    ToolService,
    UserMessage,
    tool,
)
from toolweave.providers import (
    ConstrainedChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    clear_probe_cache,
    probe_capabilities,
)
from toolweave.providers._base import HttpChatModel


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 14 degrees, rain"


CALL = '{"tool_calls":[{"name":"get_weather","arguments":{"city":"Paris"}}]}'
ANSWER = '{"answer":"Rain in Paris."}'
QUESTION = "Weather in Paris?"


# the two wire formats ------------------------------------------------------------------------
def _openai_reply(content: str) -> dict[str, Any]:
    return {
        "json": {
            "id": "x",
            "model": "smol",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    }


def _openai_stream(*pieces: str) -> dict[str, Any]:
    def chunk(delta: dict[str, Any], finish: str | None) -> str:
        choice = {"index": 0, "delta": delta, "finish_reason": finish}
        return "data: " + json.dumps({"choices": [choice]}) + "\n\n"

    chunks = [chunk({"content": piece}, None) for piece in pieces]
    return {"sse": [*chunks, chunk({}, "stop"), "data: [DONE]\n\n"]}


def _openai_call() -> dict[str, Any]:
    call = {
        "id": "c1",
        "type": "function",
        "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'},
    }
    message = {"role": "assistant", "content": None, "tool_calls": [call]}
    return {"json": {"choices": [{"message": message, "finish_reason": "tool_calls"}]}}


def _openai_schema(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    spec = body["response_format"]["json_schema"]
    assert body["response_format"]["type"] == "json_schema" and spec["strict"] is False
    return spec["name"], spec["schema"]


def _gemini_chunk(text: str, finish: str | None) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": [{"text": text}]}}
    if finish:
        candidate["finishReason"] = finish
    return {
        "candidates": [candidate],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
        "modelVersion": "gemma-3-27b-it",
    }


def _gemini_reply(content: str) -> dict[str, Any]:
    return {"json": _gemini_chunk(content, "STOP")}


def _gemini_stream(*pieces: str) -> dict[str, Any]:
    chunks = [
        _gemini_chunk(p, "STOP" if i == len(pieces) - 1 else None) for i, p in enumerate(pieces)
    ]
    return {"sse": ["data: " + json.dumps(c) + "\n\n" for c in chunks]}


def _gemini_call() -> dict[str, Any]:
    part = {"functionCall": {"name": "get_weather", "args": {"city": "Paris"}}}
    return {
        "json": {
            "candidates": [{"content": {"role": "model", "parts": [part]}, "finishReason": "STOP"}]
        }
    }


def _gemini_schema(body: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    schema = config.get("responseJsonSchema") or config["responseSchema"]
    return (
        "answer" if "anyOf" not in schema and "answer" in schema["properties"] else "both"
    ), schema


@dataclass
class Wire:
    """One provider's side of the test: its model, replies and request accessors."""

    name: str
    make: Callable[..., HttpChatModel]
    reply: Callable[[str], dict[str, Any]]
    stream: Callable[..., dict[str, Any]]
    native_call: Callable[[], dict[str, Any]]
    schema: Callable[[dict[str, Any]], tuple[str, dict[str, Any]]]

    def answer_only(self, body: dict[str, Any]) -> bool:
        return self.schema(body)[0] == "answer"

    def has_native_tools(self, body: dict[str, Any]) -> bool:
        return "tools" in body

    def system_text(self, body: dict[str, Any]) -> str:
        if self.name == "openai":
            return str(body["messages"][0]["content"])
        return "".join(p["text"] for p in body["systemInstruction"]["parts"])

    def turns(self, body: dict[str, Any]) -> list[tuple[str, str]]:
        """(role, text) of the conversation turns after the system prompt."""
        if self.name == "openai":
            return [(m["role"], m["content"]) for m in body["messages"] if m["role"] != "system"]
        return [(c["role"], "".join(p["text"] for p in c["parts"])) for c in body["contents"]]


def _wire(name: str, server: ProviderServer) -> Wire:
    if name == "openai":
        return Wire(
            name,
            lambda **o: OpenAIChatModel("smol", api_key="k", base_url=f"{server.url}/v1", **o),
            _openai_reply,
            _openai_stream,
            _openai_call,
            _openai_schema,
        )
    if name == "gemini-json-schema":
        return Wire(
            name,
            lambda **o: GeminiChatModel(
                "gemma-3-27b-it", api_key="k", base_url=server.url, schema_mode="json_schema", **o
            ),
            _gemini_reply,
            _gemini_stream,
            _gemini_call,
            _gemini_schema,
        )
    return Wire(
        name,
        lambda **o: GeminiChatModel("gemma-3-27b-it", api_key="k", base_url=server.url, **o),
        _gemini_reply,
        _gemini_stream,
        _gemini_call,
        _gemini_schema,
    )


WIRES = ["openai", "gemini", "gemini-json-schema"]


# constrained ---------------------------------------------------------------------------------
@pytest.mark.parametrize("wire_name", WIRES)
def test_a_constrained_loop_calls_the_tool_through_structured_output(
    server: ProviderServer, wire_name: str
) -> None:
    wire = _wire(wire_name, server)
    server.enqueue(wire.reply(CALL), wire.reply(ANSWER))
    with wire.make(tool_calling="constrained") as m:
        result = ToolService().tools(get_weather).chat(m, None, QUESTION)
    assert result.text == "Rain in Paris."
    [execution] = result.tool_executions
    assert execution.request.name == "get_weather" and execution.result_text.startswith("Paris")

    first, second = server.bodies
    assert not wire.has_native_tools(first) and not wire.has_native_tools(second)
    assert "get_weather" in wire.system_text(first)
    kind, schema = wire.schema(first)
    assert kind != "answer"
    if wire_name != "gemini":  # responseSchema is Gemini's OpenAPI subset, not JSON Schema
        jsonschema.validate(json.loads(CALL), schema)
        jsonschema.validate(json.loads(ANSWER), schema)
        with pytest.raises(jsonschema.ValidationError):
            jsonschema.validate({"tool_calls": [{"name": "nope", "arguments": {}}]}, schema)
    # the earlier call and its result travel as plain text turns
    turns = wire.turns(second)
    assert len(turns) == 3 and turns[0][1] == QUESTION
    assert json.loads(turns[1][1])["tool_calls"][0]["name"] == "get_weather"
    assert "14 degrees" in turns[2][1]


@pytest.mark.parametrize("face", ["chat", "achat", "stream", "astream"])
@pytest.mark.parametrize("wire_name", WIRES)
def test_the_repeat_policy_is_the_same_for_every_provider(
    server: ProviderServer, wire_name: str, face: str
) -> None:
    wire = _wire(wire_name, server)
    service = ToolService().tools(get_weather)
    events: list[Any] = []
    if face in ("chat", "achat"):
        server.enqueue(wire.reply(CALL), wire.reply(CALL), wire.reply(ANSWER))
    else:
        server.enqueue(
            wire.stream(CALL),
            wire.stream(CALL[:9], CALL[9:]),
            wire.stream(ANSWER[:12], ANSWER[12:]),
        )

    async def run_async() -> Any:
        async with wire.make(tool_calling="constrained") as m:
            if face == "achat":
                return await service.achat(m, None, QUESTION)
            return [e async for e in service.achat_stream(m, None, QUESTION)]

    if face.startswith("a"):
        outcome = asyncio.run(run_async())
    else:
        with wire.make(tool_calling="constrained") as m:
            outcome = (
                service.chat(m, None, QUESTION)
                if face == "chat"
                else list(service.chat_stream(m, None, QUESTION))
            )
    if isinstance(outcome, list):
        events = outcome
        assert len([e for e in events if isinstance(e, CompleteToolCall)]) == 1
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Rain in Paris."
        assert isinstance(events[-1], ChatCompleted)
        result = events[-1].result
    else:
        result = outcome
    assert result.text == "Rain in Paris." and len(result.tool_executions) == 1
    assert [wire.answer_only(b) for b in server.bodies] == [False, False, True]
    info = result.final_response.ai_message.attributes["constrained"]
    assert info["reason"] == "repeated call" and info["repeated_calls"] == ["get_weather"]
    if face in ("chat", "achat"):
        usage = result.final_response.usage
        assert usage is not None and usage.total_tokens == 30  # the repeat and its follow-up


# auto ----------------------------------------------------------------------------------------
def _probe_replies(wire: Wire, native: bool) -> list[dict[str, Any]]:
    structured = wire.reply('{"sunny": true}')
    if native:
        call = wire.native_call()
        if wire.name == "openai":
            streamed = {
                "sse": [
                    "data: "
                    + json.dumps(
                        {
                            "choices": [
                                {
                                    "index": 0,
                                    "delta": {
                                        "tool_calls": [
                                            {
                                                "index": 0,
                                                "id": "c1",
                                                "function": {
                                                    "name": "get_weather",
                                                    "arguments": "{}",
                                                },
                                            }
                                        ]
                                    },
                                    "finish_reason": "tool_calls",
                                }
                            ]
                        }
                    )
                    + "\n\n",
                    "data: [DONE]\n\n",
                ]
            }
        else:
            streamed = {"sse": ["data: " + json.dumps(call["json"]) + "\n\n"]}
        return [call, call, call, streamed, structured]
    return [
        wire.reply("It is sunny."),
        wire.reply("Hello!"),
        wire.reply("Paris and Tokyo."),
        wire.stream("Sunny."),
        structured,
    ]


@pytest.mark.parametrize("wire_name", WIRES)
def test_auto_probes_once_then_calls_tools_through_structured_output(
    server: ProviderServer, wire_name: str
) -> None:
    clear_probe_cache()
    wire = _wire(wire_name, server)
    server.enqueue(*_probe_replies(wire, native=False), wire.reply(CALL), wire.reply(ANSWER))
    try:
        with wire.make(tool_calling="auto") as m:
            result = ToolService().tools(get_weather).chat(m, None, QUESTION)
            caps = probe_capabilities(m)  # cached: no request
        assert not caps.native_tool_calls and caps.json_schema
        assert caps.recommended_tool_calling == "constrained"
        assert result.text == "Rain in Paris." and len(result.tool_executions) == 1
        probes, loop = server.bodies[:5], server.bodies[5:]
        assert all(wire.has_native_tools(b) for b in probes[:4])  # probed natively
        assert len(loop) == 2 and not any(wire.has_native_tools(b) for b in loop)
        assert not wire.answer_only(loop[0])
    finally:
        clear_probe_cache()


@pytest.mark.parametrize("wire_name", WIRES)
def test_auto_keeps_native_calls_when_the_model_makes_them(
    server: ProviderServer, wire_name: str
) -> None:
    clear_probe_cache()
    wire = _wire(wire_name, server)
    server.enqueue(*_probe_replies(wire, native=True))
    try:
        with wire.make(tool_calling="auto") as m:
            request = ChatRequest(
                [UserMessage("x")], ChatRequestParameters(tools=[get_weather.card])
            )
            body = m.build_request_body(request)  # probes first
        caps = probe_capabilities(m)
        assert caps.native_tool_calls and caps.recommended_tool_calling == "native"
        assert wire.has_native_tools(body)
        assert "response_format" not in body and "generationConfig" not in body
    finally:
        clear_probe_cache()


# the layer itself ----------------------------------------------------------------------------
def test_the_layer_wraps_any_chat_model() -> None:
    """`ConstrainedChatModel` needs only the ChatModel protocol and a model that honours
    `response_format`: here an offline scripted model, which records what it was sent."""
    inner = ScriptedChatModel([AiMessage(CALL), AiMessage(ANSWER)])
    layer = ConstrainedChatModel(inner)
    result = ToolService().tools(get_weather).chat(layer, None, QUESTION)
    assert result.text == "Rain in Paris." and len(result.tool_executions) == 1
    first = inner.requests[0]
    assert not first.parameters.tools and first.parameters.tool_choice is None
    output = first.parameters.response_format
    assert output.name == "tool_calls_or_answer" and output.strict is False
    jsonschema.validate(json.loads(CALL), output.json_schema)
    # a request that involves no tools passes through unchanged
    plain = ChatRequest([UserMessage("hi")])
    assert layer.prepare(plain) == (None, plain)


def test_a_provider_in_constrained_mode_is_the_layer_over_its_native_self(
    server: ProviderServer,
) -> None:
    server.enqueue(_gemini_reply(CALL), _gemini_reply(ANSWER))
    server.enqueue(_gemini_reply(CALL), _gemini_reply(ANSWER))
    service = ToolService().tools(get_weather)
    with GeminiChatModel("gemma-3-27b-it", api_key="k", base_url=server.url) as native:
        wrapped = service.chat(ConstrainedChatModel(native), None, QUESTION)
    with GeminiChatModel(
        "gemma-3-27b-it", api_key="k", base_url=server.url, tool_calling="constrained"
    ) as own:
        built_in = service.chat(own, None, QUESTION)
    assert wrapped.text == built_in.text == "Rain in Paris."
    # the same requests, but for the generated call ids
    bodies = [re.sub(r"call_[0-9a-f]+", "call_X", json.dumps(b)) for b in server.bodies]
    assert bodies[:2] == bodies[2:]


def test_a_reply_nested_too_deeply_to_parse_is_text(server: ProviderServer) -> None:
    deep = '{"answer":' + "[" * 100_000 + "]" * 100_000 + "}"
    server.enqueue(_openai_reply(deep))
    with OpenAIChatModel(
        "smol", api_key="k", base_url=f"{server.url}/v1", tool_calling="constrained"
    ) as m:
        result = ToolService().tools(get_weather).chat(m, None, QUESTION)
    assert result.text == deep and not result.tool_executions


def test_tool_calling_modes_are_checked_for_every_provider() -> None:
    from toolweave.errors import UnsupportedOptionError

    for make in (
        lambda **o: OpenAIChatModel("m", api_key="k", **o),
        lambda **o: GeminiChatModel("m", api_key="k", **o),
    ):
        with pytest.raises(UnsupportedOptionError, match="tool_calling"):
            make(tool_calling="bogus")
        assert make().tool_calling == "native"
        assert make(tool_calling="auto").tool_calling == "auto"
    with pytest.raises(ValueError, match="tool_calling"):
        ConstrainedChatModel(ScriptedChatModel([]), tool_calling="native")  # type: ignore[arg-type]


# the plan is enforced on the decoded reply (the schema is not a guarantee) -----------------
FACES = ["chat", "achat", "stream", "astream"]


def _run_face(
    wire: Wire, face: str, service: ToolService, parameters: ChatRequestParameters | None = None
) -> Any:
    """`service` over `wire`'s model in constrained mode, in one face: the result."""

    async def run_async() -> Any:
        async with wire.make(tool_calling="constrained") as m:
            if face == "achat":
                return await service.achat(m, parameters, QUESTION)
            return [e async for e in service.achat_stream(m, parameters, QUESTION)]

    if face.startswith("a"):
        outcome = asyncio.run(run_async())
    else:
        with wire.make(tool_calling="constrained") as m:
            if face == "chat":
                outcome = service.chat(m, parameters, QUESTION)
            else:
                outcome = list(service.chat_stream(m, parameters, QUESTION))
    if isinstance(outcome, list):
        assert isinstance(outcome[-1], ChatCompleted)
        streamed = "".join(e.text for e in outcome if isinstance(e, TextDelta))
        return outcome[-1].result, streamed
    return outcome, None


def _enqueue(server: ProviderServer, wire: Wire, face: str, *replies: str) -> None:
    for reply in replies:
        if face in ("chat", "achat"):
            server.enqueue(wire.reply(reply))
        else:  # streamed in small pieces, so escapes are cut anywhere
            server.enqueue(wire.stream(*[reply[i : i + 5] for i in range(0, len(reply), 5)]))


@pytest.mark.parametrize("face", FACES)
@pytest.mark.parametrize(
    ("reply", "text"),
    [
        ('{"answer": "price \\uZZZZ"}', '{"answer": "price \\uZZZZ"}'),
        ('{"answer": "price \\ud83d"}', "price \ufffd"),
        ('{"answer": "a \\ud83d\\u0041 b \\udc00"}', "a \ufffdA b \ufffd"),
        ('{"answer": "bad \\x escape"}', '{"answer": "bad \\x escape"}'),
    ],
    ids=["bad-hex", "lone-high", "lone-high-then-char", "bad-escape"],
)
def test_an_answer_with_bad_escapes_is_read_alike_in_every_face(
    server: ProviderServer, face: str, reply: str, text: str
) -> None:
    """A bad `\\u` escape raised a raw ValueError from the stream faces, a lone surrogate
    too. Now the stream never raises on it: a reply that is not JSON is the model's text
    (as `chat` always read it), and a lone surrogate is U+FFFD in every face."""
    wire = _wire("openai", server)
    _enqueue(server, wire, face, reply)
    result, streamed = _run_face(wire, face, ToolService().tools(get_weather))
    assert result.text == text and not result.tool_executions
    if streamed is not None and "\\x" not in reply and "ZZZZ" not in reply:
        assert streamed == text  # what streamed is the answer


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return f"value of {key}"


@pytest.mark.parametrize("face", FACES)
def test_calls_over_max_calls_per_response_never_run(server: ProviderServer, face: str) -> None:
    """A server that ignores `maxItems`: 40 calls in one reply, 4 allowed. The first 4 run
    (what the schema admits); the other 36 never do, and are recorded."""
    wire = _wire("openai", server)
    ran: list[str] = []

    @tool
    def count(n: int) -> str:
        """Count."""
        ran.append(str(n))
        return "ok"

    forty = json.dumps(
        {"tool_calls": [{"name": "count", "arguments": {"n": n}} for n in range(40)]}
    )
    _enqueue(server, wire, face, forty, ANSWER)
    result, _ = _run_face(wire, face, ToolService().tools(count))
    assert sorted(ran) == ["0", "1", "2", "3"] and result.text == "Rain in Paris."  # (concurrent)
    info = result.intermediate_responses[0].ai_message.attributes["constrained"]
    assert len(info["refused_calls"]) == 36
    assert info["refused_calls"][0] == {"name": "count", "reason": "over max_calls_per_response"}


@pytest.mark.parametrize("face", FACES)
def test_a_call_to_a_tool_the_plan_does_not_admit_never_runs(
    server: ProviderServer, face: str
) -> None:
    """`tool_choice=tool("lookup")`: a reply calling `delete_all` ran it. The refused call
    never runs; the admitted one beside it does. A reply left with no call it may run and
    no answer is ProviderError 183004 naming the refused tool, in every face."""
    from toolweave.chat import ToolChoice
    from toolweave.errors import ProviderError

    wire = _wire("openai", server)
    deleted: list[bool] = []

    @tool
    def delete_all() -> str:
        """Delete everything."""
        deleted.append(True)
        return "gone"

    service = ToolService().tools(lookup, delete_all)
    forced = ChatRequestParameters(tool_choice=ToolChoice.tool("lookup"))
    mixed = json.dumps(
        {
            "tool_calls": [
                {"name": "delete_all", "arguments": {}},
                {"name": "lookup", "arguments": {"key": "k"}},
            ]
        }
    )
    _enqueue(server, wire, face, mixed, ANSWER)
    result, _ = _run_face(wire, face, service, forced)
    assert [e.request.name for e in result.tool_executions] == ["lookup"]
    info = result.intermediate_responses[0].ai_message.attributes["constrained"]
    assert info["refused_calls"] == [{"name": "delete_all", "reason": "not admitted by the plan"}]

    server.reset()
    only = '{"tool_calls":[{"name":"delete_all","arguments":{}}]}'
    _enqueue(server, wire, face, only)
    with pytest.raises(ProviderError) as info_error:
        _run_face(wire, face, service, forced)
    assert info_error.value.code == 183004 and "'delete_all'" in info_error.value.message
    assert info_error.value.provider == "openai"
    assert not deleted
