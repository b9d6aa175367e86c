"""A toolweave gateway for the tests: its own tool ``hello`` and the upstream at UPSTREAM_URL
(streamable HTTP) under the namespace ``up``, reached with the gateway's own token.

Run: ``python mcp_gateway_server.py UPSTREAM_URL PORT`` (streamable HTTP on 127.0.0.1).
"""

from __future__ import annotations

import sys

from toolweave import tool
from toolweave.mcp import McpServerConfig, serve_mcp

GATEWAY_TOKEN = "Bearer gateway-own-token"


@tool
def hello(name: str) -> str:
    """Say hello."""
    return f"hi {name}"


if __name__ == "__main__":
    url, port = sys.argv[1], int(sys.argv[2])
    upstream = McpServerConfig(
        server_name="up", params={"url": url}, auth_headers={"Authorization": GATEWAY_TOKEN}
    )
    serve_mcp([hello], "streamable-http", port=port, proxy=[upstream])
