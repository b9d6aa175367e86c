"""An MCP test server on the official SDK's `MCPServer`.

Run: ``python mcp_demo_server.py [stdio | streamable-http PORT | sse PORT]``.

Environment: ``MCP_MARKER_DIR`` — where `slow` writes ``cancelled-<tag>`` when it is
cancelled (the test checks the server saw the cancellation) and ``started-<tag>`` when it
starts.
"""

from __future__ import annotations

import base64
import hashlib
import os
import sys
from pathlib import Path

import anyio
from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

# A 1x1 transparent PNG.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="
)

server = MCPServer("demo", log_level="WARNING")


def _marker(name: str) -> Path:
    return Path(os.environ.get("MCP_MARKER_DIR", ".")) / name


@server.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
def greet(name: str, punctuation: str | None = None) -> str:
    """Greet someone."""
    return f"Hello, {name}{punctuation or '!'}"


@server.tool()
def fail(message: str) -> str:
    """Always fails with `message`."""
    raise ToolError(message)


@server.tool()
def crash() -> str:
    """Raises an unexpected exception."""
    raise RuntimeError("secret internal detail")


@server.tool()
def picture() -> Image:
    """Return a tiny PNG."""
    return Image(data=PNG, format="png")


@server.tool(structured_output=False)
def two_texts() -> list[str]:
    """Two text blocks."""
    return ["first", "second"]


@server.tool(structured_output=False)
def mixed() -> list[object]:
    """Text then an image."""
    return ["a caption", Image(data=PNG, format="png")]


@server.tool()
async def slow(seconds: float, tag: str = "x") -> str:
    """Sleep, recording a cancellation in a marker file."""
    _marker(f"started-{tag}").write_text("started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _marker(f"cancelled-{tag}").write_text("cancelled")
        raise
    return "done"


@server.tool()
async def die(after: float = 0.0) -> str:
    """Kill the server process (after `after` seconds)."""
    await anyio.sleep(after)
    os._exit(3)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def auth_seen(ctx: Context) -> str:
    """A fingerprint of the Authorization header and the query string this request came with.

    The fingerprint (sha256, 16 hex digits) and not the header itself: a result echoing the
    client's credentials reaches the caller masked, by design.
    """
    headers = ctx.headers or {}
    url = getattr(ctx.request_context.request, "url", None)
    header = headers.get("authorization", "")
    seen = hashlib.sha256(header.encode()).hexdigest()[:16] if header else ""
    return f"{seen}|{getattr(url, 'query', '')}"


if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run(transport, host="127.0.0.1", port=int(sys.argv[2]))  # type: ignore[call-overload]
