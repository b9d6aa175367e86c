"""A low-level MCP test server whose `forecast` tool asks the client's model with tools
(``sampling/createMessage`` with ``tools`` and ``toolChoice``, spec 2025-11-25).

`forecast {"city": C, "choice": "auto"|"required"|"none"}` sends the question with a
`get.weather` tool; while the answer asks for tools (``tool_use``, stop reason
``toolUse``) it runs them itself and sends the ``tool_result`` back in a follow-up request.
It returns JSON: every result the client sent (``results``) and the final text.
``"raw": true`` sends one request with tools without the SDK's capability check. Without the
client's ``sampling.tools`` capability the SDK refuses to send tools: the tool says so.
Run: ``python mcp_sampling_tools_server.py`` (stdio).
"""

from __future__ import annotations

import json
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server

warnings.simplefilter("ignore")  # sampling is deprecated for 2026-07-28; this is 2025-11-25

WEATHER = types.Tool(
    name="get.weather",
    description="Current weather of a city.",
    input_schema={
        "type": "object",
        "properties": {"city": {"type": "string"}},
        "required": ["city"],
    },
)
FORECAST = types.Tool(
    name="forecast",
    description="Ask the client's model about the weather, offering it a tool",
    input_schema={"type": "object", "properties": {"city": {}, "choice": {}}},
)


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[FORECAST])


def answer(data: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=json.dumps(data))])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    args = params.arguments or {}
    city = str(args.get("city", "Paris"))
    choice = types.ToolChoice(mode=args.get("choice", "auto"))
    messages = [
        types.SamplingMessage(
            role="user", content=types.TextContent(type="text", text=f"Weather in {city}?")
        )
    ]
    results: list[Any] = []
    if args.get("raw"):  # send tools whatever the client declared (the SDK would refuse)
        request = types.CreateMessageRequest(
            params=types.CreateMessageRequestParams(
                messages=messages, max_tokens=50, tools=[WEATHER], tool_choice=choice
            )
        )
        try:
            await ctx.session.send_request(request, types.CreateMessageResultWithTools)
        except Exception as e:
            return answer({"error": str(e), "results": results})
        return answer({"results": ["answered"]})
    for _ in range(4):
        try:
            result = await ctx.session.create_message(
                messages=messages,
                max_tokens=200,
                system_prompt="You are a weather bot.",
                tools=[WEATHER],
                tool_choice=choice,
            )
        except Exception as e:  # e.g. the client did not declare sampling.tools
            return answer({"error": str(e), "results": results})
        results.append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
        if result.stop_reason != "toolUse":
            break
        blocks = result.content if isinstance(result.content, list) else [result.content]
        messages.append(types.SamplingMessage(role="assistant", content=blocks))
        outcomes: list[types.SamplingMessageContentBlock] = []
        for block in blocks:
            if isinstance(block, types.ToolUseContent):
                where = block.input.get("city")
                outcomes.append(
                    types.ToolResultContent(
                        type="tool_result",
                        tool_use_id=block.id,
                        content=[types.TextContent(type="text", text=f"Sunny in {where}")],
                        is_error=block.name != "get.weather",
                    )
                )
        messages.append(types.SamplingMessage(role="user", content=outcomes))
    return answer({"results": results})


server = Server("sampling-tools", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
