"""The per-call context a tool can ask for by declaring a `ToolContext` parameter."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ToolContext"]


@dataclass(frozen=True, slots=True)
class ToolContext:
    """What a tool knows about the call it is serving.

    A tool parameter annotated with `ToolContext` is hidden from the model's schema and
    filled in at call time.
    """

    tool_name: str
    request_id: str | None = None
    """The tool call id the model gave (`ToolExecutionRequest.id`)."""
    memory_id: Any = None
    """The conversation (memory) id the caller passed, if any."""
    context: Any = None
    """The object the caller passed as `context=` to `ToolService.chat` or `invoke`."""
    callbacks: Any = None
    """The callback framework in force for this call."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else the caller attached."""
