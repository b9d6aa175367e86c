"""A low-level MCP test server whose tool ``ask`` sends the client a request of its own and
returns, as JSON, exactly what came back: ``{"ok": ...}`` or ``{"code": ..., "message":
...}`` of the client's JSON-RPC error. So a test sees what a client's hook sent a server.

``ask {"what": "roots"}`` sends ``roots/list``; ``{"what": "elicit"}`` a form elicitation;
``{"what": "sample", "size": N}`` a ``sampling/createMessage`` whose one message holds N
bytes of text. Run: ``python mcp_asking_server.py`` (stdio).
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

warnings.simplefilter("ignore")  # these requests are deprecated for 2026-07-28; this is 2025

ASK = types.Tool(
    name="ask",
    description="Ask the client something and return its answer",
    input_schema={"type": "object", "properties": {"what": {}, "size": {}}},
)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[ASK])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    what = args.get("what")
    try:
        if what == "roots":
            answer: Any = await ctx.session.list_roots()
        elif what == "elicit":
            schema = {"type": "object", "properties": {"name": {"type": "string"}}}
            answer = await ctx.session.elicit_form("Your name?", schema)
        else:
            text = "x" * int(args.get("size", 10))
            message = types.SamplingMessage(
                role="user", content=types.TextContent(type="text", text=text)
            )
            answer = await ctx.session.create_message(messages=[message], max_tokens=50)
        out = {"ok": answer.model_dump(mode="json", by_alias=True, exclude_none=True)}
    except MCPError as e:
        out = {"code": e.code, "message": e.message}
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(out))])


server = Server("asking", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
