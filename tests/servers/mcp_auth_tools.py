"""Tools, a resource and a prompt for the auth tests, served with
``toolweave mcp serve mcp_auth_tools.py --transport http --auth ...``.

`whoami` (async) and `whoami_sync` answer the caller's verified identity; `delete_file`
needs the ``files:write`` scope (``@tool(scopes=...)``, kept on its card), the ``plans://`` resource
``plans:read``, the ``review`` prompt ``prompts:review``.

Run as a script (``python mcp_auth_tools.py streamable-http|sse PORT``) it serves them with
``serve_mcp(auth=McpAuth(...))``: a static public key (PEM in ``AUTH_PUBLIC_KEY``, issuer
``AUTH_ISSUER``), the ``mcp`` scope needed for everything, ``files`` implying
``files:read`` and ``files:write`` (and ``AUTH_TOOL_SCOPES``, JSON, as `tool_scopes`).
With ``AUTH_RESOURCE`` set too, `auth` is such an `McpAuth`, for
``toolweave mcp serve mcp_auth_tools.py --auth mcp_auth_tools.py:auth``.
"""

from __future__ import annotations

import json
import os
import sys

from toolweave import ToolContext, tool
from toolweave.mcp import JwtVerifier, McpAuth, prompt, resource


def _who(ctx: ToolContext) -> str:
    who = ctx.identity
    if who is None:
        return json.dumps(None)
    return json.dumps(
        {
            "subject": who.subject,
            "client_id": who.client_id,
            "issuer": who.issuer,
            "scopes": sorted(who.scopes),
            "aud": who.claims.get("aud"),
            "has_files_write": who.has_scopes(["files:write"]),
        }
    )


@tool
async def whoami(ctx: ToolContext) -> str:
    """Who is calling."""
    return _who(ctx)


@tool
def whoami_sync(ctx: ToolContext) -> str:
    """Who is calling (a sync tool, run on a worker thread)."""
    return _who(ctx)


@tool(scopes=["files:write"])
def delete_file(name: str) -> str:
    """Delete a file (pretend)."""
    return f"deleted {name}"


@resource("plans://{name}", scopes=["plans:read"])
def plans(name: str) -> str:
    """A plan."""
    return f"the plan {name}"


@prompt(scopes=["prompts:review"])
def review(code: str) -> str:
    """Review code."""
    return f"Review this: {code}"


def static_key_auth(resource: str) -> McpAuth:
    """Tokens signed with the key in AUTH_PUBLIC_KEY, for `resource`."""
    verifier = JwtVerifier(
        issuer=os.environ["AUTH_ISSUER"], audience=resource, key=os.environ["AUTH_PUBLIC_KEY"]
    )
    return McpAuth(
        verifier,
        resource=resource,
        required_scopes=["mcp"],
        implied_scopes={"files": ["files:read", "files:write"]},
        tool_scopes=json.loads(os.environ.get("AUTH_TOOL_SCOPES", "{}")),
    )


auth = static_key_auth(os.environ["AUTH_RESOURCE"]) if "AUTH_RESOURCE" in os.environ else None

if __name__ == "__main__":
    from toolweave.mcp import serve_mcp

    transport, port = sys.argv[1], int(sys.argv[2])
    where = "mcp" if transport == "streamable-http" else "sse"
    auth = static_key_auth(f"http://127.0.0.1:{port}/{where}")
    serve_mcp(
        [whoami, whoami_sync, delete_file],
        transport,  # type: ignore[arg-type]
        port=port,
        features=[plans, review],
        auth=auth,
    )
