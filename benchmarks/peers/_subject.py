"""The functions every adapter turns into tools (no `from __future__ import annotations`:
several peers read `__annotations__` directly and must see real types)."""

import asyncio
import itertools
import re
import types
from typing import Any, Literal


def search_flights(
    origin: str,
    max_stops: int,
    budget: float,
    refundable: bool,
    airlines: list[str],
    cabin: Literal["economy", "premium", "business"] = "economy",
    note: str | None = None,
) -> dict[str, Any]:
    """Search flights leaving an airport.

    Args:
        origin: IATA code of the departure airport.
        max_stops: Maximum number of stops.
        budget: Maximum price in euros.
        refundable: Only refundable fares.
        airlines: Preferred airline codes.
        cabin: Cabin class.
        note: Free-text note for the travel agent.
    """
    return {"origin": origin, "found": len(airlines) + max_stops, "cabin": cabin, "max": budget}


async def asearch_flights(
    origin: str,
    max_stops: int,
    budget: float,
    refundable: bool,
    airlines: list[str],
    cabin: Literal["economy", "premium", "business"] = "economy",
    note: str | None = None,
) -> dict[str, Any]:
    """Search flights leaving an airport.

    Args:
        origin: IATA code of the departure airport.
        max_stops: Maximum number of stops.
        budget: Maximum price in euros.
        refundable: Only refundable fares.
        airlines: Preferred airline codes.
        cabin: Cabin class.
        note: Free-text note for the travel agent.
    """
    return {"origin": origin, "found": len(airlines) + max_stops, "cabin": cabin, "max": budget}


async def wait_20ms(i: int) -> str:
    """Wait 20 ms, like a fast network call.

    Args:
        i: Call number.
    """
    await asyncio.sleep(0.02)
    return f"done {i}"


async def ping(n: int) -> str:
    """Answer pong.

    Args:
        n: Round number.
    """
    return "pong"


def lookup(key: str, limit: int = 10) -> str:
    """Look a key up.

    Args:
        key: The key.
        limit: Maximum number of hits.
    """
    return key


_serial = itertools.count()


def _distinct(doc: str | None) -> str | None:
    """The docstring with a serial number in the summary and every parameter description: the
    same length and shape each time, but never seen before (defeats docstring caches)."""
    if doc is None:
        return None
    n = next(_serial)
    return re.sub(r"(\.)(\n|$)", rf" (#{n})\1\2", doc)


def fresh(fn: Any, name: str | None = None) -> Any:
    """A new function object with the same code and signature and a docstring of its own
    (defeats any cache keyed on the function object or on the docstring text)."""
    clone = types.FunctionType(
        fn.__code__, fn.__globals__, name or fn.__name__, fn.__defaults__, fn.__closure__
    )
    clone.__kwdefaults__ = fn.__kwdefaults__
    clone.__annotations__ = dict(fn.__annotations__)
    clone.__doc__ = _distinct(fn.__doc__)
    clone.__module__ = fn.__module__
    clone.__qualname__ = name or fn.__qualname__
    return clone
