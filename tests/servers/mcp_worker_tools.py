"""Tools served with `toolweave mcp serve --workers N` in tests/mcp/test_mcp_serve_workers.py:
each says which worker process answered it."""

from __future__ import annotations

import os

from toolweave import ToolContext, tool
from toolweave.mcp import resource


@tool
def whoami() -> int:
    """The process id of the worker that answered."""
    return os.getpid()


@tool
async def ask(ctx: ToolContext) -> str:
    """Asks the client's user for a name (elicitation)."""
    answer = await ctx.aelicit(
        "Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
    )
    return f"hello {(answer.content or {}).get('name')}"


@resource("pid://worker")
def worker() -> str:
    """The worker's process id (reading it is not rate-limited: only tool calls are)."""
    return str(os.getpid())
