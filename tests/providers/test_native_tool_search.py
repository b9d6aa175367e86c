"""Provider-native deferred tool loading (`ToolService(tool_search="native")`,
`ChatRequestParameters.deferred_tools`): the request payloads checked against the official
SDKs' types, then whole conversations replayed from wire transcripts through the loopback
server, each round's request compared with the transcript, through all four faces."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from servers.provider_server import ProviderServer, load_transcript
from toolweave import NativeToolSearch, ToolService
from toolweave.chat import (
    AiMessage,
    ChatRequest,
    ChatRequestParameters,
    ToolExecutionResultMessage,
    UserMessage,
)
from toolweave.chat.response import PAUSED_TURN
from toolweave.errors import ToolLoopLimitError, UnsupportedOptionError
from toolweave.execution import ToolExecutionRequest
from toolweave.providers import (
    AnthropicChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    OpenAIResponsesChatModel,
)
from toolweave.service import ChatCompleted, KeywordToolSearch
from toolweave.service.search import native_tool_search
from toolweave.tools import ToolCard
from toolweave.toolsets import FunctionToolset

from .conftest import SECRET, check_anthropic_request
from .test_openai_responses import _sdk_response, _sse, _stream_of, check_responses_request

QUESTION = "杭州今天天气怎么样？"


def get_weather(city: str) -> str:
    """Get the current weather in a city."""
    return f"{city}: 晴, 22℃"


def get_time(city: str) -> str:
    """Get the local time in a city."""
    return f"{city}: 09:30"


def get_news(city: str) -> str:
    """Get today's headlines for a city."""
    return f"{city}: nothing happened"


def _card(name: str) -> ToolCard:
    return ToolCard(
        name=name,
        description=f"the {name} tool",
        input_params={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )


CARDS = [_card("get_weather"), _card("get_time"), _card("get_news")]


def _request(deferred: list[str], **params: Any) -> ChatRequest:
    return ChatRequest(
        [UserMessage("hi")],
        ChatRequestParameters(tools=CARDS, deferred_tools=deferred, **params),
    )


# the request, per provider ----------------------------------------------------------------
def test_responses_marks_deferred_tools_and_adds_the_hosted_search() -> None:
    model = OpenAIResponsesChatModel("gpt-5.4", api_key=SECRET)
    body = model.build_request_body(_request(["get_time", "get_news"]))
    check_responses_request(body)
    assert [(t.get("name"), t.get("defer_loading")) for t in body["tools"]] == [
        ("get_weather", None),
        ("get_time", True),
        ("get_news", True),
        (None, None),
    ]
    assert body["tools"][-1] == {"type": "tool_search"}
    plain = model.build_request_body(
        ChatRequest([UserMessage("hi")], ChatRequestParameters(tools=CARDS))
    )
    assert all("defer_loading" not in t for t in plain["tools"])  # the cached dicts untouched
    assert {"type": "tool_search"} not in plain["tools"]


def test_a_hosted_tool_search_of_the_callers_is_not_sent_twice() -> None:
    hosted = {"type": "tool_search", "execution": "server"}
    model = OpenAIResponsesChatModel("gpt-5.4", api_key=SECRET, hosted_tools=[hosted])
    body = model.build_request_body(_request(["get_news"]))
    check_responses_request(body)
    assert [t for t in body["tools"] if t["type"] == "tool_search"] == [hosted]


@pytest.mark.parametrize(
    "model",
    [
        OpenAIChatModel("gpt-4o-mini", api_key=SECRET),
        GeminiChatModel("gemini-2.5-flash", api_key=SECRET),
        OpenAIChatModel("gpt-4o-mini", api_key=SECRET, tool_calling="constrained"),
    ],
    ids=["openai-chat", "gemini", "openai-chat-constrained"],
)
def test_a_model_without_tool_search_refuses_deferred_tools(model: Any) -> None:
    assert not native_tool_search(model)
    with pytest.raises(UnsupportedOptionError, match="deferred_tools"):
        model.build_request_body(_request(["get_news"]))


@pytest.mark.parametrize(
    ("variant", "search_tool"),
    [
        ("bm25", {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"}),
        ("regex", {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"}),
    ],
)
def test_anthropic_marks_deferred_tools_and_adds_its_search_tool(
    variant: Any, search_tool: dict[str, Any]
) -> None:
    model = AnthropicChatModel("claude-sonnet-4-5", api_key=SECRET, tool_search=variant)
    body = model.build_request_body(_request(["get_time", "get_news"]))
    check_anthropic_request(body)
    assert [(t["name"], t.get("defer_loading")) for t in body["tools"]] == [
        ("get_weather", None),
        ("get_time", True),
        ("get_news", True),
        (search_tool["name"], None),
    ]
    assert body["tools"][-1] == search_tool
    plain = model.build_request_body(
        ChatRequest([UserMessage("hi")], ChatRequestParameters(tools=CARDS))
    )
    assert all("defer_loading" not in t for t in plain["tools"])  # the cached dicts untouched
    with pytest.raises(UnsupportedOptionError, match="tool_search"):
        AnthropicChatModel("claude-sonnet-4-5", api_key=SECRET, tool_search="fuzzy")  # type: ignore[arg-type]


def test_anthropic_structured_output_keeps_its_answer_tool_loaded() -> None:
    model = AnthropicChatModel("claude-sonnet-4-5", api_key=SECRET)
    body = model.build_request_body(_request(["get_news"], response_format={"type": "object"}))
    check_anthropic_request(body)
    assert [(t["name"], t.get("defer_loading")) for t in body["tools"]] == [
        ("get_weather", None),
        ("get_time", None),
        ("get_news", True),
        ("tool_search_tool_bm25", None),
        ("final_answer", None),
    ]


def test_deferring_a_tool_not_offered_is_refused() -> None:
    model = OpenAIResponsesChatModel("gpt-5.4", api_key=SECRET)
    with pytest.raises(UnsupportedOptionError, match="'get_stock'"):
        model.build_request_body(_request(["get_stock"]))


def test_native_tool_search_keeps_its_fallbacks_card_and_visible_tools() -> None:
    fallback = KeywordToolSearch(max_results=2, always_visible={"get_time"})
    search = NativeToolSearch(fallback, always_visible={"get_weather"})
    assert search.card is fallback.card
    assert search.always_visible == {"get_time", "get_weather"}
    assert [c.name for c in search.search({"terms": ["news"]}, CARDS)] == ["get_news"]
    assert isinstance(ToolService(tool_search="native").tool_search, NativeToolSearch)
    with pytest.raises(ValueError, match="'keyword'"):
        ToolService(tool_search="keyword")  # type: ignore[arg-type]


# whole conversations through the loopback server -------------------------------------------
FACES = ["chat", "achat", "chat_stream", "achat_stream"]


def _run(service: ToolService, model: Any, face: str) -> Any:
    async def run_async() -> Any:
        if face == "achat":
            return await service.achat(model, None, QUESTION)
        events = [e async for e in service.achat_stream(model, None, QUESTION)]
        return events[-1].result

    if face.startswith("a"):
        return asyncio.run(run_async())
    if face == "chat":
        return service.chat(model, None, QUESTION)
    events = list(service.chat_stream(model, None, QUESTION))
    assert isinstance(events[-1], ChatCompleted)
    return events[-1].result


def _enqueue(server: ProviderServer, transcript: dict[str, Any], stream: bool, sse: Any) -> None:
    for exchange in transcript["exchanges"]:
        response = exchange["response"]
        server.enqueue({"sse": sse(response["json"])} if stream else response)


def _expected(transcript: dict[str, Any], stream: bool) -> list[dict[str, Any]]:
    bodies = [exchange["request"]["body"] for exchange in transcript["exchanges"]]
    return [{**body, "stream": True} if stream else body for body in bodies]


def _responses_sse(final: dict[str, Any]) -> list[str]:
    """`_stream_of(final)`, with the hosted search's items added (`in_progress`) before
    they are done, as the API streams a hosted tool's items; renumbered and checked
    against the SDK's event union again."""
    events: list[dict[str, Any]] = []
    for chunk in _stream_of(final):
        event = json.loads(chunk.split("data: ", 1)[1])
        item = event.get("item") or {}
        if event["type"] == "response.output_item.done" and item["type"].startswith("tool_search"):
            added = {**item, "status": "in_progress"}
            if item["type"] == "tool_search_output":
                added["tools"] = []
            events.append({**event, "type": "response.output_item.added", "item": added})
        events.append(event)
    return _sse(events)


@pytest.mark.parametrize("face", FACES)
def test_responses_tool_search_round_trips(server: ProviderServer, face: str) -> None:
    transcript = load_transcript("openai/responses_tool_search")
    for exchange in transcript["exchanges"]:
        _sdk_response(exchange["response"]["json"])  # the SDK's Response type
    stream = face.endswith("stream")
    _enqueue(server, transcript, stream, _responses_sse)
    service = ToolService(tool_search="native").tools(get_weather, get_time, get_news)
    with OpenAIResponsesChatModel("gpt-5.4", api_key=SECRET, base_url=f"{server.url}/v1") as m:
        result = _run(service, m, face)
    bodies = server.bodies
    for body in bodies:
        check_responses_request(body)
    assert bodies == _expected(transcript, stream)
    # the search is the provider's: no toolweave call for it, the found tool ran as before
    assert [e.request.name for e in result.tool_executions] == ["get_weather"]
    assert result.tool_executions[0].result.text == "杭州: 晴, 22℃"
    assert result.text == "杭州今天晴，22℃。"
    first = next(m for m in result.messages if isinstance(m, AiMessage))
    kinds = [i["type"] for i in first.attributes["openai_responses"]["output"]]
    assert kinds == ["tool_search_call", "tool_search_output", "function_call"]
    assert [c.name for c in first.tool_execution_requests] == ["get_weather"]
    json.dumps(bodies)


def _anthropic_sse(message: dict[str, Any]) -> list[str]:
    """The Messages API stream of `message`, each event checked against the SDK's union:
    text and inputs as deltas, a server tool's result block whole at its start."""
    from anthropic.types import RawMessageStreamEvent
    from pydantic import TypeAdapter

    adapter: TypeAdapter[Any] = TypeAdapter(RawMessageStreamEvent)
    usage = message["usage"]
    start = {**message, "content": [], "stop_reason": None, "usage": {**usage, "output_tokens": 1}}
    events: list[dict[str, Any]] = [{"type": "message_start", "message": start}]
    for index, block in enumerate(message["content"]):
        kind = block["type"]
        if kind == "text":
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {"type": "text", "text": ""},
                }
            )
            text = block["text"]
            for at in range(0, len(text), 5):
                delta = {"type": "text_delta", "text": text[at : at + 5]}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
        elif kind in ("tool_use", "server_tool_use"):
            events.append(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": {**block, "input": {}},
                }
            )
            raw = json.dumps(block["input"], ensure_ascii=False)
            for at in range(0, len(raw), 7):
                delta = {"type": "input_json_delta", "partial_json": raw[at : at + 7]}
                events.append({"type": "content_block_delta", "index": index, "delta": delta})
        else:
            events.append({"type": "content_block_start", "index": index, "content_block": block})
        events.append({"type": "content_block_stop", "index": index})
    events.append(
        {
            "type": "message_delta",
            "delta": {"stop_reason": message["stop_reason"], "stop_sequence": None},
            "usage": {"output_tokens": usage["output_tokens"]},
        }
    )
    events.append({"type": "message_stop"})
    chunks = []
    for event in events:
        adapter.validate_python(event)
        chunks.append(f"event: {event['type']}\ndata: {json.dumps(event, ensure_ascii=False)}\n\n")
    return chunks


@pytest.mark.parametrize("face", FACES)
def test_anthropic_tool_search_round_trips(server: ProviderServer, face: str) -> None:
    from anthropic.types import Message

    transcript = load_transcript("anthropic/tool_search")
    for exchange in transcript["exchanges"]:
        Message.model_validate(exchange["response"]["json"])
    stream = face.endswith("stream")
    _enqueue(server, transcript, stream, _anthropic_sse)
    service = ToolService(tool_search="native").tools(get_weather, get_time, get_news)
    with AnthropicChatModel("claude-sonnet-4-5", api_key=SECRET, base_url=server.url) as model:
        result = _run(service, model, face)
    bodies = server.bodies
    for body in bodies:
        check_anthropic_request(body)
    assert bodies == _expected(transcript, stream)
    assert [e.request.name for e in result.tool_executions] == ["get_weather"]
    assert result.tool_executions[0].result.text == "杭州: 晴, 22℃"
    assert result.text == "杭州今天晴，22℃。"
    first = next(m for m in result.messages if isinstance(m, AiMessage))
    assert first.text == "我先找一个查询天气的工具。"
    assert [c.name for c in first.tool_execution_requests] == ["get_weather"]
    kinds = [b["type"] for b in first.attributes["anthropic"]["content"]]
    assert kinds == ["text", "server_tool_use", "tool_search_tool_result", "tool_use"]


def test_anthropic_sends_server_blocks_back_around_an_edited_turn() -> None:
    """A turn whose text and call were changed after the fact: the server tool's blocks
    stay verbatim in their places, the text and the call are sent as the message holds
    them."""
    transcript = load_transcript("anthropic/tool_search")
    model = AnthropicChatModel("claude-sonnet-4-5", api_key=SECRET)
    first = model._parse(transcript["exchanges"][0]["response"]["json"])
    call = ToolExecutionRequest(
        id="toolu_01Hq5sWn9Ze3Kd7Yb2Xc4Fvu", name="get_weather", arguments='{"city":"上海"}'
    )
    edited = first.ai_message.model_copy(
        update={"text": "查一下。", "tool_execution_requests": [call]}
    )
    history = [
        UserMessage(QUESTION),
        edited,
        ToolExecutionResultMessage(id=call.id, tool_name="get_weather", text="上海: 阴"),
    ]
    body = model.build_request_body(ChatRequest(history, ChatRequestParameters(tools=CARDS)))
    check_anthropic_request(body)
    sent = body["messages"][1]["content"]
    recorded = transcript["exchanges"][1]["request"]["body"]["messages"][1]["content"]
    assert sent == [
        {"type": "text", "text": "查一下。"},
        recorded[1],
        recorded[2],
        {"type": "tool_use", "id": call.id, "name": "get_weather", "input": {"city": "上海"}},
    ]


def test_native_search_falls_back_to_client_side_search(server: ProviderServer) -> None:
    """A model without its own search (OpenAI Chat) gets the fallback's search tool and
    only the always-visible tools; nothing is marked deferred."""
    server.enqueue_transcript("openai/weather_seed")
    search = NativeToolSearch(always_visible={"get_weather"})
    service = ToolService(tool_search=search).tools(get_weather, get_time, get_news)
    with OpenAIChatModel("gpt-4o-mini", api_key=SECRET, base_url=f"{server.url}/v1") as model:
        result = service.chat(model, None, QUESTION)
    assert [e.request.name for e in result.tool_executions] == ["get_weather"]
    for body in server.bodies:
        assert [t["function"]["name"] for t in body["tools"]] == [
            "get_weather",
            "tool_search_tool",
        ]
        assert "defer_loading" not in json.dumps(body)


def test_toolsets_tools_are_deferred_but_the_always_visible_and_the_callers(
    server: ProviderServer,
) -> None:
    """With toolsets, the sets' tools are deferred; an always-visible tool and a tool the
    caller passes in the request parameters are loaded up front, every round."""
    transcript = load_transcript("openai/responses_tool_search")
    _enqueue(server, transcript, False, _stream_of)
    search = NativeToolSearch(always_visible={"get_time"})
    toolset = FunctionToolset(get_weather, get_time)
    service = ToolService(tool_search=search, toolsets=[toolset]).tools(get_news)
    extra = ChatRequestParameters(tools=[_card("get_stock")])
    with OpenAIResponsesChatModel("gpt-5.4", api_key=SECRET, base_url=f"{server.url}/v1") as m:
        result = service.chat(m, extra, QUESTION)
    assert result.text == "杭州今天晴，22℃。"
    assert [e.request.name for e in result.tool_executions] == ["get_weather"]
    for body in server.bodies:
        check_responses_request(body)
        assert [(t.get("name"), t.get("defer_loading")) for t in body["tools"]] == [
            ("get_stock", None),
            ("get_news", True),
            ("get_weather", True),
            ("get_time", None),
            (None, None),
        ]


def test_a_searchable_sets_own_search_tool_is_not_deferred(server: ProviderServer) -> None:
    """A `.searchable` set under a native service search: its search tool stays loaded (the
    provider would hide it otherwise), the set's tools stay hidden by it, the service's
    tools are deferred."""
    transcript = load_transcript("openai/responses_tool_search")
    _enqueue(server, transcript, False, _stream_of)
    toolset = FunctionToolset(get_news).searchable(KeywordToolSearch(tool_name="find_news"))
    service = ToolService(tool_search="native", toolsets=[toolset]).tools(get_weather, get_time)
    with OpenAIResponsesChatModel("gpt-5.4", api_key=SECRET, base_url=f"{server.url}/v1") as m:
        result = service.chat(m, None, QUESTION)
    assert [e.request.name for e in result.tool_executions] == ["get_weather"]
    for body in server.bodies:
        check_responses_request(body)
        assert [(t.get("name"), t.get("defer_loading")) for t in body["tools"]] == [
            ("get_weather", True),
            ("get_time", True),
            ("find_news", None),
            (None, None),
        ]


@pytest.mark.parametrize("face", FACES)
def test_anthropic_paused_search_turn_is_sent_back_to_continue(
    server: ProviderServer, face: str
) -> None:
    """A response that stops with `pause_turn` (its search done, the turn not) is no final
    answer: the loop sends it back as it is, Claude continues the same turn with the call,
    and the paused turn and its continuation go out as one assistant turn afterwards."""
    from anthropic.types import Message

    transcript = load_transcript("anthropic/tool_search_pause_turn")
    for exchange in transcript["exchanges"]:
        Message.model_validate(exchange["response"]["json"])
    stream = face.endswith("stream")
    _enqueue(server, transcript, stream, _anthropic_sse)
    service = ToolService(tool_search="native").tools(get_weather, get_time, get_news)
    with AnthropicChatModel(
        "claude-sonnet-4-5", api_key=SECRET, base_url=server.url, tool_search="regex"
    ) as model:
        result = _run(service, model, face)
    bodies = server.bodies
    for body in bodies:
        check_anthropic_request(body)
    assert bodies == _expected(transcript, stream)
    assert [e.request.name for e in result.tool_executions] == ["get_weather"]
    assert result.text == "杭州今天晴，22℃。"
    paused = result.intermediate_responses[0]
    assert paused.metadata[PAUSED_TURN] is True
    assert not paused.ai_message.tool_execution_requests


def test_a_provider_pausing_forever_hits_the_round_limit(server: ProviderServer) -> None:
    paused = load_transcript("anthropic/tool_search_pause_turn")["exchanges"][0]["response"]
    server.enqueue(paused, paused, paused)
    service = ToolService(tool_search="native", max_tool_calling_round_trips=2).tools(get_weather)
    model = AnthropicChatModel("claude-sonnet-4-5", api_key=SECRET, base_url=server.url)
    with model, pytest.raises(ToolLoopLimitError, match="paused its turn"):
        service.chat(model, None, QUESTION)
    assert len(server.bodies) == 3
