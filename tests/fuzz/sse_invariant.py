"""The invariant the SSE fuzz targets check (shared by the atheris target `sse_limits` and
the hypothesis properties; no atheris import here).

A stream, cut into arbitrary network reads of up to twice the event size limit, goes
through `SSEDecoder(max_event_size)` and the three providers' stream parsers:

- the decoder raises nothing but `SSEEventTooLarge`, and that only when the input is larger
  than the limit (the transport turns it into `ProviderError` 183004);
- the parsers raise nothing but `ToolweaveError` (their typed `ProviderError`);
- each input finishes within a time budget (a hang guard: quadratic buffering of a long line
  blows it by orders of magnitude).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from toolweave.errors import ToolweaveError
from toolweave.providers import OpenAIStreamAggregator
from toolweave.providers._base import feed_batch, finish_stream
from toolweave.providers._http import HttpTransport
from toolweave.providers._sse import SSEDecoder, SSEEvent, SSEEventTooLarge
from toolweave.providers.anthropic_chat import AnthropicStreamParser
from toolweave.providers.gemini_chat import GeminiStreamParser

LIMIT = 64 * 1024
"""The event size limit used by the fuzz targets (small, so inputs reach and pass it)."""
MAX_INPUT = 2 * LIMIT + 4096
BUDGET = 5.0
"""Seconds per input: a hang guard, not a benchmark (an input takes milliseconds)."""

_TRANSPORT = HttpTransport(provider="fuzz", headers={}, secrets=())


def _parsers() -> list[object]:
    return [
        OpenAIStreamAggregator(_TRANSPORT),
        AnthropicStreamParser(_TRANSPORT),
        GeminiStreamParser(_TRANSPORT),
    ]


def check_stream(chunks: Iterable[bytes], limit: int = LIMIT, budget: float = BUDGET) -> bool:
    """Run one stream through the decoder and the parsers; assert the invariant. Whether
    the decoder refused an event as too large."""
    start = time.monotonic()
    decoder = SSEDecoder(limit)
    parsers: list[object | None] = list(_parsers())
    size = 0
    refused = False

    def deliver(batch: list[SSEEvent]) -> None:
        for i, parser in enumerate(parsers):
            if parser is None:
                continue
            try:
                feed_batch(parser, batch, _TRANSPORT.protocol_error)  # type: ignore[arg-type]
            except ToolweaveError:
                parsers[i] = None  # typed: the stream is over for this parser

    try:
        for chunk in chunks:
            size += len(chunk)
            batch = decoder.feed(chunk)
            if batch:
                deliver(batch)
        tail = decoder.flush()
        if tail:
            deliver(tail)
    except SSEEventTooLarge:
        refused = True
        assert size > limit, f"SSEEventTooLarge for {size} bytes under the {limit} limit"
    else:
        for parser in parsers:
            if parser is not None:
                try:
                    finish_stream(parser, _TRANSPORT.protocol_error)  # type: ignore[arg-type]
                except ToolweaveError:
                    pass
    elapsed = time.monotonic() - start
    assert elapsed < budget, f"{size} bytes took {elapsed:.2f} s (budget {budget} s)"
    return refused
