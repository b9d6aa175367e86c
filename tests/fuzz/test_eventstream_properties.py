"""Hypothesis properties for the Responses and Bedrock parsers (with tests/fuzz/sse_invariant.py
and the `eventstream` atheris target): event streams of generated frames keep the typed-error
invariant within the time budget; any JSON value as a non-streaming answer is a response or
`ProviderError` 183004; whatever events arrive, a completed call never changes."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolweave.chat import ChatRequest, CompleteToolCall, ResponseCompleted, UserMessage
from toolweave.errors import ErrorCode, ProviderError
from toolweave.providers import BedrockChatModel
from toolweave.providers._base import _shapes, feed_batch, finish_stream
from toolweave.providers._http import HttpTransport
from toolweave.providers._sse import SSEEvent
from toolweave.providers.bedrock import BedrockStreamParser
from toolweave.providers.openai_responses import ResponsesStreamParser, parse_response

from .sse_invariant import LIMIT, MAX_INPUT, check_event_stream, frame, raw_frame

_TRANSPORT = HttpTransport(provider="fuzz", headers={}, secrets=())

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=12,
)
_KEYS = st.sampled_from(
    [
        "type", "item", "output_index", "delta", "arguments", "call_id", "name", "id",
        "response", "output", "status", "error", "usage", "start", "toolUse", "toolUseId",
        "input", "contentBlockIndex", "text", "stopReason", "reasoningContent", "message",
        "content", "incomplete_details",
    ]
)  # fmt: skip
_SHAPED = st.recursive(
    _JSON,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_KEYS, inner, max_size=4),
    max_leaves=16,
)


@st.composite
def _event_streams(draw: st.DrawFn) -> list[bytes]:
    stream = b""
    for kind, payload, repeat, exception in draw(
        st.lists(
            st.tuples(
                st.sampled_from(
                    [
                        "contentBlockStart",
                        "contentBlockDelta",
                        "contentBlockStop",
                        "messageStop",
                        "metadata",
                        "other",
                    ]
                ),
                st.binary(max_size=64) | _SHAPED.map(lambda v: json.dumps(v).encode()),
                st.integers(1, 4096),
                st.booleans(),
            ),
            max_size=8,
        )
    ):
        headers = (
            {":message-type": "exception", ":exception-type": kind}
            if exception and kind == "other"
            else {":message-type": "event", ":event-type": kind}
        )
        stream += frame(headers, (payload * repeat)[: 2 * LIMIT])
        if len(stream) > MAX_INPUT:
            break
    step = draw(st.integers(1, 16384))
    return [stream[i : i + step] for i in range(0, len(stream), step)]


@settings(max_examples=150, deadline=None)
@given(_event_streams())
def test_generated_event_streams_keep_the_typed_error_invariant(chunks: list[bytes]) -> None:
    check_event_stream(chunks)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(0, 3 * LIMIT),
    st.integers(0, 2**32 - 1) | st.integers(0, 64),
    st.binary(max_size=256),
    st.integers(1, 64),
)
def test_frames_declaring_any_lengths_keep_the_invariant(
    total: int, headers_length: int, body: bytes, step: int
) -> None:
    data = raw_frame(total, headers_length, body) + frame({":event-type": "messageStop"}, b"{}")
    check_event_stream([data[i : i + step] for i in range(0, len(data), step)])


def test_a_frame_declared_over_the_limit_is_refused_from_its_prelude() -> None:
    big = frame({":event-type": "metadata"}, b"x" * (LIMIT + 1))
    assert check_event_stream([big[:12]])


_BEDROCK = BedrockChatModel(
    "m", region="us-east-1", aws_access_key_id="AKID", aws_secret_access_key="secret-key"
)


@settings(max_examples=300, deadline=None)
@given(_SHAPED)
def test_any_json_answer_is_a_response_or_the_typed_error(data: Any) -> None:
    request = ChatRequest([UserMessage("hi")])
    for parse in (
        lambda: parse_response(data, _TRANSPORT),
        lambda: _BEDROCK._parse_for(request, data),
    ):
        try:
            with _shapes(_TRANSPORT.protocol_error, "the response"):  # as chat() does
                parse()
        except ProviderError as e:
            assert e.code == ErrorCode.PROVIDER_RESPONSE_INVALID or e.status is not None, e


def _responses_events(draw: st.DrawFn) -> list[dict[str, Any]]:
    index = st.integers(0, 2)
    call = st.fixed_dictionaries(
        {"type": st.just("function_call"), "name": st.sampled_from(["f", "g"])},
        optional={"call_id": st.sampled_from(["c0", "c1", "c2"]), "arguments": st.text(max_size=4)},
    )
    event = st.one_of(
        st.fixed_dictionaries(
            {"type": st.just("response.output_item.added"), "output_index": index, "item": call}
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("response.function_call_arguments.delta"),
                "output_index": index,
                "delta": st.text(max_size=4),
            }
        ),
        st.fixed_dictionaries(
            {
                "type": st.just("response.function_call_arguments.done"),
                "output_index": index,
                "arguments": st.text(max_size=4),
            }
        ),
        st.fixed_dictionaries(
            {"type": st.just("response.output_item.done"), "output_index": index, "item": call}
        ),
    )
    events = draw(st.lists(event, max_size=12))
    output = draw(st.lists(call, max_size=3))
    events.append(
        {"type": "response.completed", "response": {"status": "completed", "output": output}}
    )
    return events


def _bedrock_events(draw: st.DrawFn) -> list[tuple[str, dict[str, Any]]]:
    block = st.integers(0, 2)
    event = st.one_of(
        st.tuples(
            st.just("contentBlockStart"),
            st.fixed_dictionaries(
                {
                    "contentBlockIndex": block,
                    "start": st.fixed_dictionaries(
                        {
                            "toolUse": st.fixed_dictionaries(
                                {"toolUseId": st.sampled_from(["t0", "t1"]), "name": st.just("f")}
                            )
                        }
                    ),
                }
            ),
        ),
        st.tuples(
            st.just("contentBlockDelta"),
            st.fixed_dictionaries(
                {
                    "contentBlockIndex": block,
                    "delta": st.fixed_dictionaries(
                        {"toolUse": st.fixed_dictionaries({"input": st.text(max_size=4)})}
                    ),
                }
            ),
        ),
        st.tuples(st.just("contentBlockStop"), st.fixed_dictionaries({"contentBlockIndex": block})),
    )
    events = draw(st.lists(event, max_size=12))
    events.append(("messageStop", {"stopReason": "tool_use"}))
    return events


@settings(max_examples=300, deadline=None)
@given(st.data(), st.booleans(), st.integers(1, 4))
def test_a_completed_call_never_changes(data: st.DataObject, bedrock: bool, batch: int) -> None:
    """Whatever events arrive and however they are batched: each index completes once, and
    the final response's calls are exactly the completed ones, in index order."""
    if bedrock:
        parser: Any = BedrockStreamParser(_TRANSPORT)
        events = [
            SSEEvent(json.dumps(p), event=k) for k, p in data.draw(st.composite(_bedrock_events)())
        ]
    else:
        parser = ResponsesStreamParser(_TRANSPORT)
        events = [SSEEvent(json.dumps(e)) for e in data.draw(st.composite(_responses_events)())]
    out: list[Any] = []
    try:
        for i in range(0, len(events), batch):
            out += feed_batch(parser, events[i : i + batch], _TRANSPORT.protocol_error)
        out += finish_stream(parser, _TRANSPORT.protocol_error)
    except ProviderError:
        return
    completed = {}
    for event in out:
        if isinstance(event, CompleteToolCall):
            assert event.index not in completed, f"call {event.index} completed twice"
            completed[event.index] = event.request
    final = out[-1]
    assert isinstance(final, ResponseCompleted)
    assert list(final.response.ai_message.tool_execution_requests) == [
        completed[i] for i in sorted(completed)
    ]
    # one call per output position (content block), however often it is described
    raw = [json.loads(e.data) for e in events]
    if bedrock:
        blocks = {e["contentBlockIndex"] for e in raw if "start" in e}
        assert len(completed) <= len(blocks)
    else:
        positions = {e["output_index"] for e in raw if "item" in e}
        final_output = raw[-1]["response"]["output"]
        assert len(completed) <= len(positions | set(range(len(final_output))))
