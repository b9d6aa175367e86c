"""Constrained tool calling: tool calls through a JSON-schema response format, for models
that do not produce native tool calls (small local models, Gemma on the Gemini API), over
any chat model that maps `response_format` (OpenAI and compatible servers, llama.cpp,
Gemini's `responseSchema`, ...).

The tools are described in the system prompt, and the request's `response_format` is a JSON
schema admitting either ``{"tool_calls": [{"name": ..., "arguments": {...}}, ...]}`` (one
branch per tool: its name as a constant, its arguments per its schema; at most
`max_calls_per_response` calls) or ``{"answer": ...}``. The reply is parsed into an ordinary
`AiMessage` with tool requests (ids generated), so `ToolService` works unchanged. Earlier
tool calls and results are sent back as assistant JSON turns and user text turns, which any
chat template understands.

`ConstrainedChatModel(model)` is that layer over any `ChatModel`; an HTTP provider built
with `tool_calling="constrained"` (or `"auto"`, which probes the model first, see
`probe_capabilities`) puts it over a native-mode copy of itself.

Small models tend to call the same tool again after its result came back. The policy in
`ConstrainedToolCalling` drops a call identical to one already made since the last user
message before it runs (its result is in the conversation already); a reply left with no
call and no answer is asked again, answer-only (`repeat_follow_up`). It also switches to an
answer-only schema after `max_tool_rounds` tool rounds since the last user message.

The schema is a request, not a guarantee (servers ignore or truncate it), so the plan is
enforced again on the decoded reply: calls past `max_calls_per_response` and calls to a tool
the plan does not admit (not offered, not the forced `tool_choice`, any call in an
answer-only plan) never run; they are recorded in `attributes["constrained"]["refused_calls"]`,
and a reply left with neither a call nor an answer is `ProviderError` 183004. A reply that
is not JSON is the model's text, in every face alike; lone surrogates become U+FFFD.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema

from ..chat.events import (
    CompleteToolCall,
    PartialToolCall,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
)
from ..chat.messages import AiMessage, SystemMessage, ToolExecutionResultMessage, UserMessage
from ..chat.model import ChatModel
from ..chat.request import ChatRequest, ChatRequestParameters, ToolChoice
from ..chat.response import ChatResponse, FinishReason
from ..dialects import openai_tool
from ..errors import ErrorCode, ProviderError
from ..execution.requests import ToolExecutionRequest
from ..schema.output import OutputSchema
from ..tools.card import ToolCard
from ._http import decode_json
from .probe import probe_capabilities
from .tool_results import tool_result_text

__all__ = [
    "TOOL_CALLING_MODES",
    "ConstrainedChatModel",
    "ConstrainedPlan",
    "ConstrainedToolCalling",
    "after_repeat",
    "repeat_follow_up",
    "uses_tools",
]

TOOL_CALLING_MODES = ("native", "constrained", "auto")
"""The `tool_calling=` values of the providers: native tool calls, constrained ones, or
probe the model once and pick."""

DEFAULT_INSTRUCTIONS = (
    "You can call these tools:\n{tools}\n\n"
    "Reply with one JSON object and nothing else: either "
    '{{"tool_calls": [{{"name": "<tool name>", "arguments": {{...}}}}]}} to call tools, '
    'or {{"answer": "<your reply to the user>"}} when you can answer. '
    "After a tool result, use it to answer; do not call the same tool again with the same "
    "arguments."
)


@dataclass(frozen=True, slots=True)
class ConstrainedToolCalling:
    """Settings of the constrained mode, including the repeated-call policy.

    - `max_calls_per_response`: the schema's `maxItems` for `tool_calls` (a bounded array
      keeps small models from repeating a call within one reply).
    - `answer_after_repeat`: a call identical (same name, same arguments) to one already
      made since the last user message is not run again: it is dropped from the reply, and a
      reply left with nothing is asked again, admitting only an answer. A history that
      already holds such a repeat (made elsewhere) gets an answer-only request.
    - `max_tool_rounds`: after this many tool rounds since the last user message, the next
      request admits only an answer (None: no limit; `ToolService`'s own round-trip limit
      still applies).
    - `instructions`: the system-prompt text describing the tools; `{tools}` is replaced by
      the tool list.
    - `result_suffix`: appended to the user turn carrying tool results.
    """

    max_calls_per_response: int = 4
    answer_after_repeat: bool = True
    max_tool_rounds: int | None = 4
    instructions: str = DEFAULT_INSTRUCTIONS
    result_suffix: str = (
        "Answer the user's question using these results (or call another tool if needed)."
    )

    def plan(self, request: ChatRequest, params: ChatRequestParameters) -> ConstrainedPlan:
        """Decide what the reply may contain for `request`."""
        tools = tuple(params.tools or ())
        choice = params.tool_choice
        mode: Literal["both", "tools", "answer"] = "both"
        reason = ""
        if choice is not None and choice.mode == "none":
            mode, reason = "answer", "tool_choice=none"
        elif choice is not None:
            # a forced tool or an allowed-tools subset: the plan admits only those tools
            if choice.mode == "tool" or choice.allowed is not None:
                names = set(choice.names_in(card.name for card in tools))
                tools = tuple(card for card in tools if card.name in names)
            if choice.forces:
                mode = "tools"
        if not tools:
            mode, reason = "answer", reason or "no tools"
        rounds = _rounds_since_user(request.messages)
        made: frozenset[tuple[str, str]] = frozenset()
        if mode != "answer" and rounds:
            if self.answer_after_repeat and _repeats(rounds):
                mode, reason = "answer", "repeated call"
            elif self.max_tool_rounds is not None and len(rounds) >= self.max_tool_rounds:
                mode, reason = "answer", f"{len(rounds)} tool rounds"
            elif self.answer_after_repeat and mode == "both":
                made = frozenset(_key(c) for r in rounds for c in r.tool_execution_requests)
        return ConstrainedPlan(self, tools, mode, reason, params.response_format, made)


def uses_tools(request: ChatRequest, params: ChatRequestParameters) -> bool:
    """Whether `request` involves tools (offered now, or calls/results in the history)."""
    if params.tools:
        return True
    return any(
        isinstance(m, ToolExecutionResultMessage)
        or (isinstance(m, AiMessage) and m.tool_execution_requests)
        for m in request.messages
    )


def _canonical(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments or "{}"), sort_keys=True, ensure_ascii=False)
    except (ValueError, RecursionError):
        return arguments.strip()


def _rounds_since_user(messages: Sequence[Any]) -> list[AiMessage]:
    rounds: list[AiMessage] = []
    for message in reversed(messages):
        if isinstance(message, UserMessage):
            break
        if isinstance(message, AiMessage) and message.tool_execution_requests:
            rounds.append(message)
    rounds.reverse()
    return rounds


def _key(call: ToolExecutionRequest) -> tuple[str, str]:
    return call.name, _canonical(call.arguments)


def _repeats(rounds: list[AiMessage]) -> bool:
    """Whether the last round asked for a call already made in an earlier round."""
    earlier = {_key(call) for message in rounds[:-1] for call in message.tool_execution_requests}
    return any(_key(call) in earlier for call in rounds[-1].tool_execution_requests)


def repeat_follow_up(request: ChatRequest, response: ChatResponse) -> ChatRequest | None:
    """The answer-only request to send when every call of the constrained `response` to
    `request` repeated an earlier one (so nothing is left to run or to say), else None."""
    info = response.ai_message.attributes.get("constrained")
    if not isinstance(info, Mapping) or not info.get("repeated_calls"):
        return None
    if response.ai_message.tool_execution_requests or response.ai_message.text:
        return None
    answer_only = ChatRequestParameters(tool_choice=ToolChoice.NONE)
    return ChatRequest(request.messages, request.parameters.override(answer_only))


def after_repeat(first: ChatResponse, second: ChatResponse) -> ChatResponse:
    """The follow-up's response, with the usage of both requests and the reason recorded."""
    message = second.ai_message
    attributes = dict(message.attributes)
    info = dict(attributes.get("constrained") or {})
    info["reason"] = "repeated call"
    info["repeated_calls"] = first.ai_message.attributes["constrained"]["repeated_calls"]
    attributes["constrained"] = info
    usage = first.usage + second.usage if first.usage is not None else second.usage
    return second.model_copy(
        update={"ai_message": message.model_copy(update={"attributes": attributes}), "usage": usage}
    )


def _rename_refs(node: Any, prefix: str, names: set[str]) -> Any:
    if isinstance(node, dict):
        out: dict[str, Any] = {}
        for key, value in node.items():
            if key == "$ref" and isinstance(value, str):
                for root in ("#/$defs/", "#/definitions/"):
                    if value.startswith(root) and value[len(root) :].split("/")[0] in names:
                        value = "#/$defs/" + prefix + value[len(root) :]
                out[key] = value
            else:
                out[key] = _rename_refs(value, prefix, names)
        return out
    if isinstance(node, list):
        return [_rename_refs(item, prefix, names) for item in node]
    return node


def _arguments_schema(card: ToolCard, index: int, defs: dict[str, Any]) -> dict[str, Any]:
    """The card's parameter schema, its `$defs` hoisted to the root under unique names."""
    schema = dict(openai_tool(card, strict=False)["function"]["parameters"])
    local: dict[str, Any] = {}
    for key in ("$defs", "definitions"):
        local.update(schema.pop(key, None) or {})
    if not local:
        return schema
    prefix = f"t{index}_"
    names = set(local)
    for name, sub in local.items():
        defs[prefix + name] = _rename_refs(sub, prefix, names)
    renamed: dict[str, Any] = _rename_refs(schema, prefix, names)
    return renamed


@dataclass(slots=True)
class ConstrainedPlan:
    """What one constrained request admits (`mode`: both, tools or answer) and how to
    translate it to and from the wire."""

    settings: ConstrainedToolCalling
    tools: tuple[ToolCard, ...]
    mode: Literal["both", "tools", "answer"]
    reason: str = ""
    response_format: Any = None
    made: frozenset[tuple[str, str]] = frozenset()
    """(name, canonical arguments) of the calls made since the last user message, which a
    reply must not repeat (empty when the policy is off)."""
    provider: str = ""
    """The provider named by the errors of a reply that breaks the plan."""
    _answer_schema: dict[str, Any] | None = field(default=None, init=False)

    # request ------------------------------------------------------------------------------
    def answer_schema(self) -> dict[str, Any]:
        """The schema of the `answer` value (a string, or the requested output schema)."""
        if self._answer_schema is None:
            if self.response_format is None:
                self._answer_schema = {"type": "string"}
            else:
                self._answer_schema = dict(OutputSchema.of(self.response_format).json_schema)
        return self._answer_schema

    @property
    def structured(self) -> bool:
        """Whether the answer is structured output (not free text)."""
        return self.response_format is not None

    def schema(self) -> dict[str, Any]:
        """The JSON schema of the reply."""
        defs: dict[str, Any] = {}
        answer = {
            "type": "object",
            "properties": {"answer": self.answer_schema()},
            "required": ["answer"],
            "additionalProperties": False,
        }
        if self.mode == "answer":
            return answer
        branches = []
        for i, card in enumerate(self.tools):
            branches.append(
                {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "enum": [card.name]},
                        "arguments": _arguments_schema(card, i, defs),
                    },
                    "required": ["name", "arguments"],
                    "additionalProperties": False,
                }
            )
        calls = {
            "type": "object",
            "properties": {
                "tool_calls": {
                    "type": "array",
                    "items": branches[0] if len(branches) == 1 else {"anyOf": branches},
                    "minItems": 1,
                    "maxItems": max(1, self.settings.max_calls_per_response),
                }
            },
            "required": ["tool_calls"],
            "additionalProperties": False,
        }
        root: dict[str, Any] = calls if self.mode == "tools" else {"anyOf": [calls, answer]}
        if defs:
            root = {**root, "$defs": defs}
        return root

    def output(self) -> OutputSchema:
        """The reply's schema as the request's `response_format`: sent as it is (never in a
        provider's strict form, which would make optional arguments required)."""
        name = "answer" if self.mode == "answer" else "tool_calls_or_answer"
        schema = self.schema()
        validator_cls = jsonschema.validators.validator_for(
            schema, default=jsonschema.Draft202012Validator
        )
        return OutputSchema(name, schema, validator=validator_cls(schema), strict=False)

    def tool_list(self) -> str:
        """The tools as system-prompt text: name, description, argument schema."""
        lines = []
        for card in self.tools:
            params = openai_tool(card, strict=False)["function"]["parameters"]
            description = (card.description or "").strip().replace("\n", " ")
            lines.append(
                f"- {card.name}: {description}\n  arguments: "
                f"{json.dumps(params, ensure_ascii=False, separators=(',', ':'))}"
            )
        return "\n".join(lines)

    def messages(self, messages: Sequence[Any]) -> list[Any]:
        """The conversation with tool calls and results as plain text turns."""
        out: list[Any] = []
        system = [m.text for m in messages if isinstance(m, SystemMessage)]
        if self.tools:
            system.append(self.settings.instructions.format(tools=self.tool_list()))
        if self.mode == "answer":
            system.append('Reply with {"answer": ...} only.')
        if system:
            out.append(SystemMessage("\n\n".join(system)))
        pending: list[str] = []

        def flush() -> None:
            if pending:
                pending.append(self.settings.result_suffix)
                out.append(UserMessage("\n".join(pending)))
                pending.clear()

        for message in messages:
            if isinstance(message, SystemMessage):
                continue
            if isinstance(message, ToolExecutionResultMessage):
                status = "error" if message.is_error else "result"
                pending.append(f"Tool {status} for {message.tool_name} (call {message.id}):")
                pending.append(tool_result_text(message, "tool results go as text here"))
                continue
            flush()
            if isinstance(message, AiMessage):
                out.append(AiMessage(self._assistant_json(message)))
            else:
                out.append(message)
        flush()
        return out

    @staticmethod
    def _assistant_json(message: AiMessage) -> str:
        if message.tool_execution_requests:
            calls = []
            for call in message.tool_execution_requests:
                try:
                    arguments = json.loads(call.arguments or "{}")
                except (ValueError, RecursionError):
                    arguments = call.arguments
                calls.append({"name": call.name, "arguments": arguments})
            return json.dumps({"tool_calls": calls}, ensure_ascii=False)
        text = message.text or ""
        try:
            value: Any = json.loads(text) if text.strip()[:1] in ("{", "[") else text
        except (ValueError, RecursionError):
            value = text
        return json.dumps({"answer": value}, ensure_ascii=False)

    def request(self, request: ChatRequest, params: ChatRequestParameters) -> ChatRequest:
        """The plain (tool-free) request sent to the model, its `response_format` the reply's
        schema (`output()`); `params` are the request's effective parameters."""
        plain = params.model_copy(
            update={
                "tools": None,
                "tool_choice": None,
                "parallel_tool_calls": None,
                "response_format": self.output(),
            }
        )
        return ChatRequest(self.messages(request.messages), plain)

    # response -----------------------------------------------------------------------------
    def parse_content(self, content: str | None) -> tuple[str | None, list[ToolExecutionRequest]]:
        """The answer text and the tool requests in a reply's content."""
        text, requests, _ = self._parse_content(content)
        return text, requests

    def _parse_content(
        self, content: str | None
    ) -> tuple[str | None, list[ToolExecutionRequest], list[str]]:
        """`parse_content`, plus the names of the calls dropped as repeats of `made`."""
        text, requests, repeated, _ = self._parse(content)
        return text, requests, repeated

    def _parse(
        self, content: str | None
    ) -> tuple[str | None, list[ToolExecutionRequest], list[str], list[dict[str, str]]]:
        """(answer text, requests, names dropped as repeats, calls refused by the plan) of a
        reply. The plan is enforced here, whatever the server made of the schema: at most
        `max_calls_per_response` calls are read, and only to the tools the plan admits."""
        text = (content or "").strip()
        if not text:
            return None, [], [], []
        try:
            data = decode_json(text)  # (depth pre-scan; lone surrogates become U+FFFD)
        except ValueError:
            return content, [], [], []  # not JSON (cut short, or the server ignored the schema)
        if not isinstance(data, Mapping):
            return content, [], [], []
        calls = data.get("tool_calls")
        repeated: list[str] = []
        refused: list[dict[str, str]] = []
        requests: list[ToolExecutionRequest] = []
        if isinstance(calls, list) and calls:
            admitted = {card.name for card in self.tools} if self.mode != "answer" else set()
            limit = max(1, self.settings.max_calls_per_response)
            seen: set[tuple[str, str]] = set(self.made)
            for position, call in enumerate(calls):
                if not isinstance(call, Mapping):
                    continue
                name = call.get("name")
                name = name if isinstance(name, str) else ""
                if position >= limit:
                    refused.append({"name": name, "reason": "over max_calls_per_response"})
                    continue
                if name not in admitted:
                    refused.append({"name": name, "reason": "not admitted by the plan"})
                    continue
                arguments = call.get("arguments")
                args = (
                    arguments
                    if isinstance(arguments, str)
                    else json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
                )
                key = (name, _canonical(args))
                if key in seen:  # made before, or twice in this reply: run it once
                    if key in self.made:
                        repeated.append(name)
                    continue
                seen.add(key)
                requests.append(
                    ToolExecutionRequest(
                        id=f"call_{uuid.uuid4().hex[:24]}", name=name, arguments=args
                    )
                )
            if requests or repeated:
                return None, requests, repeated, refused
        if "answer" in data:
            answer = data["answer"]
            if isinstance(answer, str) and not self.structured:
                return answer, [], [], refused
            return json.dumps(answer, ensure_ascii=False), [], [], refused
        if refused:
            raise self._broken(refused)
        return content, [], [], []

    def _broken(self, refused: list[dict[str, str]]) -> ProviderError:
        """The error for a reply whose every call the plan refused (and no answer)."""
        shown = ", ".join(f"{r['name'][:64]!r} ({r['reason']})" for r in refused[:5])
        more = f" and {len(refused) - 5} more" if len(refused) > 5 else ""
        admitted = (
            ", ".join(repr(card.name) for card in self.tools) if self.mode != "answer" else ""
        )
        return ProviderError(
            f"the constrained reply broke its schema: no call it makes may run ({shown}{more}; "
            f"admitted: {admitted or 'an answer only'}, at most "
            f"{max(1, self.settings.max_calls_per_response)} calls)",
            provider=self.provider,
            code=ErrorCode.PROVIDER_RESPONSE_INVALID,
        )

    def convert(self, response: ChatResponse) -> ChatResponse:
        """The response with its JSON content turned into text and/or tool requests."""
        message = response.ai_message
        text, requests, repeated, refused = self._parse(message.text)
        finish = response.finish_reason
        if requests:
            finish = FinishReason.TOOL_EXECUTION
        elif finish is FinishReason.TOOL_EXECUTION:
            finish = FinishReason.STOP
        attributes = dict(message.attributes)
        attributes["constrained"] = {"mode": self.mode, "raw": message.text}
        if self.reason:
            attributes["constrained"]["reason"] = self.reason
        if repeated:
            attributes["constrained"]["repeated_calls"] = repeated
        if refused:
            attributes["constrained"]["refused_calls"] = refused
        return response.model_copy(
            update={
                "ai_message": AiMessage(
                    text,
                    tool_execution_requests=requests,
                    reasoning=message.reasoning,
                    attributes=attributes,
                ),
                "finish_reason": finish,
            }
        )


class _AnswerExtractor:
    """Pulls the `answer` string out of a streaming JSON reply, decoding escapes."""

    __slots__ = ("_buffer", "_done", "_pos", "_start")

    def __init__(self) -> None:
        self._buffer = ""
        self._start: int | None = None
        self._pos = 0
        self._done = False

    def feed(self, chunk: str) -> str:
        self._buffer += chunk
        if self._done:
            return ""
        if self._start is None:
            stripped = self._buffer.lstrip()
            head = stripped[:1]
            if head and head != "{":
                self._done = True
                return ""
            body = stripped[1:].lstrip()
            key = '"answer"'
            if len(body) < len(key):
                if not key.startswith(body):
                    self._done = True
                return ""
            if not body.startswith(key):
                self._done = True  # a tool call, or the answer is not first
                return ""
            rest = body[len(key) :].lstrip()
            if not rest:
                return ""
            if rest[0] != ":":
                self._done = True
                return ""
            value = rest[1:].lstrip()
            if not value:
                return ""
            if value[0] != '"':
                self._done = True  # structured answer: not streamed as text
                return ""
            self._start = len(self._buffer) - len(value) + 1
            self._pos = self._start
        return self._decode()

    def _decode(self) -> str:
        """The answer's characters decoded so far. Anything that is not valid JSON in the
        string (a bad escape, a raw control character) stops the streaming: the complete
        reply then decides, as in `chat`. Lone surrogates become U+FFFD, as there."""
        out: list[str] = []
        buf, i = self._buffer, self._pos
        while i < len(buf):
            ch = buf[i]
            if ch == '"':
                self._done = True
                break
            if ch < " ":
                self._done = True
                break
            if ch != "\\":
                out.append(ch)
                i += 1
                continue
            if i + 1 >= len(buf):
                break
            esc = buf[i + 1]
            if esc != "u":
                if esc not in _ESCAPES:
                    self._done = True
                    break
                out.append(_ESCAPES[esc])
                i += 2
                continue
            if i + 6 > len(buf):
                break
            code = _hex4(buf[i + 2 : i + 6])
            if code is None:
                self._done = True
                break
            if 0xD800 <= code < 0xDC00:  # a surrogate pair needs its second half
                follow = buf[i + 6 : i + 12]
                if len(follow) < 6 and "\\u".startswith(follow[:2]):
                    break  # maybe the low half: wait for it
                low = _hex4(follow[2:]) if follow.startswith("\\u") else None
                if low is not None and 0xDC00 <= low < 0xE000:
                    out.append(chr(0x10000 + ((code - 0xD800) << 10) + (low - 0xDC00)))
                    i += 12
                    continue
                out.append("\ufffd")
                i += 6
                continue
            out.append("\ufffd" if 0xDC00 <= code < 0xE000 else chr(code))
            i += 6
        self._pos = i
        return "".join(out)


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_HEX = frozenset("0123456789abcdefABCDEF")


def _hex4(text: str) -> int | None:
    """The value of four hex digits, else None."""
    return int(text, 16) if len(text) == 4 and all(c in _HEX for c in text) else None


class _StreamMapper:
    """Maps the model's stream events for a constrained reply: answer text streams as
    `TextDelta`s, tool calls are emitted (partial, then complete) when the reply is complete."""

    __slots__ = ("_answer", "_plan", "_streamed")

    def __init__(self, plan: ConstrainedPlan) -> None:
        self._plan = plan
        self._answer = _AnswerExtractor()
        self._streamed: list[str] = []

    def map(self, event: StreamEvent) -> list[StreamEvent]:
        if isinstance(event, TextDelta):
            if self._plan.structured:
                return []
            text = self._answer.feed(event.text)
            if not text:
                return []
            self._streamed.append(text)
            return [TextDelta(text)]
        if isinstance(event, ResponseCompleted):
            out: list[StreamEvent] = []
            response = self._plan.convert(event.response)
            for index, call in enumerate(response.ai_message.tool_execution_requests):
                out.append(PartialToolCall(index, call.id, call.name, call.arguments))
                out.append(CompleteToolCall(index, call))
            final, streamed = response.ai_message.text or "", "".join(self._streamed)
            if final and final != streamed:  # not streamed (or not all): send the rest
                out.append(
                    TextDelta(final[len(streamed) :] if final.startswith(streamed) else final)
                )
            out.append(ResponseCompleted(response))
            return out
        if isinstance(event, (PartialToolCall, CompleteToolCall)):
            return []  # native calls are not asked for in this mode
        return [event]


class ConstrainedChatModel:
    """A `ChatModel` that calls tools through `model`'s structured output.

    Requests that involve tools are sent to `model` without them, as a plain conversation
    whose `response_format` admits tool calls or an answer (see the module docstring); the
    replies come back with ordinary tool requests. Other requests pass through unchanged.
    `model` must map `response_format` to its provider's structured output. `settings` hold
    the schema options and the repeated-call policy; `tool_calling="auto"` first probes
    `model` (once per endpoint and model, see `probe_capabilities`) and passes requests
    through unchanged when it makes native tool calls.
    """

    def __init__(
        self,
        model: ChatModel,
        settings: ConstrainedToolCalling | None = None,
        *,
        tool_calling: Literal["constrained", "auto"] = "constrained",
    ) -> None:
        if tool_calling not in ("constrained", "auto"):
            raise ValueError(f"tool_calling must be 'constrained' or 'auto', got {tool_calling!r}")
        self.inner = model
        self.settings = settings or ConstrainedToolCalling()
        self.tool_calling = tool_calling

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.inner!r}, tool_calling={self.tool_calling!r})"

    @property
    def secrets(self) -> tuple[str, ...]:
        """The credentials the wrapped model holds (its `secrets`), for masking."""
        held = getattr(self.inner, "secrets", ())
        return tuple(s for s in held if isinstance(s, str)) if held else ()

    def plan(self, request: ChatRequest) -> ConstrainedPlan | None:
        """What the reply to `request` may contain, or None when it goes to the model as it
        is (no tools involved, or "auto" found that native tool calls work)."""
        params = self._params(request)
        if not uses_tools(request, params):
            return None
        if (
            self.tool_calling == "auto"
            and probe_capabilities(self.inner).recommended_tool_calling == "native"
        ):
            return None
        plan = self.settings.plan(request, params)
        plan.provider = str(getattr(self.inner, "provider", "") or "")
        return plan

    def prepare(self, request: ChatRequest) -> tuple[ConstrainedPlan | None, ChatRequest]:
        """The plan for `request` and the request the model is sent for it."""
        plan = self.plan(request)
        if plan is None:
            return None, request
        return plan, plan.request(request, self._params(request))

    def _params(self, request: ChatRequest) -> ChatRequestParameters:
        defaults = getattr(self.inner, "default_parameters", None)
        if isinstance(defaults, ChatRequestParameters):
            return defaults.override(request.parameters)
        return request.parameters

    # the four faces -------------------------------------------------------------------------
    def chat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and return the full response."""
        plan, sent = self.prepare(request)
        if plan is None:
            return self.inner.chat(request)
        response = plan.convert(self.inner.chat(sent))
        follow_up = repeat_follow_up(request, response)
        return response if follow_up is None else after_repeat(response, self.chat(follow_up))

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and return the full response (async)."""
        plan, sent = self.prepare(request)
        if plan is None:
            return await self.inner.achat(request)
        response = plan.convert(await self.inner.achat(sent))
        follow_up = repeat_follow_up(request, response)
        if follow_up is None:
            return response
        return after_repeat(response, await self.achat(follow_up))

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send `request` with streaming; yield events as they arrive."""
        plan, sent = self.prepare(request)
        if plan is None:
            return self.inner.stream(request)
        return self._stream(request, plan, self.inner.stream(sent))

    def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Send `request` with streaming; yield events as they arrive (async)."""
        plan, sent = self.prepare(request)
        if plan is None:
            return self.inner.astream(request)
        return self._astream(request, plan, self.inner.astream(sent))

    # a reply that only repeated earlier calls is asked again, answer-only -------------------
    def _stream(
        self, request: ChatRequest, plan: ConstrainedPlan, events: Iterator[StreamEvent]
    ) -> Iterator[StreamEvent]:
        mapper = _StreamMapper(plan)
        first: ChatResponse | None = None
        follow_up: ChatRequest | None = None
        try:
            for event in events:
                for out in mapper.map(event):
                    if isinstance(out, ResponseCompleted):
                        follow_up = repeat_follow_up(request, out.response)
                        if follow_up is not None:
                            first = out.response  # nothing to run or say: the follow-up answers
                            continue
                    yield out
        finally:
            close = getattr(events, "close", None)
            if close is not None:
                close()
        if first is not None and follow_up is not None:
            for event in self.stream(follow_up):
                if isinstance(event, ResponseCompleted):
                    event = ResponseCompleted(after_repeat(first, event.response))
                yield event

    async def _astream(
        self, request: ChatRequest, plan: ConstrainedPlan, events: AsyncIterator[StreamEvent]
    ) -> AsyncIterator[StreamEvent]:
        mapper = _StreamMapper(plan)
        first: ChatResponse | None = None
        follow_up: ChatRequest | None = None
        try:
            async for event in events:
                for out in mapper.map(event):
                    if isinstance(out, ResponseCompleted):
                        follow_up = repeat_follow_up(request, out.response)
                        if follow_up is not None:
                            first = out.response
                            continue
                    yield out
        finally:
            aclose = getattr(events, "aclose", None)
            if aclose is not None:
                await aclose()
        if first is not None and follow_up is not None:
            async for event in self.astream(follow_up):
                if isinstance(event, ResponseCompleted):
                    event = ResponseCompleted(after_repeat(first, event.response))
                yield event
