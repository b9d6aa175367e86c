"""Markers used inside `Annotated[...]` on tool parameters."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Injected", "P"]


@dataclass(frozen=True, slots=True)
class P:
    """Describe (and optionally rename) a parameter for the model.

    `Annotated[str, P("city name")]`, or `P(description=..., name="city")` to expose the
    parameter under another name. Mirrors LangChain4j's `@P`.
    """

    description: str | None = None
    name: str | None = None
    required: bool | None = None
    """Force the parameter to be required (True) or optional (False) in the schema."""


@dataclass(frozen=True, slots=True)
class Injected:
    """Hide a parameter from the model; its value is injected at call time.

    The value is taken from the keyword arguments of `invoke`/`ainvoke` (or of
    `ToolService.chat(..., injected={...})`) under `key`, by default the parameter's name.
    """

    key: str | None = None
