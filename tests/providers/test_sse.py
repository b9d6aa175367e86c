"""The incremental SSE parser."""

from __future__ import annotations

import itertools
import time

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolweave.providers._sse import SSEDecoder, SSEEvent, SSEEventTooLarge

STREAM = (
    ": a comment\r\n"
    "event: message_start\r\n"
    'data: {"a":1}\r\n'
    "\r\n"
    "data: line one\n"
    "data: line two\n"
    "id: 7\n"
    "retry: 3000\n"
    "\n"
    "data: 中文 and émoji 🎉\r"
    "\r"
    "data:no-space\n\n"
    "data: [DONE]\n\n"
)
EXPECTED = [
    SSEEvent(data='{"a":1}', event="message_start"),
    SSEEvent(data="line one\nline two", id="7", retry=3000),
    SSEEvent(data="中文 and émoji 🎉", id="7"),
    SSEEvent(data="no-space", id="7"),
    SSEEvent(data="[DONE]", id="7"),
]


def _run(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    out: list[SSEEvent] = []
    for chunk in chunks:
        out.extend(decoder.feed(chunk))
    return out + decoder.flush()


def test_whole_stream() -> None:
    events = _run([STREAM.encode()])
    assert events == EXPECTED
    assert events[-1].is_done and not events[0].is_done
    # the decoder builds its events without the dataclass __init__: they are the same
    # frozen, hashable values
    assert [type(e) for e in events] == [SSEEvent] * len(EXPECTED)
    assert {*events} == {*EXPECTED} and [repr(e) for e in events] == [repr(e) for e in EXPECTED]
    with pytest.raises(AttributeError):  # FrozenInstanceError
        events[0].data = "changed"  # type: ignore[misc]


def test_byte_by_byte() -> None:
    raw = STREAM.encode()
    assert _run([raw[i : i + 1] for i in range(len(raw))]) == EXPECTED


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=0, max_value=len(STREAM.encode())), max_size=30))
def test_any_chunking_gives_the_same_events(cuts: list[int]) -> None:
    raw = STREAM.encode()
    points = sorted(set(cuts))
    bounds = [0, *points, len(raw)]
    assert _run([raw[a:b] for a, b in itertools.pairwise(bounds)]) == EXPECTED


def test_unterminated_last_event_is_flushed_and_bom_dropped() -> None:
    assert _run(["\ufeffdata: x\n\ndata: tail".encode()]) == [SSEEvent("x"), SSEEvent("tail")]


def test_event_without_data_and_blank_lines() -> None:
    assert _run([b"\n\nevent: ping\n\n\n"]) == [SSEEvent("", event="ping")]


def test_one_long_line_is_buffered_in_linear_time() -> None:
    # 32 MiB without a newline in 16 KiB reads: the old `pending += text` copied the whole
    # line on every read (about 45 s here); joined once it takes well under a second. The
    # bound is only a hang guard.
    decoder = SSEDecoder()
    piece = b"x" * 16384
    start = time.monotonic()
    assert decoder.feed(b"data: ") == []
    for _ in range(2048):
        assert decoder.feed(piece) == []
    (event,) = decoder.feed(b"\n\n")
    assert time.monotonic() - start < 15
    assert len(event.data) == 2048 * 16384


def test_max_event_size_bounds_a_line_and_the_data_of_one_event() -> None:
    decoder = SSEDecoder(max_event_size=100)
    with pytest.raises(SSEEventTooLarge):
        for _ in range(20):
            decoder.feed(b"data: " + b"x" * 10)
    decoder = SSEDecoder(max_event_size=100)
    with pytest.raises(SSEEventTooLarge):
        for _ in range(20):
            decoder.feed(b"data: " + b"x" * 10 + b"\n")  # many data lines, one event
    decoder = SSEDecoder(max_event_size=100)
    for _ in range(50):  # many small events are fine
        assert decoder.feed(b"data: " + b"x" * 60 + b"\n\n")[0].data == "x" * 60
