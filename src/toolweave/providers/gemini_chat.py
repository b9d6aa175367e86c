"""`GeminiChatModel`: the Gemini API `generateContent` / `streamGenerateContent`."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Mapping
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
from ..dialects import gemini_function_declarations, to_gemini_json_schema, to_gemini_openapi
from ..errors import AuthenticationError, ProviderError, SchemaError
from ..execution.requests import ToolExecutionRequest
from ..schema.output import OutputSchema
from ._allowed import check_named
from ._base import HttpChatModel, arguments_object, compact_json
from ._http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    HttpTransport,
    decode_json,
    json_failure,
)
from ._sse import SSEEvent
from .constrained import ConstrainedToolCalling
from .tool_results import gemini_function_response, gemini_part

__all__ = ["GENERATED_ID_PREFIX", "GeminiChatModel", "GeminiStreamParser"]

DEFAULT_BASE_URL = "https://generativelanguage.googleapis.com"
PROVIDER = "gemini"
GENERATED_ID_PREFIX = "twgen_"
"""Ids we make up for function calls that arrive without one; never sent to Gemini."""

_NO_SCHEMA_WITH_TOOLS = re.compile(r"^gemini-(1|2)[.-]")
"""Models that answer 400 "Function calling with a response mime type: 'application/json' is
unsupported" when a response schema and function declarations come together."""

_FINISH = {
    "STOP": FinishReason.STOP,
    "MAX_TOKENS": FinishReason.LENGTH,
    "SAFETY": FinishReason.CONTENT_FILTER,
    "RECITATION": FinishReason.CONTENT_FILTER,
    "BLOCKLIST": FinishReason.CONTENT_FILTER,
    "PROHIBITED_CONTENT": FinishReason.CONTENT_FILTER,
    "SPII": FinishReason.CONTENT_FILTER,
    "IMAGE_SAFETY": FinishReason.CONTENT_FILTER,
}


def _finish_reason(raw: str | None, has_calls: bool) -> FinishReason | None:
    if raw is None:
        return None
    reason = _FINISH.get(raw, FinishReason.OTHER)
    if has_calls and reason is FinishReason.STOP:
        return FinishReason.TOOL_EXECUTION
    return reason


def _usage(raw: Mapping[str, Any] | None) -> TokenUsage | None:
    if not raw:
        return None
    prompt = raw.get("promptTokenCount")
    tool_prompt = raw.get("toolUsePromptTokenCount")
    candidates = raw.get("candidatesTokenCount")
    thoughts = raw.get("thoughtsTokenCount")
    input_tokens = (
        None if prompt is None and tool_prompt is None else (prompt or 0) + (tool_prompt or 0)
    )
    output_tokens = (
        None if candidates is None and thoughts is None else (candidates or 0) + (thoughts or 0)
    )
    return TokenUsage(
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        total_tokens=raw.get("totalTokenCount"),
    )


class GeminiStreamParser:
    """Aggregates `GenerateContentResponse` chunks (one per SSE event, or a whole
    non-streaming response) into stream events and a final response.

    Text parts are merged (thought parts become reasoning); function calls arrive whole, so
    each yields a `PartialToolCall` and a `CompleteToolCall` at once; calls without an id get
    `twgen_<hex>_<n>` (stable for the response). The model's parts, with their
    `thoughtSignature`s, are kept in `attributes["gemini"]["parts"]` to be sent back verbatim.
    """

    def __init__(self, transport: HttpTransport) -> None:
        self._transport = transport
        self._parts: list[dict[str, Any]] = []
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._requests: list[ToolExecutionRequest] = []
        self._prefix = f"{GENERATED_ID_PREFIX}{uuid.uuid4().hex[:12]}_"
        self._finish: str | None = None
        self._block: str | None = None
        self._usage: dict[str, Any] | None = None
        self._id: str | None = None
        self._model: str | None = None

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Consume one SSE event."""
        if not event.data.strip():
            return []
        try:
            data = decode_json(event.data)
        except ValueError as e:
            raise self._transport.protocol_error(
                f"a stream chunk is {json_failure(e)}: {event.data[:200]!r}"
            ) from None
        if isinstance(data, list):  # a JSON array stream (alt=json); accept it too
            events: list[StreamEvent] = []
            for item in data:
                events.extend(self.feed_chunk(item))
            return events
        return self.feed_chunk(data)

    def feed_chunk(self, data: Any) -> list[StreamEvent]:
        """Consume one decoded `GenerateContentResponse`."""
        if not isinstance(data, dict):
            return []
        if data.get("error"):
            raise self._transport.stream_error(data["error"])
        events: list[StreamEvent] = []
        self._id = self._id or data.get("responseId")
        self._model = self._model or data.get("modelVersion")
        if data.get("usageMetadata"):
            self._usage = data["usageMetadata"]
        feedback = data.get("promptFeedback") or {}
        if feedback.get("blockReason"):
            self._block = feedback["blockReason"]
        candidates = data.get("candidates") or ()
        if not candidates:
            return events
        candidate = candidates[0]
        for part in (candidate.get("content") or {}).get("parts") or ():
            self._part(part, events)
        if candidate.get("finishReason"):
            self._finish = candidate["finishReason"]
        return events

    def _part(self, part: dict[str, Any], events: list[StreamEvent]) -> None:
        if "functionCall" in part:
            call = part["functionCall"] or {}
            index = len(self._requests)
            call_id = call.get("id") or f"{self._prefix}{index}"
            args = compact_json(call.get("args") or {})
            request = ToolExecutionRequest(id=call_id, name=call.get("name") or "", arguments=args)
            self._requests.append(request)
            self._parts.append(dict(part))
            events.append(PartialToolCall(index, call_id, request.name, args))
            events.append(CompleteToolCall(index, request))
            return
        if "text" in part:
            text = part.get("text") or ""
            thought = bool(part.get("thought"))
            signature = part.get("thoughtSignature")
            if text:
                if thought:
                    self._reasoning.append(text)
                    events.append(ReasoningDelta(text))
                else:
                    self._text.append(text)
                    events.append(TextDelta(text))
            last = self._parts[-1] if self._parts else None
            if (
                last is not None
                and "text" in last
                and bool(last.get("thought")) == thought
                and not last.get("thoughtSignature")
            ):
                last["text"] += text
                if signature:
                    last["thoughtSignature"] = signature
            elif text or signature:
                self._parts.append(dict(part))
            return
        if part.get("thoughtSignature") and len(part) == 1 and self._parts:
            # A bare signature part closing a streamed text.
            last = self._parts[-1]
            if "text" in last and not last.get("thoughtSignature"):
                last["thoughtSignature"] = part["thoughtSignature"]
                return
        self._parts.append(dict(part))

    def finish(self) -> list[StreamEvent]:
        """Emit `ResponseCompleted` (raises when no chunk carried a finish reason)."""
        if self._finish is None and self._block is None:
            raise self._transport.protocol_error(
                "the stream ended before a finishReason (truncated response)"
            )
        return [ResponseCompleted(self.response())]

    def response(self) -> ChatResponse:
        """The aggregated `ChatResponse`."""
        attributes: dict[str, Any] = {}
        if self._parts:
            attributes["gemini"] = {"parts": self._parts}
        message = AiMessage(
            "".join(self._text) or None,
            tool_execution_requests=self._requests,
            reasoning="".join(self._reasoning) or None,
            attributes=attributes,
        )
        finish = _finish_reason(self._finish, bool(self._requests))
        metadata: dict[str, Any] = {}
        if self._finish:
            metadata["finish_reason"] = self._finish
        if self._block:
            metadata["block_reason"] = self._block
            finish = finish or FinishReason.CONTENT_FILTER
        if self._usage:
            metadata["usage"] = self._usage
        return ChatResponse(
            message,
            finish_reason=finish,
            usage=_usage(self._usage),
            model=self._model,
            id=self._id,
            metadata=metadata,
        )


class GeminiChatModel(HttpChatModel):
    """The Gemini API: `POST {base_url}/{api_version}/models/{model}:generateContent`
    (`:streamGenerateContent?alt=sse` when streaming).

    `base_url` is the host root (default `https://generativelanguage.googleapis.com`); the
    key defaults to `GEMINI_API_KEY` (then `GOOGLE_API_KEY`) and travels in the
    `x-goog-api-key` header, never in the URL. `schema_mode` picks the function-declaration
    form: `"openapi"` (`parameters`, the sanitised OpenAPI subset) or `"json_schema"`
    (`parametersJsonSchema`); for `response_format` it picks `responseSchema` or
    `responseJsonSchema` alike.

    `tool_calling`: `"native"` (function calling), `"constrained"` (tools described in the
    system instruction, calls through `responseSchema`; for models without function calling,
    such as Gemma on the Gemini API; `constrained=` holds its settings and repeated-call
    policy), or `"auto"` (probe the model once, see `probe_capabilities`, and pick).
    """

    provider = PROVIDER
    supports_response_format = True
    api_key_env = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    default_base_url = DEFAULT_BASE_URL

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        schema_mode: Literal["openapi", "json_schema"] = "openapi",
        api_version: str = "v1beta",
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx2.Timeout | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_parameters: ChatRequestParameters | None = None,
        http_client: httpx2.Client | None = None,
        async_http_client: httpx2.AsyncClient | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
        tool_calling: Literal["native", "constrained", "auto"] = "native",
        constrained: ConstrainedToolCalling | None = None,
    ) -> None:
        self._set_tool_calling(tool_calling, constrained)
        if schema_mode not in ("openapi", "json_schema"):
            raise ValueError(f"schema_mode must be 'openapi' or 'json_schema', got {schema_mode!r}")
        key = api_key
        if key is None:
            key = os.environ.get("GEMINI_API_KEY") or os.environ.get("GOOGLE_API_KEY")
        all_headers: dict[str, str] = {"accept": "application/json"}
        if key:
            all_headers["x-goog-api-key"] = key
        all_headers.update(headers or {})
        super().__init__(
            model=model.removeprefix("models/"),
            api_key=key,
            base_url=base_url or DEFAULT_BASE_URL,
            headers=all_headers,
            timeout=timeout,
            max_retries=max_retries,
            default_parameters=default_parameters,
            http_client=http_client,
            async_http_client=async_http_client,
            max_response_bytes=max_response_bytes,
        )
        self.schema_mode = schema_mode
        self.api_version = api_version

    def _url(self, model: str, stream: bool) -> str:
        model = model.removeprefix("models/")
        base = f"{self.base_url}/{self.api_version}/models/{model}"
        return f"{base}:streamGenerateContent?alt=sse" if stream else f"{base}:generateContent"

    def _prepare(self, request: ChatRequest, stream: bool) -> tuple[str, dict[str, Any]]:
        self.check_api_key()
        body = self.build_request_body(request, stream=stream)
        params = self.default_parameters.override(request.parameters)
        # The model travels in the URL only.
        return self._url(params.model or self.model, stream), body

    def _error_class(self, status: int, body: str) -> type[ProviderError] | None:
        if status == 400 and "API_KEY_INVALID" in body:
            return AuthenticationError
        return None

    # request --------------------------------------------------------------------------------
    def _body(
        self, request: ChatRequest, params: ChatRequestParameters, model: str, stream: bool
    ) -> dict[str, Any]:
        if params.parallel_tool_calls is False:
            raise self.unsupported(
                "parallel_tool_calls=False",
                "the Gemini API has no switch to disable parallel calls",
            )
        system, contents = self._contents(request.messages, model)
        body: dict[str, Any] = {"contents": contents}
        if system:
            body["systemInstruction"] = {"parts": system}
        tools = params.tools or ()
        if tools:
            body["tools"] = [
                {"functionDeclarations": gemini_function_declarations(tools, self.schema_mode)}
            ]
            if params.tool_choice is not None:
                body["toolConfig"] = {
                    "functionCallingConfig": self._tool_choice(params.tool_choice, tools)
                }
        elif params.tool_choice is not None and (
            params.tool_choice.forces or params.tool_choice.allowed is not None
        ):
            raise self.unsupported(
                "tool_choice", f"{params.tool_choice!r} needs tools in the request"
            )
        config: dict[str, Any] = {}
        if params.temperature is not None:
            config["temperature"] = params.temperature
        if params.top_p is not None:
            config["topP"] = params.top_p
        if params.max_tokens is not None:
            config["maxOutputTokens"] = params.max_tokens
        if params.stop:
            config["stopSequences"] = list(params.stop)
        output = self.output_schema(params)
        if output is not None:
            config.update(self._response_schema(output, model, bool(tools)))
        if config:
            body["generationConfig"] = config
        return body

    def _response_schema(self, output: OutputSchema, model: str, tools: bool) -> dict[str, Any]:
        """`responseMimeType` plus `responseSchema` (openapi) or `responseJsonSchema`."""
        model = model.removeprefix("models/")
        if tools and _NO_SCHEMA_WITH_TOOLS.match(model):
            raise self.unsupported(
                "response_format",
                f"{model} does not accept a response schema together with function "
                "declarations (HTTP 400 'Function calling with a response mime type: "
                "application/json is unsupported'); use a Gemini 3 model or call without tools",
            )
        config: dict[str, Any] = {"responseMimeType": "application/json"}
        if self.schema_mode == "json_schema":
            config["responseJsonSchema"] = to_gemini_json_schema(output.json_schema)
            return config
        try:
            config["responseSchema"] = _openapi_response_schema(output.json_schema)
        except SchemaError as e:
            raise self.unsupported(
                "response_format",
                f"{e.message} (schema_mode='openapi'; schema_mode='json_schema' sends "
                "responseJsonSchema, which can express it)",
            ) from None
        return config

    def _tool_choice(self, choice: ToolChoice, tools: tuple[Any, ...]) -> dict[str, Any]:
        if choice.allowed is not None:
            check_named(self, choice, tools)
            # AUTO takes no allowedFunctionNames; VALIDATED is AUTO with the calls limited to
            # them (and checked by constrained decoding)
            mode = "ANY" if choice.mode == "required" else "VALIDATED"
            return {"mode": mode, "allowedFunctionNames": list(choice.allowed)}
        if choice.mode == "auto":
            return {"mode": "AUTO"}
        if choice.mode == "required":
            return {"mode": "ANY"}
        if choice.mode == "none":
            return {"mode": "NONE"}
        check_named(self, choice, tools)
        return {"mode": "ANY", "allowedFunctionNames": [choice.name]}

    def _contents(
        self, messages: Any, model: str | None = None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        system: list[dict[str, Any]] = []
        contents: list[dict[str, Any]] = []
        follow: list[dict[str, Any]] = []  # media of the turn's results, after its responses
        for message in messages:
            if isinstance(message, SystemMessage):
                system.append({"text": message.text})
                continue
            if isinstance(message, ToolExecutionResultMessage):
                response, media = gemini_function_response(
                    message, model or self.model, GENERATED_ID_PREFIX
                )
                role, parts = "user", [response]
                follow += media
            else:
                if follow:
                    contents[-1]["parts"].extend(follow)
                    follow = []
                if isinstance(message, AiMessage):
                    role, parts = "model", self._model_parts(message)
                elif isinstance(message, UserMessage):
                    role, parts = "user", self._user_parts(message)
                else:
                    raise TypeError(f"not a chat message: {type(message).__name__}")
            if not parts:
                continue
            if contents and contents[-1]["role"] == role:
                contents[-1]["parts"].extend(parts)
            else:
                contents.append({"role": role, "parts": parts})
        if follow:
            contents[-1]["parts"].extend(follow)
        return system, contents

    def _model_parts(self, message: AiMessage) -> list[dict[str, Any]]:
        kept = (message.attributes.get("gemini") or {}).get("parts")
        if isinstance(kept, list) and kept:
            kept_calls = [
                p["functionCall"].get("name")
                for p in kept
                if isinstance(p, Mapping) and "functionCall" in p
            ]
            if kept_calls == [c.name for c in message.tool_execution_requests]:
                return [dict(p) for p in kept]
        parts: list[dict[str, Any]] = []
        if message.text:
            parts.append({"text": message.text})
        for call in message.tool_execution_requests:
            function_call: dict[str, Any] = {
                "name": call.name,
                "args": arguments_object(call.arguments),
            }
            if not call.id.startswith(GENERATED_ID_PREFIX):
                function_call["id"] = call.id
            parts.append({"functionCall": function_call})
        return parts

    def _user_parts(self, message: UserMessage) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if message.text:
            parts.append({"text": message.text})
        parts.extend(gemini_part(part, self.unsupported) for part in message.contents)
        return parts

    # response -------------------------------------------------------------------------------
    def _parse(self, data: Any) -> ChatResponse:
        if not isinstance(data, dict):
            raise self._http.protocol_error("the response is not a JSON object")
        parser = GeminiStreamParser(self._http)
        parser.feed_chunk(data)
        if not data.get("candidates") and parser._block is None:
            raise self._http.protocol_error("the response has no candidates")
        return parser.response()

    def _parser(self) -> GeminiStreamParser:
        return GeminiStreamParser(self._http)


def _openapi_response_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI-subset `responseSchema` of any JSON schema (the root need not be an
    object), with `propertyOrdering` so the model writes fields in declaration order."""
    inner = {k: v for k, v in schema.items() if k not in ("$defs", "definitions", "$schema")}
    wrapper: dict[str, Any] = {"type": "object", "properties": {"value": inner}}
    for key in ("$defs", "definitions"):
        if key in schema:
            wrapper[key] = schema[key]
    out: dict[str, Any] = to_gemini_openapi(wrapper)["properties"]["value"]
    _order(out)
    return out


def _order(schema: Any) -> None:
    if not isinstance(schema, dict):
        return
    props = schema.get("properties")
    if isinstance(props, dict):
        if len(props) > 1:
            schema.setdefault("propertyOrdering", list(props))
        for prop in props.values():
            _order(prop)
    _order(schema.get("items"))
    for branch in schema.get("anyOf") or ():
        _order(branch)
