"""Hypothesis side of the SSE fuzzing (tests/fuzz/sse_invariant.py): generated streams up
to twice the event size limit, and one at the real default limit, keep the typed-error
invariant within the time budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from toolweave.providers import DEFAULT_MAX_RESPONSE_BYTES

from .sse_invariant import LIMIT, MAX_INPUT, check_stream

_PIECES = st.sampled_from(
    [
        b"data: ",
        b"data: [DONE]\n\n",
        b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n',
        b'event: message_start\ndata: {"type":"message_start","message":{}}\n\n',
        b'data: {"candidates":[{"content":{"parts":[{"text":"x"}]}}]}\n\n',
        b'{"a":',
        b"[",
        b"\r",
        b"\n",
        b"\n\n",
        b": comment\n",
        b"\xf0\x9f",
        b"x" * 1024,
    ]
) | st.binary(min_size=1, max_size=64)


@st.composite
def _streams(draw: st.DrawFn) -> list[bytes]:
    chunks: list[bytes] = []
    total = 0
    for piece, repeat, step in draw(
        st.lists(st.tuples(_PIECES, st.integers(1, 2048), st.integers(1, 16384)), max_size=12)
    ):
        block = (piece * repeat)[: MAX_INPUT - total]
        step = max(step, len(block) // 2048)
        chunks.extend(block[i : i + step] for i in range(0, len(block), step))
        total += len(block)
    return chunks


@settings(max_examples=200, deadline=None)
@given(_streams())
def test_generated_streams_keep_the_typed_error_invariant(chunks: list[bytes]) -> None:
    check_stream(chunks)


@pytest.mark.parametrize("newlines", [False, True], ids=["one-line", "many-data-lines"])
def test_a_stream_at_the_default_limit(newlines: bool) -> None:
    # One event just over the real default limit, in 64 KiB reads: the typed error, in time.
    line = b"data: " + b"y" * 65530 + (b"\ndata: " if newlines else b"")
    reads = DEFAULT_MAX_RESPONSE_BYTES // len(line) + 2
    stream = (line for _ in range(reads))
    assert check_stream(stream, limit=DEFAULT_MAX_RESPONSE_BYTES, budget=30.0)
    assert LIMIT < DEFAULT_MAX_RESPONSE_BYTES
