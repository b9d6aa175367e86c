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


class Stats(pydantic.BaseModel):
    key: str
    hits: int


@tool
def stats(key: str) -> Stats:
    """Declared to return Stats; returns something else (a served tool's bug)."""
    return {"nope": key}  # type: ignore[return-value]


@tool
async def count(to: int, ctx: ToolContext) -> str:
    """Count, reporting progress."""
    for i in range(1, to + 1):
        await ctx.areport_progress(i, to)
    return f"counted to {to}"
