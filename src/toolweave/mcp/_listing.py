"""The list `McpClient.list_tools()` returns: it knows its server, so a `ToolService` that
registers it follows the server's ``notifications/tools/list_changed``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import mcp_types

from .tool import McpTool


class McpToolSource:
    """One server's tools as a `toolweave.tools.source.ToolSource`; `core` is the client's
    `_Core` (not imported: the client imports this module)."""

    def __init__(
        self,
        core: Any,
        make: Callable[[Any, list[mcp_types.Tool]], list[McpTool]],
        seen: int,
    ) -> None:
        self._core = core
        self._make = make
        self._seen = seen
        """How many changes the client had heard of when the listing was asked for."""

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call `on_change` on the server's ``tools/list_changed`` (at once when the list
        changed since the listing was asked for)."""
        hooks = self._core.hooks
        hooks.watch_tools(on_change)
        if hooks.tool_changes != self._seen:
            on_change()

    async def alist(self) -> list[McpTool]:
        """List the server's tools again."""
        return self._make(self._core, await self._core.list_tools())

    def __repr__(self) -> str:
        return f"McpToolSource({self._core.config.describe()})"


class McpToolList(list[McpTool]):
    """A server's whole listing; `tool_source` lists it again (a slice or a filtered copy is
    a plain list)."""

    def __init__(self, tools: Iterable[McpTool], source: McpToolSource) -> None:
        super().__init__(tools)
        self.tool_source = source

    def __reduce__(self) -> Any:  # pickles (and copies) as a plain list of its tools
        return (list, (list(self),))
