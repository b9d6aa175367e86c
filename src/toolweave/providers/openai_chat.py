"""`OpenAIChatModel`: OpenAI Chat Completions, and any compatible endpoint (DeepSeek, Qwen,
Moonshot, vLLM, Ollama, llama.cpp server, Gemini's OpenAI-compatible API) via `base_url`."""

from __future__ import annotations

import json
import logging
import os
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, Literal

import httpx2

from ..chat.events import (
    CompleteToolCall,
    PartialToolCall,
    ReasoningDelta,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
)
from ..chat.messages import AiMessage, SystemMessage, ToolExecutionResultMessage, UserMessage
from ..chat.request import ChatRequest, ChatRequestParameters, ToolChoice
from ..chat.response import ChatResponse, FinishReason, TokenUsage
from ..dialects import openai_tools, to_openai_strict
from ..errors import SchemaError
from ..execution.requests import ToolExecutionRequest
from ..schema.validation import accepts_null
from ._allowed import check_named
from ._azure import AzureDeployment
from ._base import HttpChatModel, openai_headers
from ._http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    HttpTransport,
    decode_json,
    json_failure,
)
from ._sse import SSEEvent
from .constrained import ConstrainedToolCalling
from .tool_results import openai_chat_content, openai_chat_tool_result

__all__ = ["AzureOpenAIChatModel", "OpenAIChatModel", "OpenAIStreamAggregator"]

logger = logging.getLogger("toolweave.providers")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PROVIDER = "openai"
AZURE_CHAT_API_VERSION = "2024-10-21"

_FINISH = {
    "stop": FinishReason.STOP,
    "length": FinishReason.LENGTH,
    "tool_calls": FinishReason.TOOL_EXECUTION,
    "function_call": FinishReason.TOOL_EXECUTION,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def _finish_reason(raw: str | None, has_calls: bool) -> FinishReason | None:
    if raw is None:
        return FinishReason.TOOL_EXECUTION if has_calls else None
    reason = _FINISH.get(raw, FinishReason.OTHER)
    # Several compatible servers say "stop" while returning tool calls.
    if has_calls and reason is FinishReason.STOP:
        return FinishReason.TOOL_EXECUTION
    return reason


def _usage(raw: Any) -> TokenUsage | None:
    if not isinstance(raw, Mapping):
        return None
    return TokenUsage(
        input_tokens=raw.get("prompt_tokens"),
        output_tokens=raw.get("completion_tokens"),
        total_tokens=raw.get("total_tokens"),
    )


def _arguments_text(raw: Any) -> str:
    if raw is None:
        return ""
    if isinstance(raw, str):
        return raw
    # Some servers (Ollama) send the arguments as an object.
    return json.dumps(raw, ensure_ascii=False)


def _optional_not_nullable(schema: Any, root: Mapping[str, Any] | None = None) -> bool:
    """Whether some object has an optional property that does not accept null: OpenAI's
    strict form makes it required and nullable, so the model could send a `null` that the
    answer's validator rejects; such a schema is sent non-strict. `root` holds the `$defs`
    (the schema itself at the top)."""
    if isinstance(schema, list):
        return any(_optional_not_nullable(s, root) for s in schema)
    if not isinstance(schema, Mapping):
        return False
    if root is None:
        root = schema
    props = schema.get("properties")
    if isinstance(props, Mapping):
        required = set(schema.get("required") or ())
        if any(n not in required and not accepts_null(p, root) for n, p in props.items()):
            return True
    children: list[Any] = []
    for key in ("properties", "$defs", "definitions"):
        if isinstance(schema.get(key), Mapping):
            children.extend(schema[key].values())
    for key in ("anyOf", "oneOf", "allOf", "prefixItems"):
        if isinstance(schema.get(key), list):
            children.extend(schema[key])
    for key in ("items", "additionalProperties"):
        if isinstance(schema.get(key), Mapping):
            children.append(schema[key])
    return any(_optional_not_nullable(child, root) for child in children)


_NO_CALL = object()  # compares unequal to every fragment index


def _continuation(chunk: Mapping[str, Any], last: object) -> str | None:
    """The argument text when `chunk` is only one more fragment of the call with raw index
    `last` (the fast path of `OpenAIStreamAggregator.feed_chunks`, which inlines this same
    test in its loop), else None."""
    try:
        (choice,) = chunk["choices"]
        delta = choice["delta"]
        if (
            len(delta) == 1
            and choice["finish_reason"] is None
            and choice["index"] == 0
            and (calls := delta.get("tool_calls")) is not None
        ):
            (fragment,) = calls
            if fragment["index"] == last and "id" not in fragment:
                args = fragment["function"]["arguments"]
                if args and args.__class__ is str:
                    return args  # type: ignore[no-any-return]
    except (LookupError, TypeError, AttributeError, ValueError):
        pass
    return None


class _Call:
    __slots__ = ("completed", "id", "name", "parts", "request")

    def __init__(self) -> None:
        self.id: str | None = None
        self.name: str | None = None
        self.parts: list[str] = []
        self.completed = False
        # set on completion: a completed call never changes, so it is built (joined) once
        self.request: ToolExecutionRequest | None = None


class OpenAIStreamAggregator:
    """Aggregates Chat Completions stream chunks (already JSON-decoded) into stream events.

    Rules (docs/providers.md): tool-call fragments are keyed by `index`; a fragment without
    `index` continues the current call unless it carries a different id or is not the first
    call of its delta (Gemini's compatible API); several calls in one delta are all kept;
    fragments with no id, name or arguments are skipped (DeepSeek sentinels, `"type":""`);
    id fragments that differ from the id so far are concatenated (ids split across chunks),
    repeats are ignored; a reused index with a new id and a new name starts a new call.
    A call is complete (`CompleteToolCall`) when the next call starts, when the choice has a
    `finish_reason`, or at the end of the stream; empty arguments become `"{}"`. A completed
    call never changes: later fragments for it are ignored, as is anything after `[DONE]`
    (both logged once).
    With `emit_partials=False` no `PartialToolCall` events are produced (only complete calls).
    """

    __slots__ = (
        "_calls",
        "_current",
        "_current_parts",
        "_ignored",
        "_last_raw",
        "_pending",
        "_raw_map",
        "_transport",
        "created",
        "done",
        "emit_partials",
        "finish_reason",
        "id",
        "model",
        "reasoning",
        "reasoning_field",
        "system_fingerprint",
        "text",
        "usage",
    )

    def __init__(
        self, transport: HttpTransport | None = None, *, emit_partials: bool = True
    ) -> None:
        self._transport = transport
        self.emit_partials = emit_partials
        self.text: list[str] = []
        self.reasoning: list[str] = []
        self.reasoning_field: str | None = None
        self._calls: list[_Call] = []
        self._raw_map: dict[int, int] = {}
        self._current: int | None = None
        # Raw index of the call in progress while the fast path may extend it.
        self._last_raw: object = _NO_CALL
        self._current_parts: list[str] = []
        # The fast path's fragments for that call, not yet in its parts: moved there as one
        # piece (and one PartialToolCall) before any other event and at the end of a batch.
        self._pending: list[str] = []
        self.finish_reason: str | None = None
        self.usage: Any = None
        self.id: str | None = None
        self.model: str | None = None
        self.created: int | None = None
        self.system_fingerprint: str | None = None
        self.done = False
        self._ignored = 0

    # SSE entry points -----------------------------------------------------------------------
    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Consume one SSE event (`[DONE]` ends the stream)."""
        return self.feed_chunks(self._decoded((event,)))

    def feed_batch(self, events: Iterable[SSEEvent]) -> list[StreamEvent]:
        """Consume the SSE events of one network read. Consecutive argument fragments of
        the same call come out as one `PartialToolCall` (fewer, larger events; the same
        aggregate), in order with every other event."""
        return self.feed_chunks(self._decoded(events))

    def _decoded(self, events: Iterable[SSEEvent]) -> Iterator[Mapping[str, Any]]:
        for event in events:
            if self.done:
                self._ignore("an event after [DONE]")
                continue
            if event.is_done:
                self.done = True
                continue
            data = event.data
            if not data.strip():
                continue
            try:
                chunk = decode_json(data)
            except ValueError as e:
                raise self._protocol(
                    f"a stream chunk is {json_failure(e)}: {data[:200]!r}"
                ) from None
            if event.event == "error" or (isinstance(chunk, dict) and chunk.get("error")):
                raise self._stream_error(
                    chunk.get("error", chunk) if isinstance(chunk, dict) else chunk
                )
            if isinstance(chunk, dict):
                yield chunk

    def _ignore(self, what: str) -> None:
        """Log (once per stream) something the stream sent that cannot be used anymore."""
        if not self._ignored:
            logger.warning("openai stream: ignored %s", what)
        self._ignored += 1

    def _protocol(self, message: str) -> Exception:
        if self._transport is not None:
            return self._transport.protocol_error(message)
        return ValueError(message)

    def _stream_error(self, payload: Any) -> Exception:
        if self._transport is not None:
            return self._transport.stream_error(payload)
        return ValueError(f"stream error: {payload!r}")

    # chunk entry points ---------------------------------------------------------------------
    def feed_chunk(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        """Consume one decoded chunk; return the events it produces."""
        args = _continuation(chunk, self._last_raw)
        if args is None:
            return self.feed_chunks((chunk,))
        self._current_parts.append(args)
        if self.emit_partials:
            return [PartialToolCall(self._current, None, None, args)]  # type: ignore[arg-type]
        return []

    def feed_chunks(self, chunks: Iterable[Mapping[str, Any]]) -> list[StreamEvent]:
        """`feed_batch` for already decoded chunks."""
        out: list[StreamEvent] = []
        last = self._last_raw
        pending = self._pending
        append = pending.append
        try:
            for chunk in chunks:
                # Fast path, inlined because it runs for nearly every chunk: one more
                # argument fragment for the call in progress (whose name is known). One
                # choice (index 0, no finish_reason) whose delta holds only `tool_calls`:
                # one fragment with the current call's `index`, `function.arguments` and no
                # `id` (a `type` or a name is ignored by the general path too: the call's
                # name is already set). Chunk-level fields are skipped here: ids and model
                # come with a call's first chunk, and usage that some servers repeat on
                # every chunk is cumulative, so the last one (general path) wins.
                # Subscripts and unpacking, not .get and len: a missing key or another
                # count just means the general path. The same test as `_continuation`.
                try:
                    (choice,) = chunk["choices"]
                    delta = choice["delta"]
                    if (
                        len(delta) == 1
                        and choice["finish_reason"] is None
                        and choice["index"] == 0
                        and (calls := delta.get("tool_calls")) is not None
                    ):
                        (fragment,) = calls
                        if fragment["index"] == last and "id" not in fragment:
                            args = fragment["function"]["arguments"]
                            if args and args.__class__ is str:
                                append(args)
                                continue
                except (LookupError, TypeError, AttributeError, ValueError):
                    pass  # not this shape: the general path (which reports malformed chunks)
                if pending:
                    self._flush(out)
                self._feed_general(chunk, out)
                last = self._last_raw
        finally:
            # also when a chunk is bad: the fragments before it stay in their call
            if pending:
                self._flush(out)
        return out

    def _flush(self, out: list[StreamEvent]) -> None:
        pending = self._pending
        text = "".join(pending)
        pending.clear()
        self._current_parts.append(text)
        if self.emit_partials:
            out.append(PartialToolCall(self._current, None, None, text))  # type: ignore[arg-type]

    def _feed_general(self, chunk: Mapping[str, Any], events: list[StreamEvent]) -> None:
        self._meta(chunk)
        for choice in chunk.get("choices") or ():
            if choice.get("index", 0) not in (0, None):
                continue
            delta = choice.get("delta")
            if delta:
                content = delta.get("content")
                if content:
                    self.text.append(content)
                    events.append(TextDelta(content))
                for field in ("reasoning_content", "reasoning"):
                    piece = delta.get(field)
                    if piece and isinstance(piece, str):
                        self.reasoning.append(piece)
                        self.reasoning_field = field
                        events.append(ReasoningDelta(piece))
                        break
                calls = delta.get("tool_calls")
                if calls:
                    self._tool_calls(calls, events)
            reason = choice.get("finish_reason")
            if reason:
                self.finish_reason = reason
                self._complete_all(events)

    def _meta(self, chunk: Mapping[str, Any]) -> None:
        if self.id is None and chunk.get("id"):
            self.id = chunk["id"]
        if self.model is None and chunk.get("model"):
            self.model = chunk["model"]
            self.created = chunk.get("created")
        if self.system_fingerprint is None and chunk.get("system_fingerprint"):
            self.system_fingerprint = chunk["system_fingerprint"]
        usage = chunk.get("usage")
        if usage:
            self.usage = usage

    def _tool_calls(self, fragments: list[Any], events: list[StreamEvent]) -> None:
        calls = self._calls
        for position, fragment in enumerate(fragments):
            function = fragment.get("function") or {}
            call_id = fragment.get("id") or None
            name = function.get("name") or None
            args = _arguments_text(function.get("arguments"))
            if not call_id and not name and not args:
                continue  # sentinel chunk
            raw = fragment.get("index")
            current = self._current
            if raw is None:
                if (
                    current is None
                    or position > 0
                    or (call_id and calls[current].id and call_id != calls[current].id)
                ):
                    index = self._start(events)
                else:
                    index = current
            else:
                mapped = self._raw_map.get(raw)
                if mapped is None:
                    index = self._raw_map[raw] = self._start(events)
                else:
                    known = calls[mapped]
                    if call_id and name and known.id and known.name and call_id != known.id:
                        # The same index reused for another call.
                        index = self._raw_map[raw] = self._start(events)
                    else:
                        index = mapped
            call = calls[index]
            if call.completed:
                # Its CompleteToolCall is out (the loop may be running it): it never changes.
                self._ignore(f"an argument fragment for tool call {index} after it was completed")
                continue
            self._current = index
            if call_id:
                if call.id is None:
                    call.id = call_id
                elif call_id != call.id:
                    call.id += call_id
            if name and not call.name:
                call.name = name
            if args:
                call.parts.append(args)
            if index == self._current and not call.completed and raw is not None and call.name:
                self._last_raw = raw
                self._current_parts = call.parts
            else:
                self._last_raw = _NO_CALL
            if self.emit_partials:
                events.append(PartialToolCall(index, call_id, name, args))

    def _start(self, events: list[StreamEvent]) -> int:
        current = self._current
        if current is not None and not self._calls[current].completed:
            self._complete(current, events)
        self._calls.append(_Call())
        self._current = len(self._calls) - 1
        return self._current

    def _request(self, index: int) -> ToolExecutionRequest:
        call = self._calls[index]
        if call.request is not None:
            return call.request
        # a stand-in id is not kept: the call may still be waiting for its own
        args = "".join(call.parts)
        return ToolExecutionRequest(
            id=call.id or f"call_{uuid.uuid4().hex[:24]}",
            name=call.name or "",
            arguments=args if args.strip() else "{}",
        )

    def _complete(self, index: int, events: list[StreamEvent]) -> None:
        call = self._calls[index]
        call.request = self._request(index)
        call.completed = True
        call.parts = []  # the joined arguments live in the request now
        events.append(CompleteToolCall(index, call.request))

    def _complete_all(self, events: list[StreamEvent]) -> None:
        self._last_raw = _NO_CALL
        for index, call in enumerate(self._calls):
            if not call.completed:
                self._complete(index, events)

    @property
    def requests(self) -> list[ToolExecutionRequest]:
        """The tool calls aggregated so far, in index order."""
        return [self._request(i) for i in range(len(self._calls))]

    def finish(self) -> list[StreamEvent]:
        """The stream ended: complete the open calls and emit `ResponseCompleted`."""
        if not self.done and self.finish_reason is None:
            raise self._protocol(
                "the stream ended before the response was complete (no finish_reason, no [DONE])"
            )
        events: list[StreamEvent] = []
        self._complete_all(events)
        events.append(ResponseCompleted(self.response()))
        return events

    def response(self) -> ChatResponse:
        """The aggregated `ChatResponse`."""
        requests = self.requests
        reasoning = "".join(self.reasoning) or None
        attributes: dict[str, Any] = {}
        if reasoning and self.reasoning_field:
            attributes["openai"] = {"reasoning_field": self.reasoning_field}
        message = AiMessage(
            "".join(self.text) or None,
            tool_execution_requests=requests,
            reasoning=reasoning,
            attributes=attributes,
        )
        metadata: dict[str, Any] = {}
        if self.created is not None:
            metadata["created"] = self.created
        if self.system_fingerprint:
            metadata["system_fingerprint"] = self.system_fingerprint
        if self.usage:
            metadata["usage"] = self.usage
        return ChatResponse(
            message,
            finish_reason=_finish_reason(self.finish_reason, bool(requests)),
            usage=_usage(self.usage),
            model=self.model,
            id=self.id,
            metadata=metadata,
        )


class OpenAIChatModel(HttpChatModel):
    """Chat Completions (`POST {base_url}/chat/completions`).

    `base_url` ends with the API version (default `https://api.openai.com/v1`); the key
    defaults to `OPENAI_API_KEY` and is sent as `Authorization: Bearer`. `strict_tools` is the
    strict default for cards whose `strict` is None (None: strict when the schema allows it).
    `stream_usage` asks for usage in the last stream chunk (`stream_options.include_usage`).
    `send_reasoning` sends the received `reasoning_content` back on assistant turns (DeepSeek
    thinking mode with tools needs it; other servers may reject it).
    `tool_calling`: `"native"` (the API's tool calls), `"constrained"` (tools described in
    the system prompt, calls through a `json_schema` response format; for models that do
    not make native calls; `constrained=` holds its settings and repeated-call policy), or
    `"auto"` (probe the endpoint once, see `probe_capabilities`, and pick). See
    docs/local-model.md.
    """

    provider = PROVIDER
    supports_response_format = True
    api_key_env: tuple[str, ...] = ("OPENAI_API_KEY",)
    default_base_url: str | None = DEFAULT_BASE_URL

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        strict_tools: bool | None = None,
        tool_calling: Literal["native", "constrained", "auto"] = "native",
        stream_usage: bool = True,
        send_reasoning: bool = False,
        organization: str | None = None,
        project: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx2.Timeout | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_parameters: ChatRequestParameters | None = None,
        http_client: httpx2.Client | None = None,
        async_http_client: httpx2.AsyncClient | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
        constrained: ConstrainedToolCalling | None = None,
    ) -> None:
        self._set_tool_calling(tool_calling, constrained)
        key = api_key if api_key is not None else os.environ.get("OPENAI_API_KEY")
        all_headers = openai_headers(key, organization, project, headers)
        super().__init__(
            model=model,
            api_key=key,
            base_url=base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL,
            headers=all_headers,
            timeout=timeout,
            max_retries=max_retries,
            default_parameters=default_parameters,
            http_client=http_client,
            async_http_client=async_http_client,
            max_response_bytes=max_response_bytes,
        )
        self.strict_tools = strict_tools
        self.stream_usage = stream_usage
        self.send_reasoning = send_reasoning

    def _url(self, model: str, stream: bool) -> str:
        return f"{self.base_url}/chat/completions"

    # request --------------------------------------------------------------------------------
    def _body(
        self, request: ChatRequest, params: ChatRequestParameters, model: str, stream: bool
    ) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": model,
            "messages": self._messages(request.messages, model),
        }
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.top_p is not None:
            body["top_p"] = params.top_p
        if params.max_tokens is not None:
            body["max_tokens"] = params.max_tokens
        if params.stop:
            body["stop"] = list(params.stop)
        tools = params.tools or ()
        if tools:
            body["tools"] = openai_tools(tools, self.strict_tools)
        choice = params.tool_choice
        if choice is not None:
            if not tools:
                if choice.forces or choice.allowed is not None:
                    raise self.unsupported("tool_choice", f"{choice!r} needs tools in the request")
            else:
                body["tool_choice"] = self._tool_choice(choice, tools)
        if params.parallel_tool_calls is not None and tools:
            body["parallel_tool_calls"] = params.parallel_tool_calls
        if params.response_format is not None:
            body["response_format"] = self._response_format(params)
        if stream:
            body["stream"] = True
            if self.stream_usage:
                body["stream_options"] = {"include_usage": True}
        return body

    def _response_format(self, params: ChatRequestParameters) -> dict[str, Any]:
        """Structured output: `{"type": "json_schema", "json_schema": {name, schema,
        strict}}`, strict (in OpenAI's strict form) when the schema allows it and the output
        schema does not say `strict=False`."""
        output = self.output_schema(params)
        assert output is not None
        schema, strict = output.json_schema, False
        if output.strict is not False and not _optional_not_nullable(schema):
            try:
                schema, strict = to_openai_strict(schema), True
            except SchemaError:
                pass
        spec: dict[str, Any] = {"name": output.name, "schema": schema, "strict": strict}
        description = output.json_schema.get("description")
        if isinstance(description, str) and description:
            spec["description"] = description
        return {"type": "json_schema", "json_schema": spec}

    def _tool_choice(self, choice: ToolChoice, tools: tuple[Any, ...]) -> Any:
        if choice.mode == "tool":
            check_named(self, choice, tools)
            return {"type": "function", "function": {"name": choice.name}}
        if choice.allowed is not None:
            check_named(self, choice, tools)
            return {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": choice.mode,
                    "tools": [
                        {"type": "function", "function": {"name": n}} for n in choice.allowed
                    ],
                },
            }
        return choice.mode

    def _messages(self, messages: Any, model: str) -> list[dict[str, Any]]:
        """The wire messages. Media from tool results goes into one `user` message after
        the turn's tool messages (a tool message takes text only)."""
        out: list[dict[str, Any]] = []
        follow: list[dict[str, Any]] = []
        for message in messages:
            if isinstance(message, ToolExecutionResultMessage):
                tool, media = openai_chat_tool_result(message, model)
                out.append(tool)
                follow += media
                continue
            if follow:
                out.append({"role": "user", "content": follow})
                follow = []
            out.append(self._message(message, model))
        if follow:
            out.append({"role": "user", "content": follow})
        return out

    def _message(self, message: Any, model: str | None = None) -> dict[str, Any]:
        if isinstance(message, SystemMessage):
            return {"role": "system", "content": message.text}
        if isinstance(message, UserMessage):
            content = self._user_content(message, model or self.model)
            out: dict[str, Any] = {"role": "user", "content": content}
            if message.name:
                out["name"] = message.name
            return out
        if isinstance(message, AiMessage):
            out = {"role": "assistant", "content": message.text}
            if message.tool_execution_requests:
                out["tool_calls"] = [
                    {
                        "id": call.id,
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.arguments},
                    }
                    for call in message.tool_execution_requests
                ]
            elif message.text is None:
                out["content"] = ""
            if self.send_reasoning and message.reasoning:
                field = (message.attributes.get("openai") or {}).get("reasoning_field")
                if field == "reasoning_content":
                    out["reasoning_content"] = message.reasoning
            return out
        if isinstance(message, ToolExecutionResultMessage):
            return openai_chat_tool_result(message, self.model)[0]
        raise TypeError(f"not a chat message: {type(message).__name__}")

    def _user_content(self, message: UserMessage, model: str) -> Any:
        if not message.contents:
            return message.text or ""
        parts: list[dict[str, Any]] = []
        if message.text:
            parts.append({"type": "text", "text": message.text})
        parts.extend(openai_chat_content(p, model, self.unsupported) for p in message.contents)
        return parts

    # response -------------------------------------------------------------------------------
    def _parse(self, data: Any) -> ChatResponse:
        if not isinstance(data, dict):
            raise self._http.protocol_error("the response is not a JSON object")
        if data.get("error"):
            raise self._http.stream_error(data["error"])
        choices = data.get("choices") or []
        if not choices:
            raise self._http.protocol_error("the response has no choices")
        choice = choices[0]
        raw = choice.get("message") or {}
        requests = []
        for call in raw.get("tool_calls") or ():
            function = call.get("function") or {}
            args = _arguments_text(function.get("arguments"))
            kwargs: dict[str, Any] = {
                "name": function.get("name") or "",
                "arguments": args if args.strip() else "{}",
            }
            if call.get("id"):
                kwargs["id"] = call["id"]
            requests.append(ToolExecutionRequest(**kwargs))
        reasoning = None
        attributes: dict[str, Any] = {}
        for field in ("reasoning_content", "reasoning"):
            value = raw.get(field)
            if value and isinstance(value, str):
                reasoning = value
                attributes["openai"] = {"reasoning_field": field}
                break
        message = AiMessage(
            raw.get("content") or None,
            tool_execution_requests=requests,
            reasoning=reasoning,
            attributes=attributes,
        )
        metadata: dict[str, Any] = {}
        for key in ("created", "system_fingerprint", "usage"):
            if data.get(key) is not None:
                metadata[key] = data[key]
        if raw.get("refusal"):
            metadata["refusal"] = raw["refusal"]
        return ChatResponse(
            message,
            finish_reason=_finish_reason(choice.get("finish_reason"), bool(requests)),
            usage=_usage(data.get("usage")),
            model=data.get("model"),
            id=data.get("id"),
            metadata=metadata,
        )

    def _parser(self) -> OpenAIStreamAggregator:
        return OpenAIStreamAggregator(self._http)


class AzureOpenAIChatModel(AzureDeployment, OpenAIChatModel):
    """Chat Completions on Azure OpenAI: `deployment` (also sent as `model`), `endpoint`
    (else `AZURE_OPENAI_ENDPOINT`), `api_version` (else `OPENAI_API_VERSION`, else
    `2024-10-21`; `"v1"` for Azure's version-less API), and `api_key` (else
    `AZURE_OPENAI_API_KEY`, sent as `api-key`) or `token_provider` (Microsoft Entra ID). Every
    other option is `OpenAIChatModel`'s. See docs/providers.md."""

    azure_operation = "chat/completions"
    azure_default_version = AZURE_CHAT_API_VERSION
