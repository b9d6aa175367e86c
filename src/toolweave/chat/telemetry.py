"""GenAI semantic-convention spans for model calls (`chat {model}`, CLIENT) and for the tool
loop (`invoke_agent`, parent of its model calls and `execute_tool` spans).

Everything here is a no-op returning `None` unless tracing is enabled
(`callbacks.otel.tracing_enabled`). Content (messages) is recorded only when content capture
is on, masked (`callbacks.otel.mask_secrets`, plus the credentials the model holds: its
`secrets`, the one rule for every provider).
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Iterator, Mapping
from contextvars import ContextVar
from typing import Any
from urllib.parse import urlsplit

from ..callbacks.otel import (
    content_capture_enabled,
    content_json,
    record_error,
    tracer,
    tracing_enabled,
)
from .messages import AiMessage, SystemMessage, ToolExecutionResultMessage, UserMessage
from .request import ChatRequest
from .response import ChatResponse, TokenUsage

__all__ = [
    "end_agent_span",
    "end_model_span",
    "loop_owned",
    "model_parent",
    "start_agent_span",
    "start_direct_span",
    "start_model_span",
    "traced_astream",
    "traced_stream",
]

_LOOP_OWNED: ContextVar[bool] = ContextVar("toolweave_loop_owned_model_call", default=False)

# toolweave's provider names -> the conventions' well-known `gen_ai.provider.name` values
_PROVIDERS = {"gemini": "gcp.gemini", "azure": "azure.ai.openai"}


def _provider(model: Any) -> str | None:
    name = getattr(model, "provider", None)
    if not isinstance(name, str) or name in ("model", "http"):
        return None
    return _PROVIDERS.get(name, name)


def _model_name(model: Any, request: ChatRequest | None) -> str | None:
    if request is not None and request.parameters.model:
        return request.parameters.model
    defaults = getattr(model, "default_parameters", None)
    if defaults is not None and getattr(defaults, "model", None):
        return str(defaults.model)
    name = getattr(model, "model", None)
    return name if isinstance(name, str) and name else None


def _server(model: Any) -> tuple[str | None, int | None]:
    url = getattr(model, "base_url", None)
    if not isinstance(url, str) or "://" not in url:
        return None, None
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None, None
    if port is None:
        port = {"https": 443, "http": 80}.get(parts.scheme)
    return parts.hostname, port


def _secrets(model: Any) -> tuple[str, ...]:
    """What `model` says it holds (`secrets`: keys, tokens, credentials), for masking."""
    try:
        held = getattr(model, "secrets", None) or ()
        return tuple(s for s in held if isinstance(s, str) and s)
    except Exception:  # a model that cannot tell: the patterns still apply
        return ()


def _set(s: Any, attributes: Mapping[str, Any]) -> None:
    for key, value in attributes.items():
        if value is not None:
            s.set_attribute(key, value)


# messages in the conventions' JSON shape ---------------------------------------------------------
def _arguments(raw: str) -> Any:
    try:
        return json.loads(raw) if raw else {}
    except ValueError:
        return raw


def _parts(message: Any) -> tuple[str, list[dict[str, Any]]]:
    if isinstance(message, UserMessage):
        parts = [{"type": "text", "content": message.text}] if message.text else []
        for part in message.contents:
            kind = getattr(part, "type", "content")
            text = getattr(part, "text", None)
            parts.append(
                {"type": "text", "content": text} if text is not None else {"type": str(kind)}
            )
        return "user", parts
    if isinstance(message, AiMessage):
        parts = []
        if message.reasoning:
            parts.append({"type": "reasoning", "content": message.reasoning})
        if message.text:
            parts.append({"type": "text", "content": message.text})
        for call in message.tool_execution_requests:
            parts.append(
                {
                    "type": "tool_call",
                    "id": call.id,
                    "name": call.name,
                    "arguments": _arguments(call.arguments),
                }
            )
        return "assistant", parts
    if isinstance(message, ToolExecutionResultMessage):
        return "tool", [{"type": "tool_call_response", "id": message.id, "response": message.text}]
    return "user", [{"type": "text", "content": str(getattr(message, "text", message))}]


def _input_messages(request: ChatRequest) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    system: list[dict[str, Any]] = []
    messages: list[dict[str, Any]] = []
    for message in request.messages:
        if isinstance(message, SystemMessage):
            system.append({"type": "text", "content": message.text})
            continue
        role, parts = _parts(message)
        messages.append({"role": role, "parts": parts})
    return system, messages


# model calls ------------------------------------------------------------------------------------
def model_parent(agent_span: Any) -> Any:
    """The context to start a model span in: under `agent_span` (None: the current one)."""
    if agent_span is None:
        return None
    from opentelemetry.trace import set_span_in_context

    return set_span_in_context(agent_span)


def start_model_span(
    model: Any, request: ChatRequest, *, stream: bool, parent: Any = None
) -> Any | None:
    """Start the CLIENT span `chat {model}` of one model call (not made current; the caller
    ends it with `end_model_span`), or None when tracing is off."""
    if not tracing_enabled():
        return None
    from opentelemetry.trace import SpanKind

    params = request.parameters
    defaults = getattr(model, "default_parameters", None)
    if defaults is not None and hasattr(defaults, "override"):
        params = defaults.override(params)
    name = _model_name(model, request)
    address, port = _server(model)
    s = tracer().start_span(
        f"chat {name}" if name else "chat",
        context=parent,
        kind=SpanKind.CLIENT,
        attributes={
            k: v
            for k, v in {
                "gen_ai.operation.name": "chat",
                "gen_ai.provider.name": _provider(model),
                "gen_ai.request.model": name,
                "gen_ai.request.temperature": params.temperature,
                "gen_ai.request.top_p": params.top_p,
                "gen_ai.request.max_tokens": params.max_tokens,
                "gen_ai.request.stop_sequences": list(params.stop) if params.stop else None,
                "gen_ai.request.seed": params.custom_parameters.get("seed"),
                "gen_ai.request.frequency_penalty": params.custom_parameters.get(
                    "frequency_penalty"
                ),
                "gen_ai.request.presence_penalty": params.custom_parameters.get("presence_penalty"),
                "gen_ai.request.stream": stream or None,
                "gen_ai.output.type": "json" if params.response_format is not None else None,
                "server.address": address,
                "server.port": port,
            }.items()
            if v is not None
        },
    )
    if content_capture_enabled():
        system, messages = _input_messages(request)
        secrets = _secrets(model)
        if system:
            s.set_attribute("gen_ai.system_instructions", content_json(system, secrets))
        s.set_attribute("gen_ai.input.messages", content_json(messages, secrets))
        if params.tools:
            tools = [
                {"type": "function", "name": c.name, "description": c.description}
                for c in params.tools
            ]
            s.set_attribute("gen_ai.tool.definitions", content_json(tools))
    return s


def _usage(s: Any, usage: TokenUsage | None) -> None:
    if usage is not None:
        _set(
            s,
            {
                "gen_ai.usage.input_tokens": usage.input_tokens,
                "gen_ai.usage.output_tokens": usage.output_tokens,
            },
        )


def end_model_span(
    s: Any | None,
    model: Any,
    response: ChatResponse | None = None,
    error: BaseException | None = None,
) -> None:
    """Record the response (id, model, finish reason, usage, and the output message when
    content capture is on) or the error on span `s`, and end it."""
    if s is None:
        return
    if response is not None:
        reason = response.finish_reason
        _set(
            s,
            {
                "gen_ai.response.id": response.id,
                "gen_ai.response.model": response.model,
                "gen_ai.response.finish_reasons": [str(reason)] if reason is not None else None,
            },
        )
        _usage(s, response.usage)
        if content_capture_enabled():
            role, parts = _parts(response.ai_message)
            output = {"role": role, "parts": parts}
            if reason is not None:
                output["finish_reason"] = str(reason)
            s.set_attribute("gen_ai.output.messages", content_json([output], _secrets(model)))
    if error is not None:
        record_error(s, error)
    s.end()


# the loop -----------------------------------------------------------------------------------------
def start_agent_span(model: Any, conversation_id: Any = None) -> Any | None:
    """Start the `invoke_agent` span of one conversation (the parent of its `chat` and
    `execute_tool` spans), or None when tracing is off."""
    if not tracing_enabled():
        return None
    name = _model_name(model, None)
    return tracer().start_span(
        "invoke_agent",
        attributes={
            k: v
            for k, v in {
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.provider.name": _provider(model),
                "gen_ai.request.model": name,
                "gen_ai.conversation.id": (
                    str(conversation_id) if conversation_id is not None else None
                ),
            }.items()
            if v is not None
        },
    )


def end_agent_span(
    s: Any | None, usage: TokenUsage | None = None, error: BaseException | None = None
) -> None:
    """Record the conversation's total usage or its error on span `s`, and end it."""
    if s is None:
        return
    _usage(s, usage)
    if error is not None:
        record_error(s, error)
    s.end()


# a model called directly ---------------------------------------------------------------------------
@contextlib.contextmanager
def loop_owned() -> Iterator[None]:
    """Model calls made in this block are traced by the loop (`ToolService` has its own
    `chat` span for them), so the model does not open a second one."""
    token = _LOOP_OWNED.set(True)
    try:
        yield
    finally:
        _LOOP_OWNED.reset(token)


def start_direct_span(model: Any, request: ChatRequest, *, stream: bool) -> Any | None:
    """The `chat {model}` span of a model called directly (None when tracing is off, or when
    the loop traces this call itself)."""
    if _LOOP_OWNED.get() or not tracing_enabled():
        return None
    return start_model_span(model, request, stream=stream)


def traced_stream(events: Iterator[Any], s: Any, model: Any) -> Iterator[Any]:
    """`events` (a model's sync stream) with span `s` ended when the stream ends."""
    from .events import ResponseCompleted

    response = None
    try:
        for event in events:
            if isinstance(event, ResponseCompleted):
                response = event.response
            yield event
    except BaseException as e:
        end_model_span(s, model, error=None if isinstance(e, GeneratorExit) else e)
        raise
    finally:
        close = getattr(events, "close", None)
        if close is not None:
            close()
    end_model_span(s, model, response)


async def traced_astream(events: AsyncIterator[Any], s: Any, model: Any) -> AsyncIterator[Any]:
    """`events` (a model's async stream) with span `s` ended when the stream ends."""
    from .events import ResponseCompleted

    response = None
    try:
        async for event in events:
            if isinstance(event, ResponseCompleted):
                response = event.response
            yield event
    except BaseException as e:
        end_model_span(s, model, error=None if isinstance(e, GeneratorExit) else e)
        raise
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()
    end_model_span(s, model, response)
