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
