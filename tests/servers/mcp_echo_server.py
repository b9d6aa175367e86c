"""A low-level MCP test server whose `echo` tool returns the raw arguments it received.

It lets tests see exactly what a client sent (dropped `None` values, ``{}``); `whoami`
returns the client's ``clientInfo``, `roots` the client's roots, `touch` sends
``notifications/tools/list_changed``. ``ECHO_LISTING=dup`` lists a tool twice and two names
that sanitise alike; ``ECHO_LISTING=loop`` answers every page with the same ``nextCursor``.
Run: ``python mcp_echo_server.py``  (stdio); it writes one line to stderr at start.
"""

from __future__ import annotations

import json
import os
import sys
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

SCHEMA = {
    "type": "object",
    "properties": {
        "text": {"type": "string"},
        "count": {"type": "integer", "default": 1},
        "note": {"type": "string"},
        "options": {"type": "object"},
    },
    "required": ["text"],
}
LOOSE = {"type": "object", "properties": {}, "additionalProperties": True}
if os.environ.get("ECHO_SCHEMA"):  # a test's own input schema for `echo`
    SCHEMA = json.loads(os.environ["ECHO_SCHEMA"])


TOOLS = [
    types.Tool(name="echo", description="Echo the arguments", input_schema=SCHEMA),
    types.Tool(name="echo.loose", description="Echo anything", input_schema=LOOSE),
    types.Tool(name="x" * 80, description="A long name", input_schema=LOOSE),
    types.Tool(name="whoami", description="The client's clientInfo", input_schema=LOOSE),
    types.Tool(name="roots", description="The client's roots", input_schema=LOOSE),
    types.Tool(name="touch", description="Says the tool list changed", input_schema=LOOSE),
]
DUPLICATES = [
    types.Tool(name="echo", description="Listed again", input_schema=LOOSE),
    types.Tool(name="echo_loose", description="Sanitises like echo.loose", input_schema=LOOSE),
    types.Tool(name="echo/loose", description="And so does this", input_schema=LOOSE),
]


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    mode = os.environ.get("ECHO_LISTING", "")
    if mode == "dup":
        return types.ListToolsResult(tools=TOOLS + DUPLICATES)
    if mode == "loop":
        return types.ListToolsResult(tools=TOOLS[:1], next_cursor="again")
    return types.ListToolsResult(tools=TOOLS)


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    if params.name == "whoami":
        info = ctx.session.client_params.client_info
        text = json.dumps({"name": info.name, "version": info.version})
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
    if params.name == "roots":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # deprecated for 2026-07-28; this is 2025
            listed = await ctx.session.list_roots()
        text = json.dumps([[str(r.uri), r.name] for r in listed.roots])
        return types.CallToolResult(content=[types.TextContent(type="text", text=text)])
    if params.name == "touch":
        await ctx.session.send_tool_list_changed()
        return types.CallToolResult(content=[types.TextContent(type="text", text="touched")])
    text = json.dumps({"arguments": params.arguments, "name": params.name}, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    print("echo server starting", file=sys.stderr, flush=True)
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
