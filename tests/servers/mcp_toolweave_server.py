"""toolweave tools served with `toolweave.mcp.serve_mcp` (used by the serve_mcp tests).

Run: ``python mcp_toolweave_server.py [stdio | streamable-http PORT | sse PORT]``.
"""

from __future__ import annotations

import sys

from toolweave import ImageContent, LocalFunction, TextContent, ToolCard, tool
from toolweave.mcp import serve_mcp

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


@tool(idempotent=True, metadata={"readOnlyHint": True})
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: first
        b: second
    """
    return a + b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


@tool
def snapshot(caption: str = "shot") -> list[object]:
    """A caption and an image."""
    return [TextContent(text=caption), ImageContent(data=PNG, mime_type="image/png")]


def _shout(text: str) -> str:
    return text.upper()


shout = LocalFunction(
    ToolCard(
        name="shout",
        description="Upper-case a text",
        input_params={
            "type": "object",
            "properties": {"text": {"type": "string", "description": "what to shout"}},
            "required": ["text"],
        },
        metadata={"annotations": {"destructiveHint": False, "title": "Shout"}},
    ),
    _shout,
)

TOOLS = [add, divide, snapshot, shout]

if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 8000
    serve_mcp(TOOLS, transport, port=port, name="toolweave-test")  # type: ignore[arg-type]
