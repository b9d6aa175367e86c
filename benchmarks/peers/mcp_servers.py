"""W9's MCP servers, the same function on both stacks, over stdio.

- `python -m benchmarks.peers.mcp_servers sdk`: the `mcp` SDK's own `MCPServer`;
- `python -m toolweave mcp serve benchmarks.peers.mcp_servers:lookup_tool`: toolweave's.
"""

import sys

from toolweave import tool

from ._subject import lookup

lookup_tool = tool(lookup)


def main() -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("bench", log_level="WARNING")
    server.tool()(lookup)
    server.run("stdio")


if __name__ == "__main__" and sys.argv[1:] == ["sdk"]:
    main()
