"""toolweave.ui: what the protocol adapters add to each streamed event.

The workload is one recorded `ToolService` stream (a scripted model answering with 400
characters in 1-character deltas, one tool call with ~2 KB of arguments in 4-character
deltas, the tool's result, a final answer: ~2,400 events), replayed from memory. The
baseline consumes the raw events; the other rows turn them into the AI SDK UI message
stream (chunks, then SSE text) or into AG-UI events encoded by the `ag-ui-protocol`
package's `EventEncoder`, as the ASGI app sends them. Rows are per event (the stream's time
over its event count).

Run alone with `python -m benchmarks.ui [--quick]`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sys
from collections.abc import AsyncIterator
from typing import Any

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, ToolService, tool

from ._harness import Row, async_case, measure

KEY = "a benchmark signing key, 32 bytes"


@tool
def place_order(items: list[dict[str, Any]], note: str = "") -> str:
    """Place an order."""
    return f"ordered {len(items)} items"


async def record() -> list[Any]:
    """The events of one conversation."""
    items = [{"name": f"item-{i:04d}", "qty": i % 9 + 1} for i in range(60)]
    call = ToolExecutionRequest(id="c1", name="place_order", arguments=json.dumps({"items": items}))
    script = [
        AiMessage("x" * 200, tool_execution_requests=[call]),
        AiMessage("y" * 200),
    ]
    model = ScriptedChatModel(script, chunk_size=1)
    service = ToolService().tools(place_order)
    events = [e async for e in service.achat_stream(model, None, "order")]
    return events


async def replay(events: list[Any]) -> AsyncIterator[Any]:
    for event in events:
        yield event


def run(quick: bool) -> list[Row]:
    """The raw stream and both adapters over the same events, measured interleaved."""
    from ag_ui.core import RunAgentInput
    from ag_ui.encoder import EventEncoder

    from toolweave.ui import ag_ui_events, ai_sdk_chunks, ai_sdk_sse

    loop = asyncio.new_event_loop()
    events = loop.run_until_complete(record())
    run_input = RunAgentInput(thread_id="t", run_id="r", messages=[])
    encoder = EventEncoder()

    async def raw() -> int:
        n = 0
        async for _ in replay(events):
            n += 1
        return n

    async def ai_sdk() -> int:
        n = 0
        async for text in ai_sdk_sse(ai_sdk_chunks(replay(events), key=KEY)):
            n += len(text)
        return n

    async def ag_ui() -> int:
        n = 0
        async for event in ag_ui_events(replay(events), run_input, key=KEY):
            n += len(encoder.encode(event))
        return n

    cases = [
        async_case("raw ToolService events (replayed)", raw, loop, number=20),
        async_case(
            "AI SDK UI message stream (chunks + SSE)",
            ai_sdk,
            loop,
            baseline="raw ToolService events (replayed)",
            number=20,
        ),
        async_case(
            "AG-UI events + EventEncoder",
            ag_ui,
            loop,
            baseline="raw ToolService events (replayed)",
            number=20,
        ),
    ]
    try:
        rows = measure(f"ui adapters, per event ({len(events)} events)", cases, quick=quick)
    finally:
        loop.close()
    return [dataclasses.replace(r, median_ns=r.median_ns / len(events)) for r in rows]


if __name__ == "__main__":
    from .__main__ import print_table

    print_table(run(quick="--quick" in sys.argv))
