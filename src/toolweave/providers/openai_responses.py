"""`OpenAIResponsesChatModel`: OpenAI's Responses API (`POST {base_url}/responses`).

The conversation becomes a list of input items: messages, `function_call` and
`function_call_output` items, and the items the model produced that must go back verbatim
(reasoning items with their encrypted content, hosted-tool calls such as web search). The
model's output items are kept, in order, in `AiMessage.attributes["openai_responses"]`, so
reasoning survives tool rounds with `store=False` (the default).
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

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
from ..dialects import openai_responses_tool, to_openai_strict
from ..errors import SchemaError
from ..execution.content import FileContent, ImageContent, TextContent
from ..execution.requests import ToolExecutionRequest
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
from .tool_results import openai_responses_tool_output, text_stand_in

__all__ = ["AzureOpenAIResponsesChatModel", "OpenAIResponsesChatModel", "ResponsesStreamParser"]

logger = logging.getLogger("toolweave.providers")

DEFAULT_BASE_URL = "https://api.openai.com/v1"
PROVIDER = "openai"
AZURE_RESPONSES_API_VERSION = "2025-04-01-preview"
ATTRIBUTE = "openai_responses"
"""The key in `AiMessage.attributes` holding the response id and its output items."""
TOOL_SEARCH = "tool_search"
"""The hosted tool that loads deferred tools (`ChatRequestParameters.deferred_tools`)."""

_INCOMPLETE = {
    "max_output_tokens": FinishReason.LENGTH,
    "content_filter": FinishReason.CONTENT_FILTER,
}


def _usage(raw: Any) -> TokenUsage | None:
    if not isinstance(raw, Mapping):
        return None
    details = raw.get("output_tokens_details")
    reasoning = details.get("reasoning_tokens") if isinstance(details, Mapping) else None
    return TokenUsage(
        input_tokens=raw.get("input_tokens"),
        output_tokens=raw.get("output_tokens"),
        total_tokens=raw.get("total_tokens"),
        reasoning_tokens=reasoning,
    )


def _text_of(item: Mapping[str, Any]) -> tuple[list[str], list[str]]:
    """(output texts, refusals) of a `message` output item."""
    texts: list[str] = []
    refusals: list[str] = []
    for part in item.get("content") or ():
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "output_text" and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif part.get("type") == "refusal" and isinstance(part.get("refusal"), str):
            refusals.append(part["refusal"])
    return texts, refusals


def _reasoning_of(item: Mapping[str, Any]) -> list[str]:
    """The readable reasoning of a `reasoning` item: its summary texts, else its content."""
    out = [
        part["text"]
        for part in item.get("summary") or ()
        if isinstance(part, Mapping) and isinstance(part.get("text"), str)
    ]
    if not out:
        out = [
            part["text"]
            for part in item.get("content") or ()
            if isinstance(part, Mapping) and isinstance(part.get("text"), str)
        ]
    return out


def _call_request(item: Mapping[str, Any]) -> ToolExecutionRequest:
    arguments = item.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments, ensure_ascii=False) if arguments is not None else ""
    kwargs: dict[str, Any] = {
        "name": item.get("name") or "",
        "arguments": arguments if arguments.strip() else "{}",
    }
    call_id = item.get("call_id") or item.get("id")
    if call_id:
        kwargs["id"] = call_id
    return ToolExecutionRequest(**kwargs)


def _text(value: Any) -> str | None:
    """A non-empty string field of an item, else None."""
    return value if isinstance(value, str) and value else None


def _same_arguments(a: str, b: str) -> bool:
    """Whether two argument texts are the same JSON (the same text when not JSON)."""
    a, b = a.strip() or "{}", b.strip() or "{}"
    if a == b:
        return True
    try:
        return bool(decode_json(a) == decode_json(b))
    except ValueError:
        return False


def _finish_reason(data: Mapping[str, Any], has_calls: bool) -> FinishReason:
    status = data.get("status")
    if status == "incomplete":
        details = data.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        return _INCOMPLETE.get(str(reason), FinishReason.OTHER)
    if has_calls:
        return FinishReason.TOOL_EXECUTION
    return FinishReason.STOP if status in ("completed", None) else FinishReason.OTHER


def parse_response(data: Any, transport: HttpTransport) -> ChatResponse:
    """A `ChatResponse` from a Responses API `response` object."""
    if not isinstance(data, Mapping):
        raise transport.protocol_error("the response is not a JSON object")
    if data.get("status") == "failed" or data.get("error"):
        raise transport.stream_error(data.get("error") or {"message": "the response failed"})
    output = data.get("output")
    if not isinstance(output, list):
        raise transport.protocol_error("the response has no output list")
    texts: list[str] = []
    refusals: list[str] = []
    reasoning: list[str] = []
    requests: list[ToolExecutionRequest] = []
    items: list[dict[str, Any]] = []
    for item in output:
        if not isinstance(item, Mapping):
            raise transport.protocol_error(f"an output item is not an object: {item!r:.200}")
        kind = item.get("type")
        for key in ("content", "summary"):
            if not isinstance(item.get(key) or [], list):  # a string would be read per char
                raise transport.protocol_error(f"a {kind} item's {key} is not a list")
        if kind == "message":
            t, r = _text_of(item)
            texts.extend(t)
            refusals.extend(r)
        elif kind == "function_call":
            requests.append(_call_request(item))
        elif kind == "reasoning":
            reasoning.extend(_reasoning_of(item))
        items.append(dict(item))
    metadata: dict[str, Any] = {}
    for key in ("created_at", "usage", "status", "incomplete_details"):
        if data.get(key) is not None:
            metadata[key] = data[key]
    if refusals:
        metadata["refusal"] = "".join(refusals)
    attributes = {ATTRIBUTE: {"id": data.get("id"), "output": items}}
    message = AiMessage(
        "".join(texts) or None,
        tool_execution_requests=requests,
        reasoning="\n\n".join(reasoning) or None,
        attributes=attributes,
    )
    return ChatResponse(
        message,
        finish_reason=_finish_reason(data, bool(requests)),
        usage=_usage(data.get("usage")),
        model=data.get("model"),
        id=data.get("id"),
        metadata=metadata,
    )


class ResponsesStreamParser:
    """Turns the typed events of a Responses stream into toolweave stream events.

    Function calls are numbered in the order their items are added (reasoning and message
    items take output indexes too); each call's argument deltas are `PartialToolCall`s and
    the call is complete (`CompleteToolCall`) at `response.function_call_arguments.done` when
    its name and id are known, else at its `response.output_item.done`, whose item is the
    source of truth for the name, id and arguments (as is the final object for a call still
    open when the response ends); nothing changes a completed call afterwards.
    A call without `call_id` takes its item's `id`, as in `parse_response`. The final
    object's calls are matched to the streamed ones by identity and content, never by
    output position (see `_match`): one call is announced, and run, once.
    The stream ends with `response.completed` / `response.incomplete`, whose response object
    is authoritative for the final message; `response.failed` and `error` events raise.
    """

    def __init__(self, transport: HttpTransport) -> None:
        self._transport = transport
        self._calls: dict[int, int] = {}  # output_index -> call index
        self._requests: list[ToolExecutionRequest | None] = []
        self._names: list[str | None] = []
        self._ids: list[str | None] = []  # call_id
        self._item_ids: list[str | None] = []  # the item's own id
        self._parts: list[list[str]] = []
        self._final: ChatResponse | None = None
        self._text_streamed = False

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Consume one SSE event."""
        if event.is_done or not event.data.strip():
            return []
        if self._final is not None:
            logger.warning("openai responses stream: event after the response ended ignored")
            return []
        try:
            data = decode_json(event.data)
        except ValueError as e:
            raise self._transport.protocol_error(
                f"a stream event is {json_failure(e)}: {event.data[:200]!r}"
            ) from None
        if not isinstance(data, dict):
            raise self._transport.protocol_error("a stream event is not a JSON object")
        kind = data.get("type") or event.event
        out: list[StreamEvent] = []
        if kind == "response.output_text.delta":
            delta = data["delta"]
            if delta:
                self._text_streamed = True
                out.append(TextDelta(str(delta)))
        elif kind in ("response.reasoning_summary_text.delta", "response.reasoning_text.delta"):
            delta = data["delta"]
            if delta:
                out.append(ReasoningDelta(str(delta)))
        elif kind == "response.output_item.added":
            item = data["item"]
            position = int(data["output_index"])
            if item.get("type") == "function_call" and position not in self._calls:
                self._start(position, item, out)  # (an item added twice is one call)
        elif kind == "response.function_call_arguments.delta":
            index = self._calls.get(int(data["output_index"]))
            if index is not None and self._requests[index] is None and data["delta"]:
                self._parts[index].append(str(data["delta"]))
                out.append(PartialToolCall(index, None, None, str(data["delta"])))
        elif kind == "response.function_call_arguments.done":
            index = self._calls.get(int(data["output_index"]))
            if index is not None and self._names[index] and self._ids[index]:
                self._complete(index, data.get("arguments"), out)
            elif index is not None and self._requests[index] is None:
                arguments = data.get("arguments")  # the call's item, when done, names it
                if isinstance(arguments, str):
                    self._parts[index] = [arguments]
        elif kind == "response.output_item.done":
            item = data["item"]
            if item.get("type") == "function_call":
                position = int(data["output_index"])
                if position not in self._calls:
                    self._start(position, item, out)
                self._complete_from_item(self._calls[position], item, out)
        elif kind in ("response.completed", "response.incomplete"):
            self._final = parse_response(data["response"], self._transport)
            items = [i for i in data["response"]["output"] if i.get("type") == "function_call"]
            final_calls = self._final.ai_message.tool_execution_requests
            matches = self._match(items)
            finished = {index: items[j] for j, index in enumerate(matches) if index is not None}
            for index, request in enumerate(self._requests):
                if request is None:
                    if index in finished:
                        self._complete_from_item(index, finished[index], out)
                    else:
                        self._complete(index, None, out)
            text = self._final.ai_message.text
            if text and not self._text_streamed:  # only in the final object
                out.append(TextDelta(text))
            for call, index in zip(final_calls, matches, strict=True):
                if index is None:  # only in the final object: announce it now
                    index = len(self._requests)
                    self._requests.append(call)
                    self._names.append(call.name)
                    self._ids.append(call.id)
                    self._item_ids.append(None)
                    self._parts.append([call.arguments])
                    out.append(PartialToolCall(index, call.id, call.name, call.arguments))
                    out.append(CompleteToolCall(index, call))
            out.append(ResponseCompleted(self._consistent(self._final)))
        elif kind == "response.failed":
            response = data.get("response") or {}
            raise self._transport.stream_error(
                response.get("error") or {"message": "the response failed"}
            )
        elif kind == "error":
            raise self._transport.stream_error(data)
        return out

    def _start(self, position: int, item: Mapping[str, Any], out: list[StreamEvent]) -> None:
        index = len(self._requests)
        self._calls[position] = index
        self._requests.append(None)
        call_id = _text(item.get("call_id"))
        name = _text(item.get("name"))
        self._ids.append(call_id)
        self._item_ids.append(_text(item.get("id")))
        self._names.append(name)
        args = item.get("arguments") or ""
        self._parts.append([args] if args else [])
        out.append(PartialToolCall(index, call_id, name, args))

    def _complete_from_item(
        self, index: int, item: Mapping[str, Any], out: list[StreamEvent]
    ) -> None:
        """Complete a call from its finished item, the source of truth for its name, id and
        arguments where earlier events lacked or differ from them. A call already complete
        stays as it was announced (a difference is logged)."""
        name = _text(item.get("name"))
        call_id = _text(item.get("call_id"))
        self._item_ids[index] = self._item_ids[index] or _text(item.get("id"))
        arguments = item.get("arguments")
        if not (isinstance(arguments, str) and arguments.strip()):
            arguments = None  # lacking: the streamed arguments stand
        request = self._requests[index]
        if request is not None:
            if (name and name != request.name) or (arguments and arguments != request.arguments):
                logger.warning(
                    "openai responses stream: call %d's finished item differs from the call "
                    "already completed; keeping the completed call",
                    index,
                )
            return
        if (name and name != self._names[index]) or (call_id and call_id != self._ids[index]):
            self._names[index] = name or self._names[index]
            self._ids[index] = call_id or self._ids[index]
            out.append(PartialToolCall(index, self._ids[index], self._names[index], ""))
        self._complete(index, arguments, out)

    def _complete(self, index: int, arguments: Any, out: list[StreamEvent]) -> None:
        if self._requests[index] is not None:
            return
        text = arguments if isinstance(arguments, str) else "".join(self._parts[index])
        kwargs: dict[str, Any] = {
            "name": self._names[index] or "",
            "arguments": text if text.strip() else "{}",
        }
        call_id = self._ids[index] or self._item_ids[index]  # as `parse_response` reads it
        if call_id:
            kwargs["id"] = call_id
        request = ToolExecutionRequest(**kwargs)
        self._requests[index] = request
        out.append(CompleteToolCall(index, request))

    def _match(self, items: list[Mapping[str, Any]]) -> list[int | None]:
        """For each `function_call` item of the final object, the streamed call it is (an
        index), or None for a call the stream did not show. Never by output position (a
        server may list the items in another order): first by identity (the same `call_id`,
        else the same item `id`, where both sides have one), then by content (name and
        arguments), then, for what is left on both sides, in order. Each streamed call
        matches at most one item, so the final object adds calls (to announce, and run) only
        when it lists more than the stream showed: a copy of a streamed call whose ids
        changed, went missing or moved is never a second call."""
        matches: list[int | None] = [None] * len(items)
        taken: set[int] = set()

        def pair(accept: Any) -> None:
            for j, item in enumerate(items):
                if matches[j] is not None:
                    continue
                for index in range(len(self._requests)):
                    if index not in taken and accept(index, item):
                        matches[j] = index
                        taken.add(index)
                        break

        pair(lambda index, item: self._same_identity(index, item) is True)
        pair(self._same_content)
        pair(lambda index, item: True)
        return matches

    def _same_identity(self, index: int, item: Mapping[str, Any]) -> bool | None:
        """Whether streamed call `index` is `item` by its ids; None when they cannot tell."""
        call_id, item_id = _text(item.get("call_id")), _text(item.get("id"))
        if call_id and self._ids[index]:
            return call_id == self._ids[index]
        if item_id and self._item_ids[index]:
            return item_id == self._item_ids[index]
        return None

    def _same_content(self, index: int, item: Mapping[str, Any]) -> bool:
        """Whether streamed call `index` has `item`'s name and arguments (for a call still
        open, the arguments streamed so far begin the item's)."""
        name = _text(item.get("name"))
        if name and self._names[index] and name != self._names[index]:
            return False
        arguments = item.get("arguments")
        arguments = arguments if isinstance(arguments, str) else ""
        request = self._requests[index]
        if request is None:
            return arguments.startswith("".join(self._parts[index]))
        return _same_arguments(request.arguments, arguments)

    def _consistent(self, response: ChatResponse) -> ChatResponse:
        """The final response, with the calls exactly as they were announced (a completed
        call never changes; the final object may repeat them)."""
        announced = [r for r in self._requests if r is not None]
        final = list(response.ai_message.tool_execution_requests)
        if final and [(r.id, r.name) for r in final] != [(r.id, r.name) for r in announced]:
            logger.warning(
                "openai responses stream: the completed response lists other calls than "
                "the stream announced; keeping the announced calls"
            )
        if final == announced:
            return response
        message = response.ai_message.model_copy(update={"tool_execution_requests": announced})
        return response.model_copy(update={"ai_message": message})

    def finish(self) -> list[StreamEvent]:
        """The stream ended: it must have ended with a terminal event."""
        if self._final is None:
            raise self._transport.protocol_error(
                "the stream ended before the response was complete (no response.completed)"
            )
        return []


class OpenAIResponsesChatModel(HttpChatModel):
    """The Responses API (`POST {base_url}/responses`), OpenAI's API for current models.

    Same conventions as `OpenAIChatModel`: the key defaults to `OPENAI_API_KEY`, `base_url`
    ends with the API version. `store=False` (the default) keeps nothing on OpenAI's side and
    asks for `reasoning.encrypted_content`, which is sent back with the reasoning items so
    reasoning models keep their reasoning across tool rounds. `store=True` with
    `chain=True` sends `previous_response_id` and only the items after that response.
    `reasoning_effort` / `reasoning_summary` fill `reasoning`. `hosted_tools` are raw
    `tools[]` entries (web search, file search, code interpreter, remote MCP) sent as they
    are; their output items are kept in the history and sent back, never run by toolweave.
    `deferred_tools` are sent with `defer_loading: true` beside the hosted `tool_search`
    tool; its `tool_search_call` / `tool_search_output` items go back verbatim like the
    other hosted items (docs/loop.md, Native tool search).
    """

    provider = PROVIDER
    supports_response_format = True
    supports_tool_search = True
    api_key_env: tuple[str, ...] = ("OPENAI_API_KEY",)
    default_base_url: str | None = DEFAULT_BASE_URL

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        strict_tools: bool | None = None,
        store: bool = False,
        chain: bool = False,
        reasoning_effort: str | None = None,
        reasoning_summary: str | None = None,
        hosted_tools: Sequence[Mapping[str, Any]] = (),
        organization: str | None = None,
        project: str | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx2.Timeout | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_parameters: ChatRequestParameters | None = None,
        http_client: httpx2.Client | None = None,
        async_http_client: httpx2.AsyncClient | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if chain and not store:
            raise ValueError("chain=True needs store=True (previous responses must be stored)")
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
        self.store = store
        self.chain = chain
        self.reasoning_effort = reasoning_effort
        self.reasoning_summary = reasoning_summary
        self.hosted_tools = tuple(dict(t) for t in hosted_tools)

    def _url(self, model: str, stream: bool) -> str:
        return f"{self.base_url}/responses"

    # request --------------------------------------------------------------------------------
    def _body(
        self, request: ChatRequest, params: ChatRequestParameters, model: str, stream: bool
    ) -> dict[str, Any]:
        messages = list(request.messages)
        body: dict[str, Any] = {"model": model}
        # instructions are not carried over by previous_response_id: always sent
        instructions = [m.text for m in messages if isinstance(m, SystemMessage)]
        if self.chain:
            previous, messages = _after_last_response(messages)
            if previous:
                body["previous_response_id"] = previous
        if instructions:
            body["instructions"] = "\n\n".join(instructions)
        body["input"] = [
            item for m in messages if not isinstance(m, SystemMessage) for item in self._items(m)
        ]
        body["store"] = self.store
        if not self.store:
            body["include"] = ["reasoning.encrypted_content"]
        if params.temperature is not None:
            body["temperature"] = params.temperature
        if params.top_p is not None:
            body["top_p"] = params.top_p
        if params.max_tokens is not None:
            body["max_output_tokens"] = params.max_tokens
        if params.stop:
            raise self.unsupported("stop", "the Responses API has no stop sequences")
        cards = params.tools or ()
        deferred = set(params.deferred_tools or ())
        tools = [self._tool(card, card.name in deferred) for card in cards]
        tools.extend(self.hosted_tools)
        if deferred and not any(t.get("type") == TOOL_SEARCH for t in self.hosted_tools):
            tools.append({"type": TOOL_SEARCH})  # the hosted search loads the deferred ones
        if tools:
            body["tools"] = tools
        choice = params.tool_choice
        if choice is not None:
            if not tools:
                if choice.forces or choice.allowed is not None:
                    raise self.unsupported("tool_choice", f"{choice!r} needs tools in the request")
            else:
                body["tool_choice"] = self._tool_choice(choice, cards)
        if params.parallel_tool_calls is not None and tools:
            body["parallel_tool_calls"] = params.parallel_tool_calls
        reasoning: dict[str, Any] = {}
        if self.reasoning_effort:
            reasoning["effort"] = self.reasoning_effort
        if self.reasoning_summary:
            reasoning["summary"] = self.reasoning_summary
        if reasoning:
            body["reasoning"] = reasoning
        if params.response_format is not None:
            body["text"] = {"format": self._text_format(params)}
        if stream:
            body["stream"] = True
        return body

    def _tool(self, card: Any, deferred: bool) -> dict[str, Any]:
        tool = openai_responses_tool(card, self.strict_tools)
        return {**tool, "defer_loading": True} if deferred else tool

    def _text_format(self, params: ChatRequestParameters) -> dict[str, Any]:
        output = self.output_schema(params)
        assert output is not None
        schema, strict = output.json_schema, False
        try:
            schema, strict = to_openai_strict(schema), True
        except SchemaError:
            pass
        spec: dict[str, Any] = {
            "type": "json_schema",
            "name": output.name,
            "schema": schema,
            "strict": strict,
        }
        description = output.json_schema.get("description")
        if isinstance(description, str) and description:
            spec["description"] = description
        return spec

    def _tool_choice(self, choice: ToolChoice, cards: Sequence[Any]) -> Any:
        if choice.mode == "tool":
            check_named(self, choice, cards)
            return {"type": "function", "name": choice.name}
        if choice.allowed is not None:
            check_named(self, choice, cards)
            return {
                "type": "allowed_tools",
                "mode": choice.mode,
                "tools": [{"type": "function", "name": n} for n in choice.allowed],
            }
        return choice.mode

    def _items(self, message: Any) -> list[dict[str, Any]]:
        if isinstance(message, UserMessage):
            return [{"role": "user", "content": self._user_content(message)}]
        if isinstance(message, AiMessage):
            return self._ai_items(message)
        if isinstance(message, ToolExecutionResultMessage):
            return [openai_responses_tool_output(message)]
        raise TypeError(f"not a chat message: {type(message).__name__}")

    def _ai_items(self, message: AiMessage) -> list[dict[str, Any]]:
        """The input items for a past model turn: its own output items in their order when
        it came from this API (reasoning and hosted-tool items verbatim; calls as the
        conversation now holds them), else items built from the message."""
        calls = {call.id: call for call in message.tool_execution_requests}
        raw = message.attributes.get(ATTRIBUTE)
        items: list[dict[str, Any]] = []
        text_sent = False
        sent: set[str] = set()
        if isinstance(raw, Mapping) and isinstance(raw.get("output"), list):
            for item in raw["output"]:
                if not isinstance(item, Mapping):
                    continue  # (an edited or foreign history: nothing to send back)
                kind = item.get("type")
                if kind == "message":
                    if message.text and not text_sent:
                        items.append({"role": "assistant", "content": message.text})
                        text_sent = True
                elif kind == "function_call":
                    key = item.get("call_id") or item.get("id")
                    call = calls.get(key) if isinstance(key, str) else None
                    if call is None or call.id in sent:
                        continue
                    sent.add(call.id)
                    items.append(_call_item(call, item.get("id")))
                else:
                    items.append(dict(item))
        if message.text and not text_sent:
            items.append({"role": "assistant", "content": message.text})
        for call in message.tool_execution_requests:
            if call.id not in sent:
                items.append(_call_item(call, None))
        return items

    def _user_content(self, message: UserMessage) -> Any:
        if not message.contents:
            return message.text or ""
        parts: list[dict[str, Any]] = []
        if message.text:
            parts.append({"type": "input_text", "text": message.text})
        parts.extend(_input_part(part) for part in message.contents)
        return parts

    # response -------------------------------------------------------------------------------
    def _parse(self, data: Any) -> ChatResponse:
        return parse_response(data, self._http)

    def _parser(self) -> ResponsesStreamParser:
        return ResponsesStreamParser(self._http)


def _call_item(call: ToolExecutionRequest, item_id: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments,
    }
    if isinstance(item_id, str) and item_id:
        item["id"] = item_id
    return item


def _input_part(part: Any) -> dict[str, Any]:
    """A Responses `input_*` content part."""
    if isinstance(part, TextContent):
        return {"type": "input_text", "text": part.text}
    if isinstance(part, ImageContent):
        url = part.url or f"data:{part.mime_type};base64,{part.data}"
        return {"type": "input_image", "image_url": url, "detail": "auto"}
    if isinstance(part, FileContent):
        out: dict[str, Any] = {"type": "input_file"}
        if part.data:
            out["file_data"] = f"data:{part.mime_type};base64,{part.data}"
        elif part.url:
            out["file_url"] = part.url
        if part.name:
            out["filename"] = part.name
        return out
    text = text_stand_in(part, "a user message", "the Responses API has no input part for it")
    return {"type": "input_text", "text": text}


def _after_last_response(messages: list[Any]) -> tuple[str | None, list[Any]]:
    """(id of the last stored response in `messages`, the messages after it)."""
    for position in range(len(messages) - 1, -1, -1):
        message = messages[position]
        if isinstance(message, AiMessage):
            raw = message.attributes.get(ATTRIBUTE)
            if isinstance(raw, Mapping) and isinstance(raw.get("id"), str) and raw["id"]:
                return raw["id"], messages[position + 1 :]
    return None, messages


class AzureOpenAIResponsesChatModel(AzureDeployment, OpenAIResponsesChatModel):
    """The Responses API on Azure OpenAI: `deployment` (also sent as `model`), `endpoint`
    (else `AZURE_OPENAI_ENDPOINT`), `api_version` (else `OPENAI_API_VERSION`, else
    `2025-04-01-preview`; `"v1"` for Azure's version-less API), and `api_key` (else
    `AZURE_OPENAI_API_KEY`, sent as `api-key`) or `token_provider` (Microsoft Entra ID). Every
    other option is `OpenAIResponsesChatModel`'s. See docs/providers.md."""

    azure_operation = "responses"
    azure_default_version = AZURE_RESPONSES_API_VERSION
