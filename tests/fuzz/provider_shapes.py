"""Invariants of the constrained layer's reply handling and of the Responses stream's call
matching under hostile shapes, shared by the atheris targets `constrained` and `responses`
(tests/fuzz/fuzz_targets.py) and the hypothesis properties
(tests/fuzz/test_provider_shapes_properties.py). No atheris import here.

Constrained replies (`check_constrained_reply`): any reply text, streamed in any cut, under
a plan offering `lookup` and `count` (also forced to `lookup`, and answer-only), with
`max_calls_per_response=3`:

- only `ProviderError` 183004 escapes (a reply whose every call the plan refuses), the
  same from the chat face (`convert`) and the stream face (`_StreamMapper`);
- both faces give the same text and calls; no call past the cap, no call to a tool the plan
  does not admit; the text is encodable (lone surrogates are U+FFFD);
- the stream's `CompleteToolCall`s are the final response's calls, each index once.

Responses streams (`check_responses_stream`): function calls streamed with or without
`call_id` and item `id`, listed by `response.completed` in any order, with ids dropped:

- only `ProviderError` escapes;
- each call index is completed once, and the final response's calls are the announced ones
  (in index order);
- a final object listing the streamed calls (any order, ids dropped on either side) adds no
  call: each streamed call is announced, and would run, once; in general the final object
  adds calls only beyond the number the stream showed.
"""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from toolweave import tool
from toolweave.chat import (
    AiMessage,
    ChatRequest,
    ChatRequestParameters,
    ChatResponse,
    CompleteToolCall,
    ResponseCompleted,
    TextDelta,
    ToolChoice,
    UserMessage,
)
from toolweave.errors import ErrorCode, ProviderError, ToolweaveError
from toolweave.providers import ConstrainedToolCalling
from toolweave.providers._base import feed_batch, finish_stream
from toolweave.providers._http import HttpTransport
from toolweave.providers._sse import SSEEvent
from toolweave.providers.constrained import _StreamMapper
from toolweave.providers.openai_responses import ResponsesStreamParser

BUDGET = 5.0
"""Seconds per input: a hang guard (an input takes milliseconds)."""
CAP = 3

_TRANSPORT = HttpTransport(provider="fuzz", headers={}, secrets=())


@tool
def lookup(key: str) -> str:
    """Look a key up."""
    return key


@tool
def count(n: int) -> str:
    """Count."""
    return str(n)


_SETTINGS = ConstrainedToolCalling(max_calls_per_response=CAP)
_TOOLS = [lookup.card, count.card]
_CHOICES = (None, ToolChoice.tool("lookup"), ToolChoice.NONE)

# pieces of constrained replies, for generators that assemble text from bytes
REPLY_PIECES = [
    '{"answer": "',
    '{"answer": ',
    '{"tool_calls": [',
    '{"name": "lookup", "arguments": {"key": "k"}}',
    '{"name": "count", "arguments": {"n": 1}}',
    '{"name": "delete_all", "arguments": {}}',
    '{"name": 5, "arguments": "x"}',
    '{"name": "lookup", "arguments": "{\\"key\\": 1}"}',
    ", ",
    "]}",
    '"}',
    "}",
    "price ",
    "\\uZZZZ",
    "\\ud83d",
    "\\ude00",
    "\\ud83d\\ude00",
    "\\u00e9",
    "\\x",
    "\\",
    "\\n",
    '\\"',
    "\x01",
    "[" * 300,
    '"answer": {"width": 2}',
    "plain words",
]


class BudgetExceeded(AssertionError):
    """One input took longer than its budget."""


def _timed(label: str, started: float) -> None:
    spent = time.monotonic() - started
    if spent > BUDGET:
        raise BudgetExceeded(f"{label}: took {spent:.2f} s (budget {BUDGET} s)")


def _outcome(response: ChatResponse) -> tuple[str | None, list[tuple[str, str]]]:
    message = response.ai_message
    return message.text, [(c.name, c.arguments) for c in message.tool_execution_requests]


def check_constrained_reply(reply: str, cuts: Sequence[int] = ()) -> None:
    """`reply` through every plan's chat and stream faces (the stream cut at `cuts`)."""
    started = time.monotonic()
    for choice in _CHOICES:
        params = ChatRequestParameters(tools=_TOOLS, tool_choice=choice)
        plan = _SETTINGS.plan(ChatRequest([UserMessage("q")], params), params)
        admitted = {card.name for card in plan.tools} if plan.mode != "answer" else set()
        raw = ChatResponse(AiMessage(reply))
        chat: Any
        try:
            chat = _outcome(plan.convert(raw))
        except ProviderError as e:
            assert e.code == ErrorCode.PROVIDER_RESPONSE_INVALID, e
            chat = ProviderError
        else:
            text, calls = chat
            assert len(calls) <= CAP and all(name in admitted for name, _ in calls), calls
            if text is not None:
                text.encode("utf-8")  # no lone surrogate
        mapper = _StreamMapper(plan)
        edges = [0, *sorted(c % (len(reply) + 1) for c in cuts), len(reply)]
        events: list[Any] = []
        try:
            for start, end in itertools.pairwise(edges):
                if end > start:
                    events.extend(mapper.map(TextDelta(reply[start:end])))
            events.extend(mapper.map(ResponseCompleted(raw)))
        except ProviderError as e:
            assert e.code == ErrorCode.PROVIDER_RESPONSE_INVALID, e
            assert chat is ProviderError, f"the stream raised, chat gave {chat!r}"
            continue
        assert chat is not ProviderError, "chat raised, the stream did not"
        last = events[-1]
        assert isinstance(last, ResponseCompleted)
        assert _outcome(last.response)[1] == chat[1]
        assert (last.response.ai_message.text or None) == (chat[0] or None)
        completes = [e for e in events if isinstance(e, CompleteToolCall)]
        assert [c.request for c in completes] == list(
            last.response.ai_message.tool_execution_requests
        )
        assert len({c.index for c in completes}) == len(completes)
        for event in events:
            if isinstance(event, TextDelta):
                event.text.encode("utf-8")
    _timed("constrained reply", started)


def check_answer_streams_as_its_text(answer: str, cuts: Sequence[int] = ()) -> None:
    """A well-formed answer reply: what streams, in any cut, is the final text."""
    reply = json.dumps({"answer": answer})
    params = ChatRequestParameters(tools=_TOOLS)
    plan = _SETTINGS.plan(ChatRequest([UserMessage("q")], params), params)
    mapper = _StreamMapper(plan)
    edges = [0, *sorted(c % (len(reply) + 1) for c in cuts), len(reply)]
    events: list[Any] = []
    for start, end in itertools.pairwise(edges):
        if end > start:
            events.extend(mapper.map(TextDelta(reply[start:end])))
    events.extend(mapper.map(ResponseCompleted(ChatResponse(AiMessage(reply)))))
    streamed = "".join(e.text for e in events if isinstance(e, TextDelta))
    final = events[-1].response.ai_message.text or ""
    assert streamed == final, (streamed, final)


@dataclass(frozen=True)
class Call:
    """One function call of a generated Responses stream."""

    name: str
    arguments: str
    call_id: str | None
    item_id: str | None
    streamed: bool = True
    """Whether the stream shows it (else only the final object lists it)."""
    finished: bool = True
    """Whether the stream sends its `output_item.done`."""

    def item(self, *, ids: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {"type": "function_call", "name": self.name}
        out["arguments"] = self.arguments
        if ids and self.call_id:
            out["call_id"] = self.call_id
        if ids and self.item_id:
            out["id"] = self.item_id
        return out


def responses_events(
    calls: Sequence[Call], order: Sequence[int], drop_ids: Sequence[bool], extra: bool
) -> list[dict[str, Any]]:
    """The events of a stream showing `calls` (a reasoning item first, so call positions
    differ from their index), then `response.completed` listing them in `order` with the
    ids of some dropped (`drop_ids`), and a reasoning item after them when `extra`."""
    events: list[dict[str, Any]] = [
        {"type": "response.output_item.added", "output_index": 0, "item": {"type": "reasoning"}}
    ]
    position = 1
    for call in calls:
        if not call.streamed:
            continue
        added = {**call.item(), "arguments": ""}
        events.append(
            {"type": "response.output_item.added", "output_index": position, "item": added}
        )
        half = len(call.arguments) // 2
        for piece in (call.arguments[:half], call.arguments[half:]):
            if piece:
                events.append(
                    {
                        "type": "response.function_call_arguments.delta",
                        "output_index": position,
                        "delta": piece,
                    }
                )
        if call.finished:
            events.append(
                {"type": "response.output_item.done", "output_index": position, "item": call.item()}
            )
        position += 1
    listed = [calls[i % len(calls)] for i in order] if calls else []
    listed = list(dict.fromkeys(listed))  # each call at most once
    output: list[dict[str, Any]] = [
        call.item(ids=not (drop_ids[n % len(drop_ids)] if drop_ids else False))
        for n, call in enumerate(listed)
    ]
    if extra:
        output.append({"type": "reasoning", "summary": []})
    events.append(
        {
            "type": "response.completed",
            "response": {"id": "r", "status": "completed", "output": output},
        }
    )
    return events


def check_responses_stream(
    calls: Sequence[Call], order: Sequence[int], drop_ids: Sequence[bool], extra: bool
) -> None:
    """The generated stream through `ResponsesStreamParser` (see the module docstring)."""
    started = time.monotonic()
    events = responses_events(calls, order, drop_ids, extra)
    parser = ResponsesStreamParser(_TRANSPORT)
    out: list[Any] = []
    try:
        for event in events:
            out.extend(
                feed_batch(parser, [SSEEvent(data=json.dumps(event))], _TRANSPORT.protocol_error)
            )
        out.extend(finish_stream(parser, _TRANSPORT.protocol_error))
    except ToolweaveError as e:
        assert isinstance(e, ProviderError), e
        return
    completes = [e for e in out if isinstance(e, CompleteToolCall)]
    assert len({c.index for c in completes}) == len(completes), "a call completed twice"
    last = out[-1]
    assert isinstance(last, ResponseCompleted)
    in_order = [c.request for c in sorted(completes, key=lambda c: c.index)]
    assert list(last.response.ai_message.tool_execution_requests) == in_order
    streamed = [call for call in calls if call.streamed]
    finals = [i for i in events[-1]["response"]["output"] if i.get("type") == "function_call"]
    # the final object adds calls only beyond what the stream showed
    assert len(completes) <= max(len(streamed), len(finals)), (len(completes), len(streamed))
    listed = {calls[i % len(calls)] for i in order} if calls else set()
    distinct = len({(c.name, c.arguments, c.call_id, c.item_id) for c in streamed})
    if listed <= set(streamed) and distinct == len(streamed):
        # the final object repeats streamed calls only: nothing is announced twice
        assert len(completes) == len(streamed), (len(completes), len(streamed))
    _timed("responses stream", started)


def constrained_from_bytes(data: bytes) -> tuple[str, list[int]]:
    """A reply assembled from `REPLY_PIECES` (and raw text) read from `data`, and cuts."""
    parts: list[str] = []
    cuts: list[int] = []
    i = 0
    while i < len(data):
        b = data[i]
        if b < 200:
            parts.append(REPLY_PIECES[b % len(REPLY_PIECES)])
            i += 1
        elif b < 230:
            cuts.append(data[i + 1] if i + 1 < len(data) else 0)
            i += 2
        else:
            size = b - 229
            parts.append(data[i + 1 : i + 1 + size].decode("utf-8", "replace"))
            i += 1 + size
    return "".join(parts), cuts


_NAMES = ["get_weather", "lookup", "", "f"]
_ARGS = ["{}", '{"city":"Paris"}', '{"city": "Paris"}', "", '{"a":', '{"n":1}']


def responses_from_bytes(
    data: bytes,
) -> tuple[list[Call], list[int], list[bool], bool]:
    """A generated Responses stream's parameters read from `data`."""
    calls: list[Call] = []
    i = 0
    while i + 4 <= len(data) and len(calls) < 8:
        a, b, c, d = data[i : i + 4]
        calls.append(
            Call(
                name=_NAMES[a % len(_NAMES)],
                arguments=_ARGS[b % len(_ARGS)],
                call_id=f"call_{c % 3}" if c & 1 else None,
                item_id=f"fc_{d % 3}" if d & 1 else None,
                streamed=not (a & 0x80),
                finished=not (b & 0x80),
            )
        )
        i += 4
    rest = data[i:]
    order = list(rest[: len(rest) // 2]) or list(range(len(calls)))
    drop = [bool(x & 1) for x in rest[len(rest) // 2 :]]
    return calls, order, drop, bool(rest[-1] & 2) if rest else False
