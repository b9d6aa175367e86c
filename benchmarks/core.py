"""Core tool layer overhead against a plain baseline (json.loads + direct call + json.dumps).

Workloads: declaring a tool (cold), cached dialect access, sync invoke from the raw JSON
string through `DefaultToolExecutor.execute_with_result`, async invoke of an async tool,
a sync body called from async code, and the invalid-arguments path down to the error text.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from toolweave import DefaultToolExecutor, ToolArgumentsError, ToolExecutionRequest, tool
from toolweave.dialects import openai_tool

from ._harness import Case, Row, async_case, measure, sync_case

RAW = '{"city": "Paris", "days": 3, "metric": true}'
BAD = '{"days": "three", "metric": true}'


def forecast(city: str, days: int = 1, metric: bool = True) -> dict[str, Any]:
    """Weather forecast for a city.

    Args:
        city: the city name
        days: how many days
        metric: metric units
    """
    return {"city": city, "days": days, "unit": "C" if metric else "F"}


async def aforecast(city: str, days: int = 1, metric: bool = True) -> dict[str, Any]:
    """Async weather forecast."""
    return {"city": city, "days": days, "unit": "C" if metric else "F"}


def run(quick: bool) -> list[Row]:
    """The core workloads, measured interleaved in this process."""
    sync_tool = tool(forecast)
    async_tool = tool(aforecast)
    sync_exec = DefaultToolExecutor(sync_tool)
    async_exec = DefaultToolExecutor(async_tool)
    request = ToolExecutionRequest(id="call_1", name="forecast", arguments=RAW)
    arequest = ToolExecutionRequest(id="call_1", name="aforecast", arguments=RAW)
    bad_request = ToolExecutionRequest(id="call_2", name="forecast", arguments=BAD)
    card = sync_tool.card
    openai_tool(card)  # fill the cache

    def baseline() -> str:
        return json.dumps(forecast(**json.loads(RAW)))

    async def abaseline() -> str:
        return json.dumps(await aforecast(**json.loads(RAW)))

    async def abaseline_thread() -> str:
        result = await asyncio.to_thread(forecast, **json.loads(RAW))
        return json.dumps(result)

    def invalid() -> str:
        try:
            sync_exec.execute_with_result(bad_request)
        except ToolArgumentsError as e:
            return e.message
        raise AssertionError("expected ToolArgumentsError")

    def declare() -> Any:
        return tool(forecast)

    def cached_dialect() -> Any:
        return openai_tool(card)

    loop = asyncio.new_event_loop()
    try:
        cases: list[Case] = [
            sync_case("baseline: json.loads + call + json.dumps", baseline, number=5000),
            sync_case(
                "declare a tool (cold, @tool)",
                declare,
                baseline="baseline: json.loads + call + json.dumps",
                number=50,
            ),
            sync_case("openai_tool(card), cached", cached_dialect, number=20000),
            sync_case(
                "sync invoke: execute_with_result(raw JSON)",
                lambda: sync_exec.execute_with_result(request),
                baseline="baseline: json.loads + call + json.dumps",
                number=3000,
            ),
            sync_case(
                "invalid args (wrong type + missing) -> error text",
                invalid,
                baseline="baseline: json.loads + call + json.dumps",
                number=2000,
            ),
            async_case("async baseline: loads + await + dumps", abaseline, loop, number=5000),
            async_case(
                "async invoke: aexecute_with_result (async tool)",
                lambda: async_exec.aexecute_with_result(arequest),
                loop,
                baseline="async baseline: loads + await + dumps",
                number=3000,
            ),
            async_case(
                "async baseline: loads + to_thread + dumps", abaseline_thread, loop, number=300
            ),
            async_case(
                "sync body from async: aexecute_with_result",
                lambda: sync_exec.aexecute_with_result(request),
                loop,
                baseline="async baseline: loads + to_thread + dumps",
                number=300,
            ),
        ]
        return measure("core", cases, quick=quick)
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
