"""A low-level MCP test server whose tool list changes when its tools are called.

`add_tool {"name": N}` adds a tool N (it answers ``"N ran"``), `drop_tool {"name": N}`
removes one, `describe {"name": N, "text": T}` changes a tool's description; each sends
``notifications/tools/list_changed`` before it answers (on a 2026-07-28 connection as an
event of the client's ``subscriptions/listen`` stream). Run: ``python mcp_changing_server.py``
(stdio).
"""

from __future__ import annotations

from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.subscriptions import InMemorySubscriptionBus, ListenHandler, ToolsListChanged
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

NAMED = {
    "type": "object",
    "properties": {"name": {"type": "string"}, "text": {"type": "string"}},
    "required": ["name"],
}
EMPTY: dict[str, Any] = {"type": "object", "properties": {}}

TOOLS: dict[str, types.Tool] = {
    t.name: t
    for t in [
        types.Tool(name="add_tool", description="Add a tool", input_schema=NAMED),
        types.Tool(name="drop_tool", description="Remove a tool", input_schema=NAMED),
        types.Tool(name="describe", description="Describe a tool anew", input_schema=NAMED),
        types.Tool(name="old", description="A tool to remove", input_schema=EMPTY),
    ]
}


def answer(text: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=list(TOOLS.values()))


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    name = str(args.get("name", ""))
    if params.name == "add_tool":
        TOOLS[name] = types.Tool(name=name, description=f"Added {name}", input_schema=EMPTY)
    elif params.name == "drop_tool":
        TOOLS.pop(name, None)
    elif params.name == "describe":
        TOOLS[name] = TOOLS[name].model_copy(update={"description": args.get("text", "")})
    elif params.name in TOOLS:
        return answer(f"{params.name} ran")
    else:
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=f"unknown tool {params.name}")],
            is_error=True,
        )
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await BUS.publish(ToolsListChanged())
    else:
        await ctx.session.send_tool_list_changed()
    return answer(f"{params.name} {name}: done")


BUS = InMemorySubscriptionBus()
server = Server(
    "changing",
    on_list_tools=list_tools,
    on_call_tool=call_tool,
    on_subscriptions_listen=ListenHandler(BUS),
)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
