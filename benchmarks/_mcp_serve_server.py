"""The servers of `benchmarks.mcp_serve`: the same function, served by the SDK or FastMCP.

Run as `python -m benchmarks._mcp_serve_server {sdk|fastmcp} PORT` (FastMCP from the venv that
has it: this module imports neither toolweave nor its own framework at the top, so it runs in
any interpreter). `toolweave mcp serve benchmarks._mcp_serve_server:add` serves `add` itself.
"""

from __future__ import annotations

import sys


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first
        b: the second
    """
    return a + b


def main(argv: list[str]) -> None:
    kind, port = argv[0], int(argv[1])
    if kind == "sdk":
        from mcp.server.mcpserver import MCPServer

        sdk = MCPServer("bench")
        sdk.tool()(add)
        sdk.run(transport="streamable-http", host="127.0.0.1", port=port)
    elif kind == "fastmcp":
        from fastmcp import FastMCP

        fast = FastMCP("bench")
        fast.tool(add)
        fast.run(transport="http", host="127.0.0.1", port=port, show_banner=False)
    else:
        raise SystemExit(f"unknown server {kind!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
