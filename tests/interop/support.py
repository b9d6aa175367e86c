"""Tools and a recording callback shared by the interop tests."""

from __future__ import annotations

import asyncio
import base64
from typing import Annotated, Any

from toolweave import (
    CallbackFramework,
    ImageContent,
    Injected,
    ReturnBehavior,
    TextContent,
    ToolCallEvents,
    ToolContext,
    tool,
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\x00" * 16).decode("ascii")


@tool
def forecast(city: str, days: int = 1, metric: bool = True) -> dict[str, Any]:
    """Weather forecast for a city.

    Args:
        city: the city name
        days: how many days, 1 to 7
        metric: metric units
    """
    return {"city": city, "days": days, "unit": "C" if metric else "F"}


@tool
async def aforecast(city: str, days: int = 1) -> dict[str, Any]:
    """Weather forecast for a city (async)."""
    await asyncio.sleep(0)
    return {"city": city, "days": days}


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


@tool(timeout=0.2)
async def slow(seconds: float) -> str:
    """Sleep, then answer."""
    await asyncio.sleep(seconds)
    return "woke up"


@tool
def chart(title: str) -> list[Any]:
    """Draw a chart."""
    return [TextContent(text=f"chart of {title}"), ImageContent(data=PNG, mime_type="image/png")]


@tool(return_behavior=ReturnBehavior.IMMEDIATE)
def final_answer(answer: str) -> str:
    """Give the final answer to the user."""
    return answer


@tool
def save_note(
    text: str, ctx: ToolContext, notes: Annotated[dict[str, str], Injected("notes")]
) -> str:
    """Save a note."""
    notes[ctx.request_id or "?"] = text
    return f"saved {text!r}"


class Recorder:
    """Records the callback events of the tools it is attached to."""

    def __init__(self) -> None:
        self.framework = CallbackFramework()
        self.events: list[str] = []
        for event in (
            ToolCallEvents.TOOL_CALL_STARTED,
            ToolCallEvents.TOOL_CALL_FINISHED,
            ToolCallEvents.TOOL_CALL_ERROR,
        ):
            self.framework.register(event, self._recorder(str(event)))

    def _recorder(self, name: str) -> Any:
        def record(*args: Any, **kwargs: Any) -> None:
            self.events.append(name)

        return record
