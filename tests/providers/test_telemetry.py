"""OpenTelemetry GenAI semantic conventions, checked with the SDK's in-memory exporter against
the attribute names of the installed `opentelemetry-semantic-conventions` package: model calls
are CLIENT spans `chat {model}` (streaming too), the loop is an `invoke_agent` span parenting
them and the `execute_tool` spans, content is recorded only when opted in, masked."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes as GA
from opentelemetry.semconv.attributes import error_attributes, server_attributes
from opentelemetry.trace import SpanKind, StatusCode
from opentelemetry.util._once import Once

from servers.provider_server import ProviderServer
from toolweave import (
    ChatRequest,
    ChatRequestParameters,
    ProviderError,
    SystemMessage,
    ToolService,
    UserMessage,
    tool,
)
from toolweave.callbacks.otel import CAPTURE_CONTENT_ENV, set_content_capture
from toolweave.providers import OpenAIChatModel

from .conftest import SECRET, no_sleep


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A real SDK tracer provider installed globally for one test, then removed."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    old_provider, old_once = trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        provider.shutdown()
        trace._TRACER_PROVIDER, trace._TRACER_PROVIDER_SET_ONCE = old_provider, old_once
        set_content_capture(None)


@pytest.fixture
def model(server: ProviderServer) -> Iterator[OpenAIChatModel]:
    # the model is set on the constructor only: gen_ai.request.model must still be there
    m = OpenAIChatModel("gpt-4o-mini", api_key=SECRET, base_url=f"{server.url}/v1", timeout=10.0)
    no_sleep(m)
    with m:
        yield m


@tool
def login(user: str, password: str) -> str:
    """Log a user in."""
    return f"welcome {user}; session token=abc123secret"


@tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    return f"{city}: sunny"


@tool
def get_time(city: str) -> str:
    """Time in a city."""
    return f"{city}: noon"


def _completion(rid: str, message: dict[str, Any], finish: str, usage: tuple[int, int]) -> dict:
    return {
        "json": {
            "id": rid,
            "object": "chat.completion",
            "created": 1,
            "model": "gpt-4o-mini-2024-07-18",
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": usage[0],
                "completion_tokens": usage[1],
                "total_tokens": sum(usage),
            },
        }
    }


LOGIN_CALL = {
    "role": "assistant",
    "content": None,
    "tool_calls": [
        {
            "id": "c1",
            "type": "function",
            "function": {
                "name": "login",
                "arguments": json.dumps({"user": "ann", "password": "hunter2"}),
            },
        }
    ],
}


def _by_name(exporter: InMemorySpanExporter) -> dict[str, list[ReadableSpan]]:
    out: dict[str, list[ReadableSpan]] = {}
    for s in exporter.get_finished_spans():
        out.setdefault(s.name, []).append(s)
    return out


def _all_attribute_text(exporter: InMemorySpanExporter) -> str:
    return json.dumps(
        [dict(s.attributes or {}) for s in exporter.get_finished_spans()], default=str
    )


def test_chat_spans_follow_the_conventions(
    spans: InMemorySpanExporter, server: ProviderServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        _completion("r1", LOGIN_CALL, "tool_calls", (11, 7)),
        _completion("r2", {"role": "assistant", "content": "Done."}, "stop", (30, 2)),
    )
    result = (
        ToolService()
        .tools(login)
        .chat(model, ChatRequestParameters(temperature=0.2, max_tokens=100), "log in ann")
    )
    assert result.text == "Done."
    named = _by_name(spans)
    assert set(named) == {"invoke_agent", "chat gpt-4o-mini", "execute_tool login"}
    (agent,) = named["invoke_agent"]
    first, second = sorted(named["chat gpt-4o-mini"], key=lambda s: s.start_time or 0)
    (tool_span,) = named["execute_tool login"]
    for s in (first, second):
        attrs = s.attributes or {}
        assert s.kind is SpanKind.CLIENT
        assert attrs[GA.GEN_AI_OPERATION_NAME] == "chat"
        assert attrs[GA.GEN_AI_PROVIDER_NAME] == "openai"
        assert attrs[GA.GEN_AI_REQUEST_MODEL] == "gpt-4o-mini"
        assert attrs[GA.GEN_AI_REQUEST_TEMPERATURE] == 0.2
        assert attrs[GA.GEN_AI_REQUEST_MAX_TOKENS] == 100
        assert attrs[GA.GEN_AI_RESPONSE_MODEL] == "gpt-4o-mini-2024-07-18"
        assert attrs[server_attributes.SERVER_ADDRESS] == "127.0.0.1"
        assert attrs[server_attributes.SERVER_PORT] == server.port
        assert s.parent is not None and s.parent.span_id == agent.context.span_id
    assert first.attributes[GA.GEN_AI_RESPONSE_ID] == "r1"
    assert tuple(first.attributes[GA.GEN_AI_RESPONSE_FINISH_REASONS]) == ("tool_execution",)
    assert first.attributes[GA.GEN_AI_USAGE_INPUT_TOKENS] == 11
    assert first.attributes[GA.GEN_AI_USAGE_OUTPUT_TOKENS] == 7
    assert second.attributes[GA.GEN_AI_RESPONSE_ID] == "r2"
    assert tuple(second.attributes[GA.GEN_AI_RESPONSE_FINISH_REASONS]) == ("stop",)
    # the loop parents its model calls and its tool calls
    assert tool_span.parent is not None and tool_span.parent.span_id == agent.context.span_id
    assert tool_span.attributes[GA.GEN_AI_TOOL_CALL_ID] == "c1"
    assert agent.attributes[GA.GEN_AI_OPERATION_NAME] == "invoke_agent"
    assert agent.attributes[GA.GEN_AI_PROVIDER_NAME] == "openai"
    assert agent.attributes[GA.GEN_AI_USAGE_INPUT_TOKENS] == 41
    # content is opt-in: nothing of the conversation by default
    text = _all_attribute_text(spans)
    assert "hunter2" not in text and "log in ann" not in text and "welcome" not in text
    assert GA.GEN_AI_INPUT_MESSAGES not in text and GA.GEN_AI_TOOL_CALL_ARGUMENTS not in text


def test_streaming_calls_get_spans_that_end_with_the_stream(
    spans: InMemorySpanExporter, server: ProviderServer, model: OpenAIChatModel
) -> None:
    server.enqueue_transcript("openai/loop_parallel_stream")
    service = ToolService().tools(get_weather, get_time)

    async def main() -> list[Any]:
        return [e async for e in service.achat_stream(model, None, "weather?", eager=True)]

    events = asyncio.run(main())
    assert events[-1].result.text
    named = _by_name(spans)
    chats = sorted(named["chat gpt-4o-mini"], key=lambda s: s.start_time or 0)
    assert [s.attributes[GA.GEN_AI_RESPONSE_ID] for s in chats] == ["r1", "r2", "r3"]
    assert [s.attributes[GA.GEN_AI_USAGE_INPUT_TOKENS] for s in chats] == [40, 80, 120]
    assert tuple(chats[-1].attributes[GA.GEN_AI_RESPONSE_FINISH_REASONS]) == ("stop",)
    (agent,) = named["invoke_agent"]
    for s in chats:
        assert s.kind is SpanKind.CLIENT and s.attributes[GA.GEN_AI_REQUEST_STREAM] is True
        assert s.parent is not None and s.parent.span_id == agent.context.span_id
    # a tool started eagerly is still a child of the loop's span
    tools = named["execute_tool get_weather"] + named["execute_tool get_time"]
    assert tools and all(t.parent and t.parent.span_id == agent.context.span_id for t in tools)
    assert agent.end_time is not None and chats[-1].end_time is not None
    assert chats[-1].end_time <= agent.end_time


def test_content_capture_is_opt_in_and_masks_credentials(
    spans: InMemorySpanExporter,
    server: ProviderServer,
    model: OpenAIChatModel,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(CAPTURE_CONTENT_ENV, "SPAN_ONLY")
    server.enqueue(
        _completion("r1", LOGIN_CALL, "tool_calls", (11, 7)),
        _completion("r2", {"role": "assistant", "content": "Done."}, "stop", (30, 2)),
    )
    ToolService().tools(login).chat(
        model,
        None,
        [SystemMessage("You are terse."), UserMessage(f"log in ann, my key is {SECRET}")],
    )
    named = _by_name(spans)
    first, second = sorted(named["chat gpt-4o-mini"], key=lambda s: s.start_time or 0)
    system = json.loads(first.attributes[GA.GEN_AI_SYSTEM_INSTRUCTIONS])
    assert system == [{"type": "text", "content": "You are terse."}]
    inputs = json.loads(second.attributes[GA.GEN_AI_INPUT_MESSAGES])
    assert [m["role"] for m in inputs] == ["user", "assistant", "tool"]
    assert inputs[0]["parts"] == [{"type": "text", "content": "log in ann, my key is ***"}]
    call = inputs[1]["parts"][0]
    assert call["type"] == "tool_call" and call["name"] == "login" and call["id"] == "c1"
    assert call["arguments"] == {"user": "ann", "password": "***"}
    assert inputs[2]["parts"][0]["type"] == "tool_call_response"
    outputs = json.loads(second.attributes[GA.GEN_AI_OUTPUT_MESSAGES])
    assert outputs == [
        {
            "role": "assistant",
            "parts": [{"type": "text", "content": "Done."}],
            "finish_reason": "stop",
        }
    ]
    (tool_span,) = named["execute_tool login"]
    assert json.loads(tool_span.attributes[GA.GEN_AI_TOOL_CALL_ARGUMENTS]) == {
        "user": "ann",
        "password": "***",
    }
    assert json.loads(tool_span.attributes[GA.GEN_AI_TOOL_CALL_RESULT]) == (
        "welcome ann; session token=***"
    )
    text = _all_attribute_text(spans)
    assert SECRET not in text and "hunter2" not in text and "abc123secret" not in text


def test_a_failed_model_call_records_error_type(
    spans: InMemorySpanExporter, server: ProviderServer
) -> None:
    server.enqueue({"status": 400, "json": {"error": {"message": "bad", "type": "invalid"}}})
    failing = OpenAIChatModel("gpt-4o", api_key=SECRET, base_url=f"{server.url}/v1", max_retries=0)
    with failing, pytest.raises(ProviderError) as info:
        ToolService().chat(failing, None, "hi")
    named = _by_name(spans)
    (chat,) = named["chat gpt-4o"]
    (agent,) = named["invoke_agent"]
    for s in (chat, agent):
        assert s.attributes[error_attributes.ERROR_TYPE] == type(info.value).__qualname__
        assert s.status.status_code is StatusCode.ERROR


def test_a_pause_for_approval_is_an_event_of_the_agent_span(
    spans: InMemorySpanExporter,
) -> None:
    from toolweave import AiMessage, Approve, ChatStatus, ScriptedChatModel
    from toolweave.execution import ToolExecutionRequest

    @tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        return f"refunded {order}"

    call = ToolExecutionRequest(id="r1", name="refund", arguments='{"order": "A7"}')
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[call]), AiMessage("done")])
    service = ToolService().tools(refund)
    paused = service.chat(model, None, "refund A7")
    assert paused.status is ChatStatus.PENDING and paused.state is not None
    (agent,) = [s for s in spans.get_finished_spans() if s.name == "invoke_agent"]
    (event,) = [e for e in agent.events if e.name == "toolweave.round_paused"]
    assert event.attributes is not None
    assert list(event.attributes["toolweave.pending.call_ids"]) == ["r1"]
    assert list(event.attributes["toolweave.pending.tools"]) == ["refund"]
    assert list(event.attributes["toolweave.pending.reasons"]) == ["approval"]
    service.chat(model, None, paused.state, decisions={"r1": Approve()})
    tools = [s for s in spans.get_finished_spans() if s.name.startswith("execute_tool")]
    assert [s.attributes["gen_ai.tool.name"] for s in tools if s.attributes] == ["refund"]


def test_a_model_called_directly_has_its_own_chat_span(
    spans: InMemorySpanExporter, server: ProviderServer, model: OpenAIChatModel
) -> None:
    server.enqueue(
        _completion("d1", {"role": "assistant", "content": "hi"}, "stop", (3, 1)),
        {"sse": _sse("d2")},
    )
    request = ChatRequest(messages=[UserMessage("hello")])
    assert model.chat(request).ai_message.text == "hi"

    async def consume() -> list[Any]:
        return [e async for e in model.astream(request)]

    assert asyncio.run(consume())
    chats = sorted(_by_name(spans)["chat gpt-4o-mini"], key=lambda s: s.start_time or 0)
    assert [s.attributes[GA.GEN_AI_RESPONSE_ID] for s in chats] == ["d1", "d2"]
    assert all(s.kind is SpanKind.CLIENT and s.parent is None for s in chats)
    assert chats[1].attributes[GA.GEN_AI_REQUEST_STREAM] is True
    assert len(spans.get_finished_spans()) == 2  # and nothing else (no double spans)


def _sse(rid: str) -> list[str]:
    chunk = {
        "id": rid,
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-4o-mini",
        "choices": [{"index": 0, "delta": {"content": "yo"}, "finish_reason": "stop"}],
    }
    return [f"data: {json.dumps(chunk)}\n\n", "data: [DONE]\n\n"]


# the model's own credentials, whatever the provider ------------------------------------------
AZURE_KEY = "3f9c2b7e8d1a4c6f9e0b2d4a6c8e0f13"
ENTRA_TOKEN = "eyJ0eXAiOiJKV1QiLCJhbGciOiJSUzI1NiJ9.eyJhdWQiOiJjb2duaXRpdmUifQ.c2lnbmF0dXJl"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
AWS_SESSION = "IQoJb3JpZ2luX2VjEXAMPLEtemporarySessionTokenFromTheChain0123"
BEDROCK_KEY = "ABSKQmVkcm9ja0FQSUtleS1leGFtcGxlLWtleQ"


def _leaky(credential: str) -> Any:
    @tool
    def read_config() -> str:
        """Read the deployment's configuration."""
        # free text no credential pattern matches: only the model knows it is a secret
        return f"deployment settings: {credential} (and also {quote(credential, safe='')})"

    return read_config


def _azure_model(server: ProviderServer, how: str) -> tuple[Any, str]:
    from toolweave.providers import AzureOpenAIChatModel

    if how == "api-key":
        return AzureOpenAIChatModel("gpt-4o", endpoint=server.url, api_key=AZURE_KEY), AZURE_KEY
    tokens = iter([ENTRA_TOKEN, ENTRA_TOKEN + "-refreshed"])
    model = AzureOpenAIChatModel("gpt-4o", endpoint=server.url, token_provider=lambda: next(tokens))
    return model, ENTRA_TOKEN


def _bedrock_model(
    server: ProviderServer, how: str, monkeypatch: pytest.MonkeyPatch
) -> tuple[Any, str]:
    from toolweave.providers import BedrockChatModel

    region, name = "us-east-1", "anthropic.claude-3-5-sonnet-20241022-v2:0"
    if how == "api-key":
        model = BedrockChatModel(name, region=region, api_key=BEDROCK_KEY, base_url=server.url)
        return model, BEDROCK_KEY
    if how == "sigv4-secret":
        model = BedrockChatModel(
            name,
            region=region,
            aws_access_key_id="AKIDEXAMPLE",
            aws_secret_access_key=AWS_SECRET,
            base_url=server.url,
        )
        return model, AWS_SECRET
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "ASIAEXAMPLETEMPORARY")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", AWS_SECRET + "-temp")
    monkeypatch.setenv("AWS_SESSION_TOKEN", AWS_SESSION)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    return BedrockChatModel(name, region=region, base_url=server.url), AWS_SESSION


@pytest.mark.parametrize(
    "case",
    [
        "azure-api-key",
        "azure-entra-token",
        "bedrock-sigv4-secret",
        "bedrock-session-token",
        "bedrock-api-key",
    ],
)
def test_content_capture_masks_the_models_own_credentials_for_every_provider(
    spans: InMemorySpanExporter,
    server: ProviderServer,
    monkeypatch: pytest.MonkeyPatch,
    case: str,
) -> None:
    """A tool result holding the model's own credential (Azure's api-key or Entra token,
    Bedrock's SigV4 secret, session token from the chain, or API key) is masked in the chat
    span's `gen_ai.input.messages` and the tool span's `gen_ai.tool.call.result`, as the
    OpenAI key is: every model exposes what it holds as `secrets`, read when content is
    recorded (so tokens fetched later count)."""
    from .test_bedrock import converse

    set_content_capture(True)
    provider, how = case.split("-", 1)
    if provider == "azure":
        model, credential = _azure_model(server, how)
        call = {**LOGIN_CALL, "tool_calls": [{**LOGIN_CALL["tool_calls"][0]}]}
        call["tool_calls"][0]["function"] = {"name": "read_config", "arguments": "{}"}
        server.enqueue(
            _completion("r1", call, "tool_calls", (5, 5)),
            _completion("r2", {"role": "assistant", "content": "Done."}, "stop", (5, 5)),
        )
    else:
        model, credential = _bedrock_model(server, how, monkeypatch)
        use = {"toolUse": {"toolUseId": "t1", "name": "read_config", "input": {}}}
        server.enqueue(
            {"json": converse([use], "tool_use")},
            {"json": converse([{"text": "Done."}], "end_turn")},
        )
    with model:
        result = ToolService().tools(_leaky(credential)).chat(model, None, "what is deployed?")
    assert result.text == "Done." and credential in result.tool_executions[0].result_text
    named = _by_name(spans)
    chats = sorted(
        (s for name, group in named.items() if name.startswith("chat") for s in group),
        key=lambda s: s.start_time or 0,
    )
    inputs = chats[1].attributes[GA.GEN_AI_INPUT_MESSAGES]
    (tool_span,) = named["execute_tool read_config"]
    outcome = tool_span.attributes[GA.GEN_AI_TOOL_CALL_RESULT]
    for text in (inputs, outcome, _all_attribute_text(spans)):
        assert credential not in text and quote(credential, safe="") not in text
    assert "deployment settings: ***" in outcome and "deployment settings: ***" in inputs
