"""Hostile provider answers (issue #14): wrong-shaped 200 JSON, nesting too deep to decode,
lone surrogates. Each is the provider's typed `ProviderError` or is repaired, for all three
providers, sync and async, against the scripted loopback server."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from servers.provider_server import ProviderServer
from toolweave.chat import (
    AiMessage,
    ChatRequest,
    ChatRequestParameters,
    CompleteToolCall,
    ResponseCompleted,
    TextDelta,
    ToolExecutionResultMessage,
    UserMessage,
)
from toolweave.errors import ErrorCode, ProviderError
from toolweave.providers import (
    AnthropicChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    OpenAIResponsesChatModel,
    OpenAIStreamAggregator,
)
from toolweave.tools import ToolCard

ECHO = ToolCard(
    name="echo",
    description="Echo the text",
    input_params={
        "type": "object",
        "properties": {"text": {"type": "string"}},
        "required": ["text"],
    },
)
PARAMS = ChatRequestParameters(tools=[ECHO])

WRONG_SHAPES: dict[str, list[Any]] = {
    "openai": [
        {"choices": "x"},
        {"choices": [None]},
        {"choices": [{"message": "text"}]},
        {"choices": [{"message": {"tool_calls": [{"id": {"a": 1}, "function": {"name": "f"}}]}}]},
        {"choices": [{"message": {"tool_calls": "abc"}}]},
        {"choices": [{"message": {"content": {"a": 1}}}]},
    ],
    "anthropic": [
        {"content": [1]},
        {"content": "abc"},
        {"content": [{"type": "tool_use", "id": 5, "name": "f", "input": {}}]},
        {"content": [{"type": "text", "text": ["a"]}]},
        {"content": [], "usage": "many"},
    ],
    "gemini": [
        [],
        "text",
        {"candidates": "x"},
        {"candidates": [{"content": {"parts": [{"functionCall": {"name": "f", "id": 5}}]}}]},
        {"candidates": [{"content": {"parts": "abc"}}]},
        {"unexpected": True},
    ],
    "responses": [
        [],
        {"output": "x"},
        {"output": [1]},
    ],
}


def _model(provider: str, server: ProviderServer) -> Any:
    key = "sk-test-0123456789"
    if provider == "openai":
        return OpenAIChatModel("m", api_key=key, base_url=f"{server.url}/v1", max_retries=0)
    if provider == "anthropic":
        return AnthropicChatModel("m", api_key=key, base_url=server.url, max_retries=0)
    if provider == "responses":
        return OpenAIResponsesChatModel(
            "m", api_key=key, base_url=f"{server.url}/v1", max_retries=0
        )
    return GeminiChatModel("m", api_key=key, base_url=server.url, max_retries=0)


@pytest.mark.parametrize(
    ("provider", "body"),
    [(p, b) for p, bodies in WRONG_SHAPES.items() for b in bodies],
    ids=lambda v: v if isinstance(v, str) else None,
)
async def test_wrong_shaped_200_json_is_response_invalid(
    server: ProviderServer, provider: str, body: Any
) -> None:
    async with _model(provider, server) as model:
        server.enqueue({"json": body}, {"json": body})
        with pytest.raises(ProviderError) as sync_error:
            model.chat(ChatRequest([UserMessage("hi")], PARAMS))
        with pytest.raises(ProviderError) as async_error:
            await model.achat(ChatRequest([UserMessage("hi")], PARAMS))
    for error in (sync_error.value, async_error.value):
        assert error.code == ErrorCode.PROVIDER_RESPONSE_INVALID, error
        assert error.__cause__ is None or isinstance(error.__cause__, ProviderError)


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "responses"])
@pytest.mark.parametrize("status", [200, 400])
async def test_json_nested_too_deeply_is_typed_not_recursion_error(
    server: ProviderServer, provider: str, status: int
) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    spec = {"status": status, "body": deep, "headers": {"content-type": "application/json"}}
    async with _model(provider, server) as model:
        server.enqueue(spec, spec)
        with pytest.raises(ProviderError) as sync_error:
            model.chat(ChatRequest([UserMessage("hi")]))
        with pytest.raises(ProviderError) as async_error:
            await model.achat(ChatRequest([UserMessage("hi")]))
    for error in (sync_error.value, async_error.value):
        assert error.status == (None if status == 200 else status)
        if status == 200:
            assert error.code == ErrorCode.PROVIDER_RESPONSE_INVALID
            assert "nested too deeply" in error.message


def _deep_stream(provider: str) -> list[str]:
    deep = "[" * 50_000 + "]" * 50_000
    if provider == "anthropic":
        return [f"event: message_start\ndata: {deep}\n\n"]
    return [f"data: {deep}\n\n"]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "responses"])
async def test_deeply_nested_stream_event_is_typed(server: ProviderServer, provider: str) -> None:
    async with _model(provider, server) as model:
        server.enqueue({"sse": _deep_stream(provider)}, {"sse": _deep_stream(provider)})
        with pytest.raises(ProviderError) as sync_error:
            list(model.stream(ChatRequest([UserMessage("hi")])))
        with pytest.raises(ProviderError) as async_error:
            [e async for e in model.astream(ChatRequest([UserMessage("hi")]))]
    for error in (sync_error.value, async_error.value):
        assert error.code == ErrorCode.PROVIDER_RESPONSE_INVALID


def _nested(depth: int) -> Any:
    """`depth` arrays, one inside the other (the value itself is one level)."""
    value: Any = []
    for _ in range(depth - 1):
        value = [value]
    return value


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
async def test_answers_nested_past_the_depth_limit_are_refused_before_parsing(
    server: ProviderServer, provider: str
) -> None:
    """An answer of the right shape carrying a value nested 300 levels (under the recursion
    limit, so `json.loads` alone takes it) is 183004 "nested too deeply", as a body and as a
    stream event; 250 levels go through."""
    deep = {**_FINAL[provider], "extra": _nested(300)}
    fine = {**_FINAL[provider], "extra": _nested(250)}
    event = {"choices": [{"index": 0, "delta": {"content": "ok"}, "finish_reason": "stop"}]}
    if provider == "anthropic":
        event = {"type": "message_start", "message": {"id": "m1", "model": "m"}}
    async with _model(provider, server) as model:
        server.enqueue({"json": deep}, {"json": deep}, {"json": fine})
        with pytest.raises(ProviderError) as sync_error:
            model.chat(ChatRequest([UserMessage("hi")]))
        with pytest.raises(ProviderError) as async_error:
            await model.achat(ChatRequest([UserMessage("hi")]))
        assert (await model.achat(ChatRequest([UserMessage("hi")]))).ai_message.text == "ok"
        stream = [f"data: {json.dumps({**event, 'extra': _nested(300)})}\n\n"]
        server.enqueue({"sse": stream})
        with pytest.raises(ProviderError) as stream_error:
            [e async for e in model.astream(ChatRequest([UserMessage("hi")]))]
    for error in (sync_error.value, async_error.value, stream_error.value):
        assert error.code == ErrorCode.PROVIDER_RESPONSE_INVALID
        assert "nested too deeply" in error.message


# A lone surrogate escaped in the JSON text: in the text, and in the arguments (raw, once the
# outer JSON is decoded). Written as JSON text by hand: Python cannot encode it as UTF-8.
_LONE = "\\ud800"
_ANSWERS = {
    "openai": (
        '{"id":"c1","model":"m","choices":[{"index":0,"finish_reason":"tool_calls",'
        f'"message":{{"role":"assistant","content":"a{_LONE}b","tool_calls":[{{"id":"call_1",'
        f'"type":"function","function":{{"name":"echo","arguments":"{{\\"text\\":\\"x{_LONE}y\\"}}"}}}}]}}}}]}}'
    ),
    "anthropic": (
        '{"id":"msg_1","type":"message","role":"assistant","model":"m","stop_reason":"tool_use",'
        f'"content":[{{"type":"text","text":"a{_LONE}b"}},{{"type":"tool_use","id":"toolu_1",'
        f'"name":"echo","input":{{"text":"x{_LONE}y"}}}}]}}'
    ),
    "gemini": (
        '{"candidates":[{"finishReason":"STOP","content":{"role":"model","parts":['
        f'{{"text":"a{_LONE}b"}},{{"functionCall":{{"name":"echo","args":{{"text":"x{_LONE}y"}}}}}}'
        "]}}]}"
    ),
}
_FINAL = {
    "openai": {"choices": [{"index": 0, "finish_reason": "stop", "message": {"content": "ok"}}]},
    "anthropic": {"content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"},
    "gemini": {"candidates": [{"finishReason": "STOP", "content": {"parts": [{"text": "ok"}]}}]},
}


def _stream_answer(provider: str) -> list[str]:
    if provider == "openai":
        return [
            'data: {"choices":[{"index":0,"delta":{"content":"a' + _LONE + 'b"}}]}\n\n',
            'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1",'
            '"function":{"name":"echo","arguments":"{\\"text\\":\\"x' + _LONE + 'y\\"}"}}]}}]}\n\n',
            'data: {"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}\n\n',
            "data: [DONE]\n\n",
        ]
    if provider == "anthropic":
        return [
            'event: message_start\ndata: {"type":"message_start","message":{"id":"m1",'
            '"model":"m","usage":{"input_tokens":1}}}\n\n',
            'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
            '"content_block":{"type":"text","text":""}}\n\n',
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,'
            '"delta":{"type":"text_delta","text":"a' + _LONE + 'b"}}\n\n',
            'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n',
            'event: content_block_start\ndata: {"type":"content_block_start","index":1,'
            '"content_block":{"type":"tool_use","id":"toolu_1","name":"echo","input":{}}}\n\n',
            'event: content_block_delta\ndata: {"type":"content_block_delta","index":1,'
            '"delta":{"type":"input_json_delta","partial_json":"{\\"text\\":\\"x'
            + _LONE
            + 'y\\"}"}}\n\n',
            'event: content_block_stop\ndata: {"type":"content_block_stop","index":1}\n\n',
            'event: message_delta\ndata: {"type":"message_delta","delta":'
            '{"stop_reason":"tool_use"},"usage":{"output_tokens":1}}\n\n',
            'event: message_stop\ndata: {"type":"message_stop"}\n\n',
        ]
    return ["data: " + _ANSWERS["gemini"] + "\n\n"]


def _check_clean(message: AiMessage) -> None:
    assert message.text == "a\ufffdb"
    (call,) = message.tool_execution_requests
    assert json.loads(call.arguments) == {"text": "x\ufffdy"}


async def _continue(model: Any, server: ProviderServer, first: AiMessage, sync: bool) -> None:
    """The next round of the conversation is sent (and holds U+FFFD, not a surrogate)."""
    call = first.tool_execution_requests[0]
    server.enqueue({"json": _FINAL[model.provider]})
    follow = ChatRequest(
        [
            UserMessage("hi"),
            first,
            # a tool result that itself holds a lone surrogate is sent repaired too
            ToolExecutionResultMessage(id=call.id, tool_name=call.name, text="r\ud800s"),
        ],
        PARAMS,
    )
    response = model.chat(follow) if sync else await model.achat(follow)
    assert response.ai_message.text == "ok"
    raw = server.requests[-1].raw
    assert b"\xef\xbf\xbd" in raw and b"\\ud800" not in raw.lower()
    assert "r\ufffds" in raw.decode("utf-8")


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini"])
@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
async def test_lone_surrogates_are_replaced_and_the_conversation_goes_on(
    server: ProviderServer, provider: str, sync: bool
) -> None:
    async with _model(provider, server) as model:
        body = {"body": _ANSWERS[provider], "headers": {"content-type": "application/json"}}
        server.enqueue(body)
        request = ChatRequest([UserMessage("hi")], PARAMS)
        first = model.chat(request) if sync else await model.achat(request)
        _check_clean(first.ai_message)
        await _continue(model, server, first.ai_message, sync)

        server.enqueue({"sse": _stream_answer(provider)})
        events = list(model.stream(request)) if sync else [e async for e in model.astream(request)]
        streamed = events[-1].response.ai_message  # type: ignore[attr-defined]
        _check_clean(streamed)
        await _continue(model, server, streamed, sync)


# OpenAI streams: nothing after [DONE] counts, and a completed call never changes ---------------
def _chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    choice = {"index": 0, "delta": delta, "finish_reason": finish}
    return "data: " + json.dumps({"id": "c1", "model": "m", "choices": [choice]}) + "\n\n"


def _args(index: int, text: str, call_id: str | None = None) -> dict[str, Any]:
    fragment: dict[str, Any] = {"index": index, "function": {"arguments": text}}
    if call_id:
        fragment.update(id=call_id, type="function")
        fragment["function"]["name"] = "echo"
    return {"tool_calls": [fragment]}


LATE_STREAM = [
    _chunk(_args(0, '{"text":', "call_a")),
    _chunk(_args(0, '"a"}')),
    _chunk(_args(1, '{"text":"b"}', "call_b")),
    _chunk(_args(0, ',"extra":1')),  # call 0 completed when call 1 started
    _chunk({}, "tool_calls"),
    _chunk(_args(1, "}}}")),  # after finish_reason
    "data: [DONE]\n\n",
    _chunk({"content": "late text"}),  # after [DONE]
    _chunk(_args(2, '{"text":"c"}', "call_c")),
]


@pytest.mark.parametrize("sync", [True, False], ids=["sync", "async"])
async def test_openai_stream_ignores_fragments_for_completed_calls_and_events_after_done(
    server: ProviderServer, sync: bool, caplog: pytest.LogCaptureFixture
) -> None:
    request = ChatRequest([UserMessage("hi")], PARAMS)
    async with _model("openai", server) as model:
        server.enqueue({"sse": LATE_STREAM})
        with caplog.at_level("WARNING", logger="toolweave.providers"):
            events = (
                list(model.stream(request)) if sync else [e async for e in model.astream(request)]
            )
    completed = {
        e.request.id: e.request.arguments for e in events if isinstance(e, CompleteToolCall)
    }
    assert completed == {"call_a": '{"text":"a"}', "call_b": '{"text":"b"}'}
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert [[c.id, c.arguments] for c in final.response.ai_message.tool_execution_requests] == [
        ["call_a", '{"text":"a"}'],
        ["call_b", '{"text":"b"}'],
    ]
    assert not [e for e in events if isinstance(e, TextDelta)]
    assert final.response.ai_message.text is None
    warnings = [r.getMessage() for r in caplog.records if r.name == "toolweave.providers"]
    assert warnings == [
        "openai stream: ignored an argument fragment for tool call 0 after it was completed"
    ]


_FRAGMENTS = st.lists(
    st.tuples(
        st.integers(0, 2),  # index
        st.sampled_from([None, "call_a", "call_b", "call_c"]),  # id
        st.sampled_from([None, "echo", "other"]),  # name
        st.sampled_from(["", "{", '"text":', '"x"', "}", ",", "1"]),  # arguments
        st.booleans(),  # finish_reason on this chunk
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(_FRAGMENTS, st.integers(1, 5))
def test_openai_completed_calls_never_change(fragments: list[Any], batch: int) -> None:
    aggregator = OpenAIStreamAggregator()
    chunks = []
    for index, call_id, name, args, finish in fragments:
        fragment: dict[str, Any] = {"index": index, "function": {"arguments": args}}
        if call_id:
            fragment["id"] = call_id
        if name:
            fragment["function"]["name"] = name
        choice = {"index": 0, "delta": {"tool_calls": [fragment]}, "finish_reason": None}
        if finish:
            choice["finish_reason"] = "tool_calls"
        chunks.append({"choices": [choice]})
    events: list[Any] = []
    for start in range(0, len(chunks), batch):
        events.extend(aggregator.feed_chunks(chunks[start : start + batch]))
    aggregator.finish_reason = aggregator.finish_reason or "stop"
    events.extend(aggregator.finish())
    completed = [e for e in events if isinstance(e, CompleteToolCall)]
    final = events[-1].response.ai_message.tool_execution_requests
    assert len(completed) == len(final)
    for event in completed:
        assert final[event.index] == event.request  # what the loop ran is what the history says
