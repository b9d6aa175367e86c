"""`ToolSource`: tools that may change while they are registered (an MCP server's listing).

A list of tools whose ``tool_source`` attribute is a `ToolSource` (what
`McpClient.list_tools()` returns) registers with `ToolService` as a live set: when the
source says its tools changed, the service lists them again before its next model request.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, runtime_checkable

from .base import Tool

__all__ = ["ToolSource"]


@runtime_checkable
class ToolSource(Protocol):
    """Where a set of tools comes from, and a way to hear that it changed."""

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call `on_change` (from any thread, without waiting) each time the tools change.
        A bound method is held weakly: watching keeps no service alive."""

    async def alist(self) -> Sequence[Tool]:
        """The tools as they are now."""
        ...
