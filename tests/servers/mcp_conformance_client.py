"""toolweave's MCP client as the conformance suite's client under test.

The suite runs ``python mcp_conformance_client.py <server-url>`` with the scenario's name in
``MCP_CONFORMANCE_SCENARIO`` (and scenario data in ``MCP_CONFORMANCE_CONTEXT``). Every
scenario goes through `McpClient`: list the tools, call what the scenario serves.
"""

from __future__ import annotations

import asyncio
import os
import sys

from toolweave.context import ElicitationResult
from toolweave.mcp import McpClient, McpServerConfig
from toolweave.mcp.hooks import ElicitationRequest


async def accept_empty(request: ElicitationRequest) -> ElicitationResult:
    # The user accepts without filling anything: the client applies the schema's defaults.
    return ElicitationResult("accept", {})


async def main(url: str, scenario: str) -> None:
    config = McpServerConfig(
        server_name="conformance", params={"url": url}, connect_timeout=10, call_timeout=20
    )
    hooks = {"elicitation": accept_empty} if scenario.startswith("elicitation") else {}
    async with McpClient(config, **hooks) as client:  # type: ignore[arg-type]
        tools = {t.card.remote_name: t for t in await client.list_tools()}
        if "add_numbers" in tools:
            print(await tools["add_numbers"].ainvoke({"a": 2, "b": 3}))
        for name in ("test_client_elicitation_defaults", "test_reconnection", "test-tool"):
            if name in tools:
                print(await client.call_tool(name, {}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
