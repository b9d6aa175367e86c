"""OpenAI stream aggregation: our aggregator against a plain dict-by-index accumulator.

The workload is the parsing/aggregation part only (no HTTP, no SSE, no JSON decoding): a
Chat Completions stream of 3 tool calls with about 2 KB of arguments each, in deltas of 1 to
4 characters, fed as pre-parsed chunk dicts. `OpenAIStreamAggregator` also emits
`PartialToolCall` and `CompleteToolCall` events and handles the missing index / sentinel /
split-id cases; the baseline only concatenates by index. Target: ≤ 1.5x.

The target row feeds the chunks as the HTTP layer does: those of one network read at a
time (`feed_chunks`), the read's argument fragments coalesced into one `PartialToolCall`.
The other rows feed one chunk at a time (`feed_chunk`, one event per fragment, the way the
peers are measured), with and without building the events, to show what one event object
per fragment costs.

Run alone with `python -m benchmarks.stream_aggregation [--quick]`.
"""

from __future__ import annotations

import json
import random
import sys
from typing import Any

from toolweave.providers import OpenAIStreamAggregator

from ._harness import Row, measure, sync_case

READ = 16
"""Chunks per network read for the coalesced row: ~3 KB of SSE, a small fraction of what one
read returns when the stream arrives faster than it is consumed (when aggregation cost
matters at all)."""


def make_chunks(calls: int = 3, size: int = 2048, seed: int = 7) -> list[dict[str, Any]]:
    """The chunk dicts of one streamed response with `calls` tool calls."""
    rnd = random.Random(seed)
    chunks: list[dict[str, Any]] = []

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            "id": "chatcmpl-bench",
            "object": "chat.completion.chunk",
            "created": 1,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }

    chunks.append(chunk({"role": "assistant", "content": None}))
    for index in range(calls):
        payload = {"items": [], "note": ""}
        while len(json.dumps(payload)) < size:
            payload["items"].append(
                {"name": f"item-{rnd.randint(0, 10**6)}", "qty": rnd.randint(1, 9)}
            )
        args = json.dumps(payload)
        chunks.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": f"call_{index}",
                            "type": "function",
                            "function": {"name": "place_order", "arguments": ""},
                        }
                    ]
                }
            )
        )
        i = 0
        while i < len(args):
            n = rnd.randint(1, 4)
            chunks.append(
                chunk(
                    {"tool_calls": [{"index": index, "function": {"arguments": args[i : i + n]}}]}
                )
            )
            i += n
    chunks.append(chunk({}, "tool_calls"))
    chunks.append(
        {
            "id": "chatcmpl-bench",
            "choices": [],
            "usage": {"prompt_tokens": 1, "completion_tokens": 2, "total_tokens": 3},
        }
    )
    return chunks


def aggregate(chunks: list[dict[str, Any]], emit_partials: bool = True) -> list[Any]:
    """Our aggregator: events for every chunk, then the final response."""
    aggregator = OpenAIStreamAggregator(emit_partials=emit_partials)
    events: list[Any] = []
    for c in chunks:
        events.extend(aggregator.feed_chunk(c))
    events.extend(aggregator.finish())
    return events


def aggregate_per_read(chunks: list[dict[str, Any]], per_read: int = READ) -> list[Any]:
    """Our aggregator fed as the HTTP layer feeds it: the chunks of one network read at a
    time, consecutive argument fragments coalesced into one event per read."""
    aggregator = OpenAIStreamAggregator()
    events: list[Any] = []
    for i in range(0, len(chunks), per_read):
        events.extend(aggregator.feed_chunks(chunks[i : i + per_read]))
    events.extend(aggregator.finish())
    return events


def baseline(chunks: list[dict[str, Any]]) -> dict[int, tuple[str, str, str]]:
    """The plain accumulator: id/name/argument buffers in a dict keyed by index."""
    calls: dict[int, list[Any]] = {}
    for c in chunks:
        for choice in c.get("choices") or ():
            for tc in (choice.get("delta") or {}).get("tool_calls") or ():
                buf = calls.get(tc["index"])
                if buf is None:
                    buf = calls[tc["index"]] = [None, None, []]
                if tc.get("id"):
                    buf[0] = tc["id"]
                fn = tc.get("function") or {}
                if fn.get("name"):
                    buf[1] = fn["name"]
                if fn.get("arguments"):
                    buf[2].append(fn["arguments"])
    return {i: (b[0], b[1], "".join(b[2]) or "{}") for i, b in calls.items()}


def run(quick: bool) -> list[Row]:
    """Both accumulators over the same chunks, measured interleaved."""
    chunks = make_chunks()
    ours = aggregate(chunks)[-1].response.ai_message.tool_execution_requests
    assert aggregate_per_read(chunks)[-1].response.ai_message.tool_execution_requests == ours
    plain = baseline(chunks)
    assert [(r.id, r.name, r.arguments) for r in ours] == [plain[i] for i in sorted(plain)]
    cases = [
        sync_case("plain dict-by-index accumulator", lambda: baseline(chunks), number=20),
        sync_case(
            f"OpenAIStreamAggregator ({len(chunks)} chunks, 3 calls x 2 KB), "
            f"fed per network read ({READ} chunks)",
            lambda: aggregate_per_read(chunks),
            baseline="plain dict-by-index accumulator",
            number=20,
        ),
        sync_case(
            "OpenAIStreamAggregator, fed one chunk at a time",
            lambda: aggregate(chunks),
            baseline="plain dict-by-index accumulator",
            number=20,
        ),
        sync_case(
            "OpenAIStreamAggregator, one chunk at a time, no PartialToolCall events",
            lambda: aggregate(chunks, emit_partials=False),
            baseline="plain dict-by-index accumulator",
            number=20,
        ),
    ]
    return measure("stream aggregation", cases, quick=quick)


if __name__ == "__main__":
    from .__main__ import print_table

    print_table(run(quick="--quick" in sys.argv[1:]))
