"""`McpToolSession`: what an `McpTool` needs from a connection, defined below both.

`client.py` builds tools and `tool.py` calls through a session; with this protocol between
them neither imports the other's module for its types (the client imports `tool.py` to
build tools; `tool.py` never imports `client.py`).
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import mcp_types
from mcp.shared.exceptions import MCPError

__all__ = ["McpToolSession", "ProgressCallback", "is_session_lost"]


def is_session_lost(e: MCPError) -> bool:
    """Whether an HTTP server no longer knows the session (it restarted, or expired it).

    The SDK reports a bare 404 as "Session terminated"; servers on the TypeScript SDK
    answer 404 with the JSON-RPC error -32001 "Session not found", which the SDK passes on
    as it is (-32001 is also the code of a request timeout).
    """
    text = e.message.lower()
    if e.code == mcp_types.INVALID_REQUEST and "session terminated" in text:
        return True
    return e.code in (mcp_types.INVALID_REQUEST, mcp_types.REQUEST_TIMEOUT) and (
        "session not found" in text
    )


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
