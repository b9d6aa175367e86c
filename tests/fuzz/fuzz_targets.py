"""Coverage-guided fuzz targets (atheris / libFuzzer).

Run one target for a while:  python tests/fuzz/fuzz_targets.py arguments -max_total_time=60
Targets: arguments (parse + repair + both validators), dialects (every transform on an
arbitrary JSON schema), sse (the providers' SSE decoder and OpenAI stream aggregation),
sse_limits (streams up to twice the event size limit through the limited decoder and the
SSE providers' parsers, with a time budget per input), eventstream (AWS event-stream frames,
well-formed or corrupted, through the limited frame decoder and Bedrock's parser),
repair (arguments amplified up to the 4 MiB limit, with a time budget per input), openapi
(OpenAPI import of arbitrary text, dicts and generated $ref bombs, with a time budget),
constrained (constrained replies from hostile pieces: bad escapes, lone surrogates, more
calls than the cap, tools outside the plan; chat and stream faces agree and the plan holds),
responses (Responses streams whose final object lists the calls in another order or without
their ids: each call announced once) (tests/fuzz/provider_shapes.py).
Anything but the documented typed errors is a crash.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import atheris

with atheris.instrument_imports(include=["toolweave"]):
    import hardening
    import provider_shapes
    from sse_invariant import (
        LIMIT,
        MAX_INPUT,
        check_event_stream,
        check_stream,
        frame,
        raw_frame,
    )

    from toolweave import (
        SchemaError,
        ToolArgumentsError,
        ToolCard,
        ToolCardError,
        ToolweaveError,
        tool,
    )
    from toolweave.dialects import (
        to_anthropic_strict,
        to_gemini_json_schema,
        to_gemini_openapi,
        to_openai_strict,
    )
    from toolweave.providers import OpenAIStreamAggregator
    from toolweave.providers._base import feed_batch, finish_stream
    from toolweave.providers._http import HttpTransport
    from toolweave.providers._sse import SSEDecoder
    from toolweave.providers.anthropic_chat import AnthropicStreamParser
    from toolweave.schema import JsonSchemaArgumentsValidator, parse_arguments


@tool
def _sample(name: str, count: int, ratio: float = 1.0, tags: list[str] | None = None) -> str:
    """Fuzzed tool."""
    return name


_SCHEMA_VALIDATOR = JsonSchemaArgumentsValidator(
    {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "n": {"type": "integer", "default": 3},
            "items": {"type": "array", "items": {"type": "number"}},
        },
        "required": ["q"],
    },
    tool_name="search",
)


def fuzz_arguments(data: bytes) -> None:
    """Raw argument bytes through every parsing/validation entry point."""
    for call in (
        lambda: parse_arguments(data),
        lambda: _sample.prepare_inputs(data),
        lambda: _SCHEMA_VALIDATOR.validate_json(data),
    ):
        try:
            call()
        except ToolArgumentsError as e:
            assert e.message
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        _sample.prepare_inputs(text)
    except ToolArgumentsError:
        pass


def fuzz_dialects(data: bytes) -> None:
    """Any JSON object as a schema: every transform returns a dict or raises SchemaError."""
    try:
        schema: Any = json.loads(data)
    except (ValueError, RecursionError):
        return
    if not isinstance(schema, dict):
        return
    for transform in (
        to_openai_strict,
        to_anthropic_strict,
        to_gemini_openapi,
        to_gemini_json_schema,
    ):
        try:
            out = transform(schema)
        except (SchemaError, RecursionError):
            continue
        assert isinstance(out, dict)
        json.dumps(out)
    try:
        ToolCard(name="fuzzed", input_params=schema)
    except ToolCardError:
        pass


_TRANSPORT = HttpTransport(provider="fuzz", headers={}, secrets=())


def fuzz_sse(data: bytes) -> None:
    """Arbitrary bytes, cut at an arbitrary point, through the SSE decoder and the OpenAI
    stream aggregator: the same events whatever the cut; garbage gives a typed error."""
    fdp = atheris.FuzzedDataProvider(data)
    cut = fdp.ConsumeIntInRange(0, len(data))
    whole = SSEDecoder()
    expected = [*whole.feed(data), *whole.flush()]
    split = SSEDecoder()
    got = [*split.feed(data[:cut]), *split.feed(data[cut:]), *split.flush()]
    assert [(e.event, e.data, e.id) for e in got] == [(e.event, e.data, e.id) for e in expected]
    for parser in (OpenAIStreamAggregator(_TRANSPORT), AnthropicStreamParser(_TRANSPORT)):
        try:
            feed_batch(parser, got, _TRANSPORT.protocol_error)
            finish_stream(parser, _TRANSPORT.protocol_error)
        except ToolweaveError:
            pass  # documented: a malformed stream is a typed ProviderError


def fuzz_sse_limits(data: bytes) -> None:
    """Streams up to twice the event size limit, built from fuzzed pieces repeated up to
    4096 times and cut into fuzzed reads, through the size-limited decoder and the three
    providers' parsers: only the typed errors escape, within the time budget
    (tests/fuzz/sse_invariant.py)."""
    fdp = atheris.FuzzedDataProvider(data)
    chunks: list[bytes] = []
    total = 0
    while fdp.remaining_bytes() and total < MAX_INPUT:
        piece = fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 64))
        if not piece:
            break
        block = (piece * fdp.ConsumeIntInRange(1, 4096))[: MAX_INPUT - total]
        step = max(fdp.ConsumeIntInRange(1, 16384), len(block) // 2048)
        chunks.extend(block[i : i + step] for i in range(0, len(block), step))
        total += len(block)
    check_stream(chunks)


def fuzz_repair(data: bytes) -> None:
    """Raw argument bytes, amplified up to the 4 MiB limit: typed error, bounded message,
    per-input time budget (tests/fuzz/hardening.py)."""
    hardening.check_arguments(data)


def fuzz_openapi(data: bytes) -> None:
    """Bytes as an OpenAPI document (text, dict or generated $ref bomb): tools or
    ToolCardError, per-input time budget (tests/fuzz/hardening.py)."""
    hardening.check_openapi(data)


_EVENT_TYPES = [
    "messageStart",
    "contentBlockStart",
    "contentBlockDelta",
    "contentBlockStop",
    "messageStop",
    "metadata",
    "",
]
_PAYLOADS = [
    b'{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"t1","name":"f"}}}',
    b'{"contentBlockIndex":0,"delta":{"toolUse":{"input":"{\\"a\\":1}"}}}',
    b'{"contentBlockIndex":0,"delta":{"text":"x"}}',
    b'{"contentBlockIndex":0,"delta":{"reasoningContent":{"text":"r","signature":"s"}}}',
    b'{"contentBlockIndex":0}',
    b'{"stopReason":"tool_use"}',
    b'{"usage":{"inputTokens":1,"outputTokens":2,"totalTokens":3}}',
    b'{"message":"slow down"}',
    b'"\\ud800"',
    b"[" * 5000 + b"]" * 5000,
]


def fuzz_eventstream(data: bytes) -> None:
    """AWS event-stream frames with right CRCs (fuzzed event types, headers and payloads,
    some frames declaring up to twice the size limit), now and then corrupted, cut into
    fuzzed reads, through the limited frame decoder and Bedrock's parser: only the typed
    errors escape, within the time budget (tests/fuzz/sse_invariant.py)."""
    fdp = atheris.FuzzedDataProvider(data)
    stream = bytearray()
    while fdp.remaining_bytes() and len(stream) < MAX_INPUT:
        choice = fdp.ConsumeIntInRange(0, 4)
        if choice == 4:  # any declared lengths, CRCs right
            total = fdp.ConsumeIntInRange(0, 3 * LIMIT)
            body = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 512))
            stream += raw_frame(total, fdp.ConsumeIntInRange(0, 2**32 - 1), body)
            continue
        if choice == 0:
            headers = {":message-type": "event", ":event-type": fdp.PickValueInList(_EVENT_TYPES)}
        elif choice == 1:
            headers = {":message-type": "exception", ":exception-type": fdp.ConsumeUnicode(16)}
        else:
            headers = {fdp.ConsumeUnicode(8): fdp.ConsumeUnicode(16)}
            headers[":event-type"] = fdp.PickValueInList(_EVENT_TYPES)
        if fdp.ConsumeBool():
            payload = fdp.PickValueInList(_PAYLOADS)
        else:
            payload = fdp.ConsumeBytes(fdp.ConsumeIntInRange(0, 256))
        payload *= fdp.ConsumeIntInRange(1, 2 * LIMIT // max(len(payload), 1) + 1)
        piece = bytearray(frame(headers, payload[: 2 * LIMIT]))
        if fdp.ConsumeIntInRange(0, 15) == 0 and piece:  # corrupt one byte
            piece[fdp.ConsumeIntInRange(0, len(piece) - 1)] ^= fdp.ConsumeIntInRange(1, 255)
        stream += piece
    step = fdp.ConsumeIntInRange(1, 16384)
    check_event_stream(bytes(stream[i : i + step]) for i in range(0, len(stream), step))


def fuzz_constrained(data: bytes) -> None:
    """A constrained reply assembled from hostile pieces and cut into stream chunks, under
    three plans: only ProviderError 183004, the same from chat and stream, the plan held
    (tests/fuzz/provider_shapes.py)."""
    provider_shapes.check_constrained_reply(*provider_shapes.constrained_from_bytes(data))


def fuzz_responses(data: bytes) -> None:
    """Function calls streamed with or without ids, listed by response.completed in any
    order with ids dropped: each call completed once, the final calls the announced ones
    (tests/fuzz/provider_shapes.py)."""
    provider_shapes.check_responses_stream(*provider_shapes.responses_from_bytes(data))


TARGETS = {
    "arguments": fuzz_arguments,
    "dialects": fuzz_dialects,
    "sse": fuzz_sse,
    "sse_limits": fuzz_sse_limits,
    "repair": fuzz_repair,
    "openapi": fuzz_openapi,
    "eventstream": fuzz_eventstream,
    "constrained": fuzz_constrained,
    "responses": fuzz_responses,
}


def main() -> None:
    name = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith("-") else "arguments"
    argv = [sys.argv[0], *[a for a in sys.argv[1:] if a != name]]
    atheris.Setup(argv, TARGETS[name])
    atheris.Fuzz()


if __name__ == "__main__":
    main()
