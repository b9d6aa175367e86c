"""Fragments of one network read are coalesced: fewer PartialToolCall events, same result."""

from __future__ import annotations

from typing import Any

from benchmarks.stream_aggregation import make_chunks
from hypothesis import given, settings
from hypothesis import strategies as st

from toolweave.chat import CompleteToolCall, PartialToolCall, ResponseCompleted
from toolweave.providers import OpenAIStreamAggregator

CHUNKS = make_chunks(calls=3, size=300, seed=3)


def _run(batches: list[list[dict[str, Any]]]) -> list[Any]:
    aggregator = OpenAIStreamAggregator()
    events: list[Any] = []
    for batch in batches:
        events.extend(aggregator.feed_chunks(batch))
    events.extend(aggregator.finish())
    return events


def _one_by_one() -> list[Any]:
    aggregator = OpenAIStreamAggregator()
    events: list[Any] = []
    for chunk in CHUNKS:
        events.extend(aggregator.feed_chunk(chunk))
    events.extend(aggregator.finish())
    return events


def _arguments_by_index(events: list[Any]) -> dict[int, str]:
    out: dict[int, str] = {}
    for e in events:
        if isinstance(e, PartialToolCall):
            out[e.index] = out.get(e.index, "") + e.arguments_delta
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=60))
def test_any_batching_gives_the_same_calls_and_partials(sizes: list[int]) -> None:
    batches, pos, k = [], 0, 0
    while pos < len(CHUNKS):
        n = sizes[k % len(sizes)]
        batches.append(CHUNKS[pos : pos + n])
        pos += n
        k += 1
    events = _run(batches)
    reference = _one_by_one()
    final = events[-1]
    assert isinstance(final, ResponseCompleted)
    assert final.response == reference[-1].response
    assert _arguments_by_index(events) == _arguments_by_index(reference)
    # a call's fragments all come before its CompleteToolCall, and calls stay in order
    seen_complete: set[int] = set()
    for e in events:
        if isinstance(e, PartialToolCall):
            assert e.index not in seen_complete
        elif isinstance(e, CompleteToolCall):
            seen_complete.add(e.index)
    assert [e.index for e in events if isinstance(e, CompleteToolCall)] == [0, 1, 2]


def test_one_read_of_many_fragments_gives_one_event_per_call_segment() -> None:
    events = _run([CHUNKS])
    partials = [e for e in events if isinstance(e, PartialToolCall)]
    one_by_one = [e for e in _one_by_one() if isinstance(e, PartialToolCall)]
    assert len(partials) < len(one_by_one) / 20


def test_malformed_stream_events_are_a_typed_provider_error() -> None:
    import pytest

    from toolweave import ErrorCode, ProviderError
    from toolweave.providers._base import feed_batch, finish_stream
    from toolweave.providers._http import HttpTransport
    from toolweave.providers._sse import SSEDecoder

    transport = HttpTransport(provider="openai", headers={}, secrets=())
    for raw in (
        b'data: {"choices":[{"index":0,"delta":"text"}]}\n\n',  # delta is not an object
        b'data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":{"x":1}}]},'
        b'"finish_reason":"tool_calls"}]}\n\ndata: [DONE]\n\n',  # id is not a string
    ):
        parser = OpenAIStreamAggregator(transport)
        with pytest.raises(ProviderError) as info:
            feed_batch(parser, SSEDecoder().feed(raw), transport.protocol_error)
            finish_stream(parser, transport.protocol_error)
        assert info.value.code == ErrorCode.PROVIDER_RESPONSE_INVALID
        assert "unexpected shape" in info.value.message


def test_fragments_before_a_bad_event_stay_in_their_call() -> None:
    """The fast path buffers a read's fragments; an event that fails mid-read (not JSON)
    must not lose the fragments that came before it."""
    import json

    import pytest

    from toolweave import ProviderError
    from toolweave.providers._http import HttpTransport
    from toolweave.providers._sse import SSEEvent

    transport = HttpTransport(provider="openai", headers={}, secrets=())
    calls = [c for c in CHUNKS if c["choices"] and c["choices"][0]["delta"].get("tool_calls")]
    first_call = [c for c in calls if c["choices"][0]["delta"]["tool_calls"][0]["index"] == 0]
    expected = "".join(
        c["choices"][0]["delta"]["tool_calls"][0]["function"]["arguments"] for c in first_call
    )
    events = [SSEEvent(json.dumps(c)) for c in first_call] + [SSEEvent("{not json")]
    aggregator = OpenAIStreamAggregator(transport)
    with pytest.raises(ProviderError):
        aggregator.feed_batch(events)
    assert [(r.id, r.arguments) for r in aggregator.requests] == [("call_0", expected)]


def test_reading_requests_mid_stream_does_not_change_a_call_id() -> None:
    """`requests` before a call's id has arrived gives it a stand-in id; the call keeps the
    id its fragments bring (it used to keep the stand-in and append the real id to it)."""

    def chunk(fragment: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        delta = {"tool_calls": [fragment]} if fragment else {}
        return {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    aggregator = OpenAIStreamAggregator()
    aggregator.feed_chunk(chunk({"index": 0, "function": {"name": "f", "arguments": "{"}}))
    assert aggregator.requests[0].id.startswith("call_")  # a stand-in, nothing arrived yet
    aggregator.feed_chunk(chunk({"index": 0, "id": "call_real", "function": {"arguments": "}"}}))
    events = aggregator.feed_chunk(chunk({}, "tool_calls")) + aggregator.finish()
    completed = [e.request for e in events if isinstance(e, CompleteToolCall)]
    assert [(r.id, r.name, r.arguments) for r in completed] == [("call_real", "f", "{}")]
    assert events[-1].response.ai_message.tool_execution_requests == tuple(completed)


@st.composite
def _decorated_streams(
    draw: st.DrawFn,
) -> tuple[list[dict[str, Any]], str, list[tuple[str, str, str]]]:
    """Streams whose chunks carry the optional keys real servers add or omit (`logprobs`,
    a missing `finish_reason` or choice `index`, `role`/`content: null` in every delta,
    `type` on every fragment, `usage: null`, an id repeated or split across fragments), so
    some fragments take the fast path and some the general one; with the text and the
    calls' raw arguments they carry."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        choice: dict[str, Any] = {"delta": delta}
        if finish is not None or draw(st.booleans()):
            choice["finish_reason"] = finish
        if draw(st.integers(0, 5)):
            choice["index"] = 0
        if draw(st.booleans()):
            choice["logprobs"] = None
        out: dict[str, Any] = {"id": "chatcmpl-x", "choices": [choice]}
        if draw(st.booleans()):
            out["usage"] = None
        return out

    def decorate(delta: dict[str, Any]) -> dict[str, Any]:
        kind = draw(st.integers(0, 6))
        if kind == 0:
            return {"role": "assistant", **delta}
        if kind == 1:
            return {"content": None, **delta}
        return delta

    text = draw(st.lists(st.text(min_size=1, max_size=3), max_size=4))
    chunks = [chunk(decorate({"content": piece})) for piece in text]
    calls: list[tuple[str, str, str]] = []
    for i in range(draw(st.integers(0, 3))):
        pieces = draw(st.lists(st.text(min_size=1, max_size=4), max_size=12))
        call_id = f"call_{i}"
        first = {"index": i, "id": call_id, "type": "function", "function": {"name": f"t{i}"}}
        first["function"]["arguments"] = pieces.pop(0) if pieces and draw(st.booleans()) else ""
        # an id split across the first two fragments (its rest comes with arguments)
        rest = call_id[draw(st.integers(1, len(call_id) - 1)) :] if pieces else ""
        if rest and draw(st.booleans()):
            first["id"] = call_id[: -len(rest)]
        else:
            rest = ""
        chunks.append(chunk(decorate({"tool_calls": [first]})))
        args = first["function"]["arguments"]
        for k, piece in enumerate(pieces):
            fragment: dict[str, Any] = {"index": i, "function": {"arguments": piece}}
            if k == 0 and rest:
                fragment["id"] = rest
            elif draw(st.integers(0, 5)) == 0:
                fragment["id"] = call_id  # some servers repeat the id
            if draw(st.integers(0, 5)) == 0:
                fragment["type"] = "function"
            chunks.append(chunk(decorate({"tool_calls": [fragment]})))
            args += piece
        calls.append((f"call_{i}", f"t{i}", args))
    chunks.append(chunk({}, "tool_calls" if calls else "stop"))
    return chunks, "".join(text), calls


@settings(max_examples=200, deadline=None)
@given(_decorated_streams(), st.lists(st.integers(1, 9), min_size=1, max_size=20))
def test_fast_and_general_paths_aggregate_alike(
    stream: tuple[list[dict[str, Any]], str, list[tuple[str, str, str]]], sizes: list[int]
) -> None:
    chunks, text, calls = stream
    for feed in ("one by one", "batched"):
        aggregator = OpenAIStreamAggregator()
        events: list[Any] = []
        if feed == "one by one":
            for c in chunks:
                events.extend(aggregator.feed_chunk(c))
        else:
            pos = k = 0
            while pos < len(chunks):
                n = sizes[k % len(sizes)]
                events.extend(aggregator.feed_chunks(chunks[pos : pos + n]))
                pos, k = pos + n, k + 1
        events.extend(aggregator.finish())
        message = events[-1].response.ai_message
        assert (message.text or "") == text
        got = [(r.id, r.name, r.arguments) for r in message.tool_execution_requests]
        assert got == [(i, n, a if a.strip() else "{}") for i, n, a in calls]
        # every call's first fragment is an event (it carries id and name)
        assert _arguments_by_index(events) == {i: a for i, (_, _, a) in enumerate(calls)}


def _anthropic_stream(arguments: str, step: int = 3) -> bytes:
    import json

    def event(kind: str, **data: Any) -> str:
        return f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n"

    parts = [
        event(
            "message_start",
            message={"id": "msg_1", "model": "claude", "usage": {"input_tokens": 3}},
        ),
        event("content_block_start", index=0, content_block={"type": "text", "text": ""}),
        event("content_block_delta", index=0, delta={"type": "text_delta", "text": "Hi"}),
        event("content_block_delta", index=0, delta={"type": "text_delta", "text": " there"}),
        event("content_block_stop", index=0),
        event(
            "content_block_start",
            index=1,
            content_block={"type": "tool_use", "id": "toolu_1", "name": "weather", "input": {}},
        ),
    ]
    for i in range(0, len(arguments), step):
        delta = {"type": "input_json_delta", "partial_json": arguments[i : i + step]}
        parts.append(event("content_block_delta", index=1, delta=delta))
    parts += [
        event("content_block_stop", index=1),
        event("message_delta", delta={"stop_reason": "tool_use"}, usage={"output_tokens": 9}),
        event("message_stop"),
    ]
    return "".join(parts).encode()


def test_other_providers_coalesce_fragments_per_read_too() -> None:
    """Anthropic's parser has no batch entry point: `feed_batch` merges the argument
    fragments of one call within a read, and keeps text deltas and order as they were."""
    from toolweave.chat import TextDelta
    from toolweave.providers._base import feed_batch, finish_stream
    from toolweave.providers._http import HttpTransport
    from toolweave.providers._sse import SSEDecoder
    from toolweave.providers.anthropic_chat import AnthropicStreamParser

    transport = HttpTransport(provider="anthropic", headers={}, secrets=())
    arguments = '{"city": "Paris", "days": [1, 2, 3], "note": "' + "x" * 200 + '"}'
    raw = _anthropic_stream(arguments)

    def run(reads: list[bytes]) -> list[Any]:
        parser, decoder, events = AnthropicStreamParser(transport), SSEDecoder(), []
        for read in reads:
            events += feed_batch(parser, decoder.feed(read), transport.protocol_error)
        return events + finish_stream(parser, transport.protocol_error)

    one_read = run([raw])
    by_event = run([raw[i : i + 1] for i in range(len(raw))])  # one event per read at most
    for events in (one_read, by_event):
        partials = [e for e in events if isinstance(e, PartialToolCall)]
        assert "".join(p.arguments_delta for p in partials) == arguments
        assert (partials[0].id, partials[0].name) == ("toolu_1", "weather")
        assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hi", " there"]
        assert isinstance(events[-1], ResponseCompleted)
    assert len([e for e in one_read if isinstance(e, PartialToolCall)]) == 1
    assert len([e for e in by_event if isinstance(e, PartialToolCall)]) > 50
    assert one_read[-1].response == by_event[-1].response
    assert [type(e).__name__ for e in one_read] == [
        "TextDelta",
        "TextDelta",
        "PartialToolCall",
        "CompleteToolCall",
        "ResponseCompleted",
    ]
