"""`McpToolSession`: what an `McpTool` needs from a connection, defined below both.

`client.py` builds tools and `tool.py` calls through a session; with this protocol between
them neither imports the other's module for its types (the client imports `tool.py` to
build tools; `tool.py` never imports `client.py`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import mcp_types

__all__ = ["McpToolSession", "ProgressCallback"]


class ProgressCallback(Protocol):
    """``async (progress, total, message)``: a server's progress on one call."""

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        """One progress notification."""
        ...


@runtime_checkable
class McpToolSession(Protocol):
    """A connection an `McpTool` calls through.

    `call_tool` sends ``tools/call`` and returns the SDK's result; `timeout` ``None`` means the
    connection's default; `progress` receives the server's progress notifications.
    Cancelling the awaiting task cancels the call: the server is sent
    ``notifications/cancelled``.
    """

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        timeout: float | None,
        *,
        progress: ProgressCallback | None = None,
    ) -> mcp_types.CallToolResult:
        """Call `name` on the server."""
        ...
