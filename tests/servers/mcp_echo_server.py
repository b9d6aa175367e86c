"""A low-level MCP test server whose `echo` tool returns the raw arguments it received.

It lets tests see exactly what a client sent (dropped `None` values, ``{}``).
Run: ``python mcp_echo_server.py``  (stdio).
"""

from __future__ import annotations

import json
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


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(name="echo", description="Echo the arguments", input_schema=SCHEMA),
            types.Tool(name="echo.loose", description="Echo anything", input_schema=LOOSE),
            types.Tool(name="x" * 80, description="A long name", input_schema=LOOSE),
        ]
    )


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    text = json.dumps({"arguments": params.arguments, "name": params.name}, sort_keys=True)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("echo", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
