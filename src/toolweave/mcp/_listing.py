"""The list `McpClient.list_tools()` returns: it knows its server, so a `ToolService` that
registers it follows the server's ``notifications/tools/list_changed``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import mcp_types

from .tool import McpTool

if TYPE_CHECKING:
    from .client import _Core


class McpToolSource:
    """One server's tools as a `toolweave.tools.source.ToolSource`."""

    def __init__(
        self, core: _Core, make: Callable[[_Core, list[mcp_types.Tool]], list[McpTool]]
    ) -> None:
        self._core = core
        self._make = make

    def watch(self, on_change: Callable[[], None]) -> None:
        """Call `on_change` on the server's ``tools/list_changed``."""
        self._core.hooks.watch_tools(on_change)

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
