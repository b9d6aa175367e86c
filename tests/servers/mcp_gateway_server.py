"""A toolweave gateway for the tests: its own tool ``hello`` and the upstream at UPSTREAM_URL
(streamable HTTP) under the namespace ``up``, reached with the gateway's own token.

Run: ``python mcp_gateway_server.py UPSTREAM_URL|none [auth] [limit] PORT`` (streamable
HTTP on 127.0.0.1). With ``auth`` the gateway is an OAuth resource server: clients need a
bearer JWT signed with `CLIENT_KEY` (HS256, issuer `ISSUER`, audience the gateway's URL).
With ``limit`` each token may call tools twice (`RateLimitMiddleware`, per hour).
"""

from __future__ import annotations

import sys

from toolweave import tool
from toolweave.mcp import McpServerConfig, serve_mcp

GATEWAY_TOKEN = "Bearer gateway-own-token"
ISSUER = "https://issuer.example.test"
CLIENT_KEY = b"the-gateway-tests-shared-secret-of-32-bytes-or-more"


@tool
def hello(name: str) -> str:
    """Say hello."""
    return f"hi {name}"


if __name__ == "__main__":
    url, port = sys.argv[1], int(sys.argv[-1])
    auth = None
    if "auth" in sys.argv[2:-1]:
        from toolweave.mcp.auth import JwtVerifier, McpAuth

        verifier = JwtVerifier(
            issuer=ISSUER,
            audience=f"http://127.0.0.1:{port}/mcp",
            key=CLIENT_KEY,
            algorithms=["HS256"],
        )
        auth = McpAuth(verifier)
    middleware = []
    if "limit" in sys.argv[2:-1]:
        from toolweave.mcp.middleware import RateLimitMiddleware

        middleware.append(RateLimitMiddleware(2, per=3600, by="token"))
    upstream = McpServerConfig(
        server_name="up", params={"url": url}, auth_headers={"Authorization": GATEWAY_TOKEN}
    )
    proxy = [upstream] if url != "none" else []
    serve_mcp([hello], "streamable-http", port=port, proxy=proxy, auth=auth, middleware=middleware)
