"""The invariant the SSE fuzz targets check (shared by the atheris target `sse_limits` and
the hypothesis properties; no atheris import here).

A stream, cut into arbitrary network reads of up to twice the event size limit, goes
through `SSEDecoder(max_event_size)` and the SSE providers' stream parsers (OpenAI Chat
Completions and Responses, Anthropic, Gemini); an AWS event stream (`check_event_stream`)
through `AwsEventStreamDecoder(max_event_size)` and Bedrock's parser:

- the decoder raises nothing but `SSEEventTooLarge`, and that only when the input is larger
  than the limit (the event-stream decoder also its typed `ProviderError` for a corrupt
  frame) (the transport turns it into `ProviderError` 183004);
- the parsers raise nothing but `ToolweaveError` (their typed `ProviderError`);
- each input finishes within a time budget (a hang guard: quadratic buffering of a long line
  blows it by orders of magnitude).
"""

from __future__ import annotations

import time
import zlib
from collections.abc import Iterable, Mapping

from toolweave.errors import ToolweaveError
from toolweave.providers import OpenAIStreamAggregator
from toolweave.providers._base import feed_batch, finish_stream
from toolweave.providers._eventstream import AwsEventStreamDecoder
from toolweave.providers._http import HttpTransport
from toolweave.providers._sse import SSEDecoder, SSEEvent, SSEEventTooLarge
from toolweave.providers.anthropic_chat import AnthropicStreamParser
from toolweave.providers.bedrock import BedrockStreamParser
from toolweave.providers.gemini_chat import GeminiStreamParser
from toolweave.providers.openai_responses import ResponsesStreamParser

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
        ResponsesStreamParser(_TRANSPORT),
    ]


def frame(headers: Mapping[str, str], payload: bytes) -> bytes:
    """One AWS event-stream frame (string headers, both CRCs right)."""
    head = b""
    for key, value in headers.items():
        # surrogatepass: a header may carry bytes that are not UTF-8
        k = key.encode("utf-8", "surrogatepass")[:255]
        v = value.encode("utf-8", "surrogatepass")[:65535]
        head += len(k).to_bytes(1, "big") + k + b"\x07" + len(v).to_bytes(2, "big") + v
    total = 12 + len(head) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(head).to_bytes(4, "big")
    message = prelude + zlib.crc32(prelude).to_bytes(4, "big") + head + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


def raw_frame(total: int, headers_length: int, body: bytes) -> bytes:
    """A frame whose prelude declares any lengths (the body need not fit them), with both
    CRCs right, so the lengths themselves are what the decoder checks."""
    prelude = (total % 2**32).to_bytes(4, "big") + (headers_length % 2**32).to_bytes(4, "big")
    message = prelude + zlib.crc32(prelude).to_bytes(4, "big") + body
    return message + zlib.crc32(message).to_bytes(4, "big")


def check_stream(chunks: Iterable[bytes], limit: int = LIMIT, budget: float = BUDGET) -> bool:
    """Run one SSE stream through the decoder and the parsers; assert the invariant.
    Whether the decoder refused an event as too large."""
    return _check(chunks, SSEDecoder(limit), _parsers(), limit, budget)


def check_event_stream(chunks: Iterable[bytes], limit: int = LIMIT, budget: float = BUDGET) -> bool:
    """Run one AWS event stream through the frame decoder and Bedrock's parser; assert the
    invariant. Whether the decoder refused a frame as too large."""
    decoder = AwsEventStreamDecoder(_TRANSPORT.protocol_error, limit)
    return _check(chunks, decoder, [BedrockStreamParser(_TRANSPORT)], limit, budget)


def _check(
    chunks: Iterable[bytes], decoder: object, parsers_: list[object], limit: int, budget: float
) -> bool:
    start = time.monotonic()
    parsers: list[object | None] = list(parsers_)
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
            batch = decoder.feed(chunk)  # type: ignore[attr-defined]
            if batch:
                deliver(batch)
        tail = decoder.flush()  # type: ignore[attr-defined]
        if tail:
            deliver(tail)
    except ToolweaveError:
        # a corrupt frame: the event-stream decoder's typed error (the SSE one has none)
        assert isinstance(decoder, AwsEventStreamDecoder), "the SSE decoder raised a typed error"
    except SSEEventTooLarge:
        refused = True
        # the event-stream decoder refuses a frame from its prelude's declared length
        assert size > limit or isinstance(decoder, AwsEventStreamDecoder), (
            f"SSEEventTooLarge for {size} bytes under the {limit} limit"
        )
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
