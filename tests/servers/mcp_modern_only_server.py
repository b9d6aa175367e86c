"""An MCP server (the `mcp` SDK's `MCPServer`) over stdio that speaks only the 2026-07-28
protocol: ``initialize`` gets the SDK's own refusal (UNSUPPORTED_PROTOCOL_VERSION naming
the versions it serves), as from a server written after the handshake era.

The SDK serves both eras on stdio and has no public switch for one; this drives its
modern-era loop (`mcp.server.runner._serve_modern_stream`, private) directly. Each
connection appends a line to the file named by $MODERN_ONLY_LOG (the client's opening
request is not visible from here, so the log counts connections).
"""

from __future__ import annotations

import os

import anyio
from mcp.server.mcpserver import MCPServer
from mcp.server.runner import _serve_modern_stream
from mcp.server.stdio import stdio_server

server = MCPServer("modern-only")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def main() -> None:
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write), lowlevel.lifespan(lowlevel) as state:
        await _serve_modern_stream(
            lowlevel, read, write, lifespan_state=state, raise_exceptions=False
        )


if __name__ == "__main__":
    if log := os.environ.get("MODERN_ONLY_LOG"):
        with open(log, "a", encoding="utf-8") as f:
            f.write("connected\n")
    anyio.run(main)
