"""`AnthropicChatModel`: the Anthropic Messages API."""

from __future__ import annotations

import os
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
from ..chat.response import PAUSED_TURN, ChatResponse, FinishReason, TokenUsage
from ..dialects import anthropic_tools, to_anthropic_strict
from ..errors import SchemaError, UnsupportedOptionError
from ..execution.requests import ToolExecutionRequest
from ..schema.output import OutputSchema
from ._allowed import check_named, restrict_to_allowed
from ._answer import ANSWER_DESCRIPTION, Answer, answer_schema, answer_text
from ._base import HttpChatModel, arguments_object, compact_json
from ._http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    HttpTransport,
    decode_json,
    json_failure,
)
from ._sse import SSEEvent
from .tool_results import anthropic_content, anthropic_tool_result

__all__ = ["ANSWER_TOOL", "AnthropicChatModel", "AnthropicStreamParser"]

DEFAULT_BASE_URL = "https://api.anthropic.com"
ANTHROPIC_VERSION = "2023-06-01"
PROVIDER = "anthropic"
ANSWER_TOOL = "final_answer"
"""The tool through which Anthropic gives a structured answer (`response_format`)."""

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_EXECUTION,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "refusal": FinishReason.CONTENT_FILTER,
}
_THINKING_TYPES = ("thinking", "redacted_thinking")
_OWN_TYPES = ("text", "tool_use", *_THINKING_TYPES)
"""Blocks toolweave rebuilds from the message; any other block (a server tool's use and
result) is kept and sent back verbatim, in its place."""
TOOL_SEARCH_TOOLS = {
    "bm25": {"type": "tool_search_tool_bm25_20251119", "name": "tool_search_tool_bm25"},
    "regex": {"type": "tool_search_tool_regex_20251119", "name": "tool_search_tool_regex"},
}
"""Anthropic's tool search tools (`AnthropicChatModel(tool_search=...)`): natural-language
queries (BM25) or regular expressions, over the deferred tools' names and descriptions."""


def _finish_reason(raw: str | None) -> FinishReason | None:
    return None if raw is None else _FINISH.get(raw, FinishReason.OTHER)


def _answer_finish(raw: str | None, answered: bool, has_calls: bool) -> FinishReason | None:
    """A response whose only tool call is the answer tool is a final answer: STOP."""
    reason = _finish_reason(raw)
    if answered and not has_calls and reason is FinishReason.TOOL_EXECUTION:
        return FinishReason.STOP
    return reason


def _usage(raw: Mapping[str, Any] | None) -> TokenUsage | None:
    if not raw:
        return None
    inputs = [
        raw.get(k)
        for k in ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens")
    ]
    known = [v for v in inputs if isinstance(v, int)]
    input_tokens = sum(known) if known else None
    output_tokens = raw.get("output_tokens")
    total = None
    if input_tokens is not None or output_tokens is not None:
        total = (input_tokens or 0) + (output_tokens or 0)
    return TokenUsage(input_tokens=input_tokens, output_tokens=output_tokens, total_tokens=total)


def _keep_block(block: Mapping[str, Any]) -> dict[str, Any]:
    """The thinking block as it must be sent back (verbatim fields)."""
    if block.get("type") == "thinking":
        return {
            "type": "thinking",
            "thinking": block.get("thinking", ""),
            "signature": block.get("signature", ""),
        }
    return {"type": "redacted_thinking", "data": block.get("data", "")}


def _input_json(raw: Any) -> str:
    if not raw:
        return "{}"
    return compact_json(raw)


def _attributes(thinking: list[dict[str, Any]], content: list[dict[str, Any]]) -> dict[str, Any]:
    """The message's `anthropic` attribute: its thinking blocks, and with a server tool's
    blocks among them (tool search) all its blocks in order, as `_assistant_blocks` sends
    them back (text and calls as the message then holds them)."""
    kept: dict[str, Any] = {"thinking": thinking} if thinking else {}
    if any(block.get("type") not in _OWN_TYPES for block in content):
        kept["content"] = content
    return {"anthropic": kept} if kept else {}


class _Block:
    __slots__ = ("data", "kind", "parts", "tool_index")

    def __init__(self, kind: str, data: dict[str, Any], tool_index: int | None) -> None:
        self.kind = kind
        self.data = data
        self.parts: list[str] = []
        self.tool_index = tool_index


class AnthropicStreamParser:
    """Turns Messages API stream events into stream events.

    Tool calls get sequential indexes 0, 1, ... in order of their `content_block_start`,
    independent of the content-block index; `input_json_delta` fragments are appended per
    block; a tool call completes at its `content_block_stop` (empty input → `"{}"`).
    Thinking blocks (text + signature, or redacted data) are kept for the next turn.
    With `answer` (structured output), the answer tool's `input_json_delta` fragments become
    `TextDelta`s (a wrapped answer comes whole at its `content_block_stop`) and the answer is
    the message text, not a tool call; text written before it is dropped.
    """

    def __init__(self, transport: HttpTransport, answer: Answer | None = None) -> None:
        self._transport = transport
        self._answer = answer
        self._answered = False
        self._blocks: dict[int, _Block] = {}
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._thinking: list[dict[str, Any]] = []
        self._content: dict[int, dict[str, Any]] = {}  # content-block index -> kept block
        self._requests: dict[int, ToolExecutionRequest] = {}
        self._tool_count = 0
        self._usage: dict[str, Any] = {}
        self._stop_reason: str | None = None
        self._stop_sequence: str | None = None
        self._id: str | None = None
        self._model: str | None = None
        self._done = False

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Consume one SSE event."""
        if not event.data.strip():
            return []
        try:
            data = decode_json(event.data)
        except ValueError as e:
            raise self._transport.protocol_error(
                f"a stream event is {json_failure(e)}: {event.data[:200]!r}"
            ) from None
        kind = data.get("type") if isinstance(data, dict) else None
        if event.event == "error" or kind == "error":
            raise self._transport.stream_error(
                data.get("error", data) if isinstance(data, dict) else data
            )
        if not isinstance(data, dict):
            return []
        events: list[StreamEvent] = []
        if kind == "message_start":
            message = data.get("message") or {}
            self._id = message.get("id")
            self._model = message.get("model")
            self._usage.update(
                {k: v for k, v in (message.get("usage") or {}).items() if v is not None}
            )
        elif kind == "content_block_start":
            self._start(data.get("index", 0), data.get("content_block") or {}, events)
        elif kind == "content_block_delta":
            self._delta(data.get("index", 0), data.get("delta") or {}, events)
        elif kind == "content_block_stop":
            self._stop(data.get("index", 0), events)
        elif kind == "message_delta":
            delta = data.get("delta") or {}
            if delta.get("stop_reason"):
                self._stop_reason = delta["stop_reason"]
            if delta.get("stop_sequence"):
                self._stop_sequence = delta["stop_sequence"]
            self._usage.update(
                {k: v for k, v in (data.get("usage") or {}).items() if v is not None}
            )
        elif kind == "message_stop":
            self._done = True
        return events

    def _start(self, index: int, block: dict[str, Any], events: list[StreamEvent]) -> None:
        kind = block.get("type", "")
        tool_index = None
        if (
            kind == "tool_use"
            and self._answer is not None
            and block.get("name") == self._answer.name
        ):
            kind = "answer"
            if not self._answered:
                self._text.clear()
        elif kind == "tool_use":
            tool_index = self._tool_count
            self._tool_count += 1
            events.append(PartialToolCall(tool_index, block.get("id"), block.get("name"), ""))
        buf = self._blocks[index] = _Block(kind, dict(block), tool_index)
        if kind == "text" and block.get("text"):
            buf.parts.append(block["text"])
            self._text.append(block["text"])
            events.append(TextDelta(block["text"]))
        elif kind == "thinking" and block.get("thinking"):
            buf.parts.append(block["thinking"])
            self._reasoning.append(block["thinking"])
            events.append(ReasoningDelta(block["thinking"]))

    def _delta(self, index: int, delta: dict[str, Any], events: list[StreamEvent]) -> None:
        buf = self._blocks.get(index)
        if buf is None:
            raise self._transport.protocol_error(f"a delta for unknown content block {index}")
        kind = delta.get("type")
        if kind == "text_delta":
            text = delta.get("text") or ""
            if text:
                buf.parts.append(text)
                self._text.append(text)
                events.append(TextDelta(text))
        elif kind == "input_json_delta":
            piece = delta.get("partial_json") or ""
            if piece and buf.kind == "answer":
                buf.parts.append(piece)
                if self._answer is not None and not self._answer.wrapped:
                    self._text.append(piece)
                    events.append(TextDelta(piece))
            elif piece and buf.tool_index is not None:
                buf.parts.append(piece)
                events.append(PartialToolCall(buf.tool_index, None, None, piece))
            elif piece and buf.kind == "server_tool_use":
                buf.parts.append(piece)
        elif kind == "thinking_delta":
            text = delta.get("thinking") or ""
            if text:
                buf.parts.append(text)
                self._reasoning.append(text)
                events.append(ReasoningDelta(text))
        elif kind == "signature_delta":
            buf.data["signature"] = buf.data.get("signature", "") + (delta.get("signature") or "")

    def _stop(self, index: int, events: list[StreamEvent]) -> None:
        buf = self._blocks.get(index)
        if buf is None:
            return
        if buf.kind == "answer" and self._answer is not None:
            self._answered = True
            raw = "".join(buf.parts)
            if not raw.strip():
                # A proxy may put the whole input in content_block_start.
                text = answer_text(buf.data.get("input"), self._answer.wrapped)
            elif self._answer.wrapped:
                text = answer_text(raw, True)
            else:
                return
            self._text.append(text)
            events.append(TextDelta(text))
        elif buf.kind == "tool_use" and buf.tool_index is not None:
            args = "".join(buf.parts)
            if not args.strip():
                # A proxy may put the whole input in content_block_start.
                args = _input_json(buf.data.get("input"))
            request = ToolExecutionRequest(
                id=buf.data.get("id") or f"toolu_{buf.tool_index}",
                name=buf.data.get("name") or "",
                arguments=args,
            )
            self._requests[buf.tool_index] = request
            self._content[index] = {"type": "tool_use", "id": request.id}
            events.append(CompleteToolCall(buf.tool_index, request))
        elif buf.kind == "thinking":
            buf.data["thinking"] = "".join(buf.parts)
            self._thinking.append(_keep_block(buf.data))
            self._content[index] = self._thinking[-1]
        elif buf.kind == "redacted_thinking":
            self._thinking.append(_keep_block(buf.data))
            self._content[index] = self._thinking[-1]
        elif buf.kind == "text":
            self._content[index] = {"type": "text", "text": "".join(buf.parts)}
        elif buf.kind not in _OWN_TYPES:  # a server tool's block, sent back as it is
            block = dict(buf.data)
            raw = "".join(buf.parts)
            if raw.strip():
                try:
                    block["input"] = decode_json(raw)
                except ValueError as e:
                    raise self._transport.protocol_error(
                        f"a {buf.kind} block's input is {json_failure(e)}: {raw[:200]!r}"
                    ) from None
            self._content[index] = block

    def finish(self) -> list[StreamEvent]:
        """Emit `ResponseCompleted` (raises when `message_stop` never came)."""
        if not self._done:
            raise self._transport.protocol_error(
                "the stream ended before message_stop (truncated response)"
            )
        requests = [self._requests[i] for i in sorted(self._requests)]
        content = [self._content[i] for i in sorted(self._content)]
        attributes = _attributes(self._thinking, content)
        message = AiMessage(
            "".join(self._text) or None,
            tool_execution_requests=requests,
            reasoning="".join(self._reasoning) or None,
            attributes=attributes,
        )
        metadata: dict[str, Any] = {"usage": dict(self._usage)}
        if self._stop_reason:
            metadata["stop_reason"] = self._stop_reason
        if self._stop_sequence:
            metadata["stop_sequence"] = self._stop_sequence
        if self._stop_reason == "pause_turn":
            metadata[PAUSED_TURN] = True
        response = ChatResponse(
            message,
            finish_reason=_answer_finish(self._stop_reason, self._answered, bool(requests)),
            usage=_usage(self._usage),
            model=self._model,
            id=self._id,
            metadata=metadata,
        )
        return [ResponseCompleted(response)]


class AnthropicChatModel(HttpChatModel):
    """The Messages API (`POST {base_url}/v1/messages`).

    `base_url` is the host root (default `https://api.anthropic.com`); the key defaults to
    `ANTHROPIC_API_KEY` and is sent as `x-api-key`, with `anthropic-version: 2023-06-01`.
    `max_tokens` (required by the API) applies when the request sets none. `strict_tools` is
    the strict default for cards whose `strict` is None (None: not strict).
    `response_format` is honoured through a forced answer tool (`ANSWER_TOOL`, see
    docs/structured-output.md). `deferred_tools` are sent with `defer_loading: true` beside
    the tool search tool `tool_search` names (`"bm25"` or `"regex"`, `TOOL_SEARCH_TOOLS`);
    its `server_tool_use` and `tool_search_tool_result` blocks are kept in the message and
    sent back verbatim, in their places (docs/loop.md, Native tool search).
    """

    provider = PROVIDER
    supports_response_format = True
    supports_tool_search = True
    api_key_env = ("ANTHROPIC_API_KEY",)
    default_base_url = DEFAULT_BASE_URL

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int = 1024,
        strict_tools: bool | None = None,
        anthropic_version: str = ANTHROPIC_VERSION,
        beta: tuple[str, ...] | list[str] = (),
        tool_search: Literal["bm25", "regex"] = "bm25",
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx2.Timeout | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_parameters: ChatRequestParameters | None = None,
        http_client: httpx2.Client | None = None,
        async_http_client: httpx2.AsyncClient | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        key = api_key if api_key is not None else os.environ.get("ANTHROPIC_API_KEY")
        all_headers: dict[str, str] = {
            "accept": "application/json",
            "anthropic-version": anthropic_version,
        }
        if key:
            all_headers["x-api-key"] = key
        if beta:
            all_headers["anthropic-beta"] = ",".join(beta)
        all_headers.update(headers or {})
        super().__init__(
            model=model,
            api_key=key,
            base_url=base_url or os.environ.get("ANTHROPIC_BASE_URL") or DEFAULT_BASE_URL,
            headers=all_headers,
            timeout=timeout,
            max_retries=max_retries,
            default_parameters=default_parameters,
            http_client=http_client,
            async_http_client=async_http_client,
            max_response_bytes=max_response_bytes,
        )
        if tool_search not in TOOL_SEARCH_TOOLS:
            raise UnsupportedOptionError(
                PROVIDER, "tool_search", f"{tool_search!r}: use 'bm25' or 'regex'"
            )
        self.max_tokens = max_tokens
        self.strict_tools = strict_tools
        self.tool_search = tool_search

    def _url(self, model: str, stream: bool) -> str:
        return f"{self.base_url}/v1/messages"

    # request --------------------------------------------------------------------------------
    def _body(
        self, request: ChatRequest, params: ChatRequestParameters, model: str, stream: bool
    ) -> dict[str, Any]:
        system, messages = self._messages(request.messages)
        body: dict[str, Any] = {
            "model": model,
            "max_tokens": params.max_tokens if params.max_tokens is not None else self.max_tokens,
        }
        if system:
            body["system"] = system[0]["text"] if len(system) == 1 else system
        body["messages"] = messages
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.top_p is not None:
            body["top_p"] = params.top_p
        if params.stop:
            body["stop_sequences"] = list(params.stop)
        # no allowed-tools field: a subset is sent as its tools alone (docs/providers.md)
        tools, choice = restrict_to_allowed(self, params.tool_choice, params.tools or ())
        if choice is not params.tool_choice:
            params = params.model_copy(update={"tool_choice": choice})
        output = self.output_schema(params)
        if output is not None:
            if any(card.name == ANSWER_TOOL for card in tools):
                raise self.unsupported(
                    "response_format",
                    f"the request already has a tool named {ANSWER_TOOL!r}, the name of the "
                    "tool that carries the structured answer; rename that tool",
                )
            body["tools"] = [*self._tools(tools, params), self._answer_tool(output)]
            body["tool_choice"] = self._answer_choice(params, tools)
        elif tools:
            body["tools"] = self._tools(tools, params)
            wire = self._tool_choice(params.tool_choice, params.parallel_tool_calls, tools)
            if wire is not None:
                body["tool_choice"] = wire
        elif params.tool_choice is not None and params.tool_choice.forces:
            raise self.unsupported(
                "tool_choice", f"{params.tool_choice!r} needs tools in the request"
            )
        if stream:
            body["stream"] = True
        return body

    def _tools(self, cards: tuple[Any, ...], params: ChatRequestParameters) -> list[dict[str, Any]]:
        """The `tools[]` entries of `cards`; the deferred ones marked, and the tool search
        tool after them."""
        tools = anthropic_tools(cards, self.strict_tools)
        deferred = set(params.deferred_tools or ())
        if not deferred:
            return tools
        out = [
            {**tool, "defer_loading": True} if card.name in deferred else tool
            for card, tool in zip(cards, tools, strict=True)
        ]
        return [*out, dict(TOOL_SEARCH_TOOLS[self.tool_search])]

    def _answer_tool(self, output: OutputSchema) -> dict[str, Any]:
        schema, _ = answer_schema(output)
        description = ANSWER_DESCRIPTION
        if isinstance(output.json_schema.get("description"), str):
            description = f"{description} The answer: {output.json_schema['description']}"
        tool: dict[str, Any] = {
            "name": ANSWER_TOOL,
            "description": description,
            "input_schema": schema,
        }
        if self.strict_tools:
            try:
                tool["input_schema"] = to_anthropic_strict(schema)
                tool["strict"] = True
            except SchemaError:
                pass  # a free-form answer cannot be strict; sent as it is
        return tool

    def _answer_choice(
        self, params: ChatRequestParameters, tools: tuple[Any, ...]
    ) -> dict[str, Any]:
        """`tool_choice` with structured output: the answer tool when no other tool may be
        called (no tools, or `NONE`); `any` when the model may call tools first (so every
        turn is a tool call, the last one the answer); a specific tool when one is forced;
        `auto` with extended thinking, which the API does not allow with a forced tool."""
        choice = params.tool_choice
        thinking = params.custom_parameters.get("thinking")
        out: dict[str, Any]
        if isinstance(thinking, Mapping) and thinking.get("type") not in (None, "disabled"):
            out = {"type": "auto"}
        elif choice is not None and choice.mode == "tool" and choice.name != ANSWER_TOOL:
            check_named(self, choice, tools)
            out = {"type": "tool", "name": choice.name}
        elif not tools or (choice is not None and choice.mode in ("none", "tool")):
            out = {"type": "tool", "name": ANSWER_TOOL}
        else:
            out = {"type": "any"}
        if params.parallel_tool_calls is False:
            out["disable_parallel_tool_use"] = True
        return out

    def _tool_choice(
        self, choice: ToolChoice | None, parallel: bool | None, tools: tuple[Any, ...]
    ) -> dict[str, Any] | None:
        out: dict[str, Any] | None
        if choice is None:
            out = None
        elif choice.mode == "auto":
            out = {"type": "auto"}
        elif choice.mode == "required":
            out = {"type": "any"}
        elif choice.mode == "none":
            return {"type": "none"}
        else:
            check_named(self, choice, tools)
            out = {"type": "tool", "name": choice.name}
        if parallel is False:
            out = out or {"type": "auto"}
            out["disable_parallel_tool_use"] = True
        return out

    def _messages(self, messages: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        system: list[dict[str, Any]] = []
        out: list[dict[str, Any]] = []
        for message in messages:
            if isinstance(message, SystemMessage):
                system.append({"type": "text", "text": message.text})
                continue
            if isinstance(message, AiMessage):
                content = self._assistant_blocks(message)
                if content and out and out[-1]["role"] == "assistant":
                    out[-1]["content"].extend(content)  # a paused turn and its continuation
                elif content:
                    out.append({"role": "assistant", "content": content})
                continue
            if isinstance(message, ToolExecutionResultMessage):
                blocks = [anthropic_tool_result(message)]
            elif isinstance(message, UserMessage):
                blocks = self._user_blocks(message)
            else:
                raise TypeError(f"not a chat message: {type(message).__name__}")
            last = out[-1] if out else None
            if (
                last is not None
                and last["role"] == "user"
                and (isinstance(message, ToolExecutionResultMessage) or _has_tool_result(last))
            ):
                # Consecutive tool results (and text following them) share one user turn.
                if isinstance(last["content"], str):
                    last["content"] = [{"type": "text", "text": last["content"]}]
                last["content"].extend(blocks)
            elif isinstance(message, UserMessage) and not message.contents:
                out.append({"role": "user", "content": message.text or ""})
            else:
                out.append({"role": "user", "content": blocks})
        return system, out

    def _assistant_blocks(self, message: AiMessage) -> list[dict[str, Any]]:
        content = (message.attributes.get("anthropic") or {}).get("content")
        if isinstance(content, list):
            return _kept_blocks(message, content)
        blocks: list[dict[str, Any]] = []
        kept = (message.attributes.get("anthropic") or {}).get("thinking") or ()
        blocks.extend(
            dict(b) for b in kept if isinstance(b, Mapping) and b.get("type") in _THINKING_TYPES
        )
        if message.text:
            blocks.append({"type": "text", "text": message.text})
        for call in message.tool_execution_requests:
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call.id,
                    "name": call.name,
                    "input": arguments_object(call.arguments),
                }
            )
        return blocks

    def _user_blocks(self, message: UserMessage) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if message.text:
            blocks.append({"type": "text", "text": message.text})
        blocks.extend(
            anthropic_content(part, "a user message", self.unsupported) for part in message.contents
        )
        return blocks

    # response -------------------------------------------------------------------------------
    def _answer(self, request: ChatRequest) -> Answer | None:
        output = self.output_schema(self.default_parameters.override(request.parameters))
        return None if output is None else Answer(ANSWER_TOOL, answer_schema(output)[1])

    def _parse_for(self, request: ChatRequest, data: Any) -> ChatResponse:
        return self._parse(data, self._answer(request))

    def _parser_for(self, request: ChatRequest) -> AnthropicStreamParser:
        return AnthropicStreamParser(self._http, self._answer(request))

    def _parse(self, data: Any, answer: Answer | None = None) -> ChatResponse:
        if not isinstance(data, dict):
            raise self._http.protocol_error("the response is not a JSON object")
        if data.get("type") == "error":
            raise self._http.stream_error(data.get("error", data))
        text: list[str] = []
        reasoning: list[str] = []
        thinking: list[dict[str, Any]] = []
        requests: list[ToolExecutionRequest] = []
        answers: list[str] = []
        content: list[dict[str, Any]] = []
        for block in data.get("content") or ():
            kind = block.get("type")
            if kind == "tool_use" and answer is not None and block.get("name") == answer.name:
                answers.append(answer_text(block.get("input"), answer.wrapped))
            elif kind == "text":
                text.append(block.get("text") or "")
                content.append({"type": "text", "text": block.get("text") or ""})
            elif kind == "thinking":
                reasoning.append(block.get("thinking") or "")
                thinking.append(_keep_block(block))
                content.append(thinking[-1])
            elif kind == "redacted_thinking":
                thinking.append(_keep_block(block))
                content.append(thinking[-1])
            elif kind == "tool_use":
                requests.append(
                    ToolExecutionRequest(
                        id=block.get("id") or f"toolu_{len(requests)}",
                        name=block.get("name") or "",
                        arguments=_input_json(block.get("input")),
                    )
                )
                content.append({"type": "tool_use", "id": requests[-1].id})
            elif isinstance(block, Mapping):
                content.append(dict(block))  # a server tool's block: sent back as it is
        attributes = _attributes(thinking, content)
        if answers:
            text = answers  # the answer is the text; text written before it is dropped
        message = AiMessage(
            "".join(text) or None,
            tool_execution_requests=requests,
            reasoning="".join(reasoning) or None,
            attributes=attributes,
        )
        metadata: dict[str, Any] = {}
        for key in ("usage", "stop_reason", "stop_sequence"):
            if data.get(key) is not None:
                metadata[key] = data[key]
        if data.get("stop_reason") == "pause_turn":
            metadata[PAUSED_TURN] = True
        return ChatResponse(
            message,
            finish_reason=_answer_finish(data.get("stop_reason"), bool(answers), bool(requests)),
            usage=_usage(data.get("usage")),
            model=data.get("model"),
            id=data.get("id"),
            metadata=metadata,
        )

    def _parser(self) -> AnthropicStreamParser:
        return AnthropicStreamParser(self._http)


def _has_tool_result(message: Mapping[str, Any]) -> bool:
    content = message.get("content")
    return isinstance(content, list) and any(
        isinstance(b, Mapping) and b.get("type") == "tool_result" for b in content
    )


def _tool_use(call: ToolExecutionRequest) -> dict[str, Any]:
    return {
        "type": "tool_use",
        "id": call.id,
        "name": call.name,
        "input": arguments_object(call.arguments),
    }


def _kept_blocks(message: AiMessage, content: list[Any]) -> list[dict[str, Any]]:
    """A past turn's blocks in their order (`_attributes`): server tool blocks and thinking
    verbatim, calls as the conversation now holds them; the text blocks as they came when
    the message's text is still theirs, else its text once, where the first one was."""
    calls = {call.id: call for call in message.tool_execution_requests}
    texts = [b for b in content if isinstance(b, Mapping) and b.get("type") == "text"]
    verbatim = "".join(str(b.get("text") or "") for b in texts) == (message.text or "")
    blocks: list[dict[str, Any]] = []
    text_sent = False
    sent: set[str] = set()
    for block in content:
        if not isinstance(block, Mapping):
            continue  # (an edited or foreign history: nothing to send back)
        kind = block.get("type")
        if kind == "text":
            if verbatim and block.get("text"):
                blocks.append({"type": "text", "text": block["text"]})
            elif not verbatim and message.text and not text_sent:
                blocks.append({"type": "text", "text": message.text})
            text_sent = True
        elif kind == "tool_use":
            call = calls.get(block.get("id"))  # type: ignore[arg-type]
            if call is not None and call.id not in sent:
                sent.add(call.id)
                blocks.append(_tool_use(call))
        else:
            blocks.append(dict(block))
    if message.text and not text_sent:
        blocks.append({"type": "text", "text": message.text})
    blocks.extend(
        _tool_use(call) for call in message.tool_execution_requests if call.id not in sent
    )
    return blocks
