"""Typed toolweave tools for the TypeScript SDK client test (``toolweave mcp serve``)."""

from __future__ import annotations

import pydantic

from toolweave import tool
from toolweave.context import ToolContext


class Weather(pydantic.BaseModel):
    city: str
    celsius: float


@tool
def weather(city: str) -> Weather:
    """The weather in a city."""
    return Weather(city=city, celsius=21.5)


@tool
async def count(to: int, ctx: ToolContext) -> str:
    """Count, reporting progress."""
    for i in range(1, to + 1):
        await ctx.areport_progress(i, to)
    return f"counted to {to}"
