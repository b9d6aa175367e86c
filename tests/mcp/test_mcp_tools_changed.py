"""A server's ``notifications/tools/list_changed`` reaches a running `ToolService`: the
listing `McpClient.list_tools()` returned is listed again before the next request, so the
model sees added tools, not removed ones, and changed descriptions (issue #16)."""

from __future__ import annotations

import asyncio
import json
import threading
from pathlib import Path

import pytest
from mcp_support import SERVERS, TEST_TIMEOUT, stdio_config

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, ToolService, tool
from toolweave.mcp import McpClient, SyncMcpClient

CHANGING = str(SERVERS / "mcp_changing_server.py")


def calls(*pairs: tuple[str, dict[str, str]]) -> AiMessage:
    return AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest(id=f"c{i}_{name}", name=name, arguments=json.dumps(args))
            for i, (name, args) in enumerate(pairs)
        ]
    )


def offered(request: object) -> dict[str, str]:
    return {c.name: c.description for c in request.parameters.tools or ()}  # type: ignore[attr-defined]


@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_the_next_request_offers_the_servers_new_tool_list(era: str) -> None:
    """2026-07-28: changes arrive on a ``subscriptions/listen`` stream; 2025-11-25 (a roots
    hook makes the client use the handshake): as notifications."""

    @tool
    def local_note() -> str:
        """A local tool next to the server's."""
        return "noted"

    changes: list[bool] = []
    model = ScriptedChatModel(
        [
            calls(("add_tool", {"name": "fresh"})),
            calls(("drop_tool", {"name": "old"}), ("describe", {"name": "fresh", "text": "Now"})),
            calls(("fresh", {}), ("old", {})),
            AiMessage("done"),
        ]
    )
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(
            stdio_config(CHANGING, protocol="newest" if era == "2026-07-28" else "auto"),
            on_tools_changed=lambda: changes.append(True),
            roots=["."] if era == "2025-11-25" else None,
        ) as c,
    ):
        service = ToolService().tools(local_note, await c.list_tools())
        result = await service.achat(model, None, "change your tools")
    first, second, third, last = (offered(r) for r in model.requests)
    assert set(first) == {"local_note", "add_tool", "drop_tool", "describe", "old"}
    assert second["fresh"] == "Added fresh" and "old" in second
    assert "old" not in third and third["fresh"] == "Now"
    assert last == third
    fresh, old = result.tool_executions[-2:]
    assert fresh.result.result_text() == "fresh ran"
    assert old.has_failed and "no tool named 'old'" in old.result.result_text()
    assert changes == [True, True, True]  # the user's hook still fires


def test_a_sync_client_listing_follows_too(tmp_path: Path) -> None:
    model = ScriptedChatModel(
        [calls(("add_tool", {"name": "extra"})), calls(("extra", {})), AiMessage("ok")]
    )
    with SyncMcpClient(stdio_config(CHANGING)) as client:
        service = ToolService().tools(client.list_tools())
        result = service.chat(model, None, "grow")
    assert "extra" in offered(model.requests[1])
    assert result.tool_executions[-1].result.result_text() == "extra ran"


async def test_a_filtered_listing_is_a_snapshot() -> None:
    model = ScriptedChatModel([calls(("add_tool", {"name": "fresh"})), AiMessage("done")])
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(stdio_config(CHANGING)) as c:
        tools = [t for t in await c.list_tools() if t.name != "old"]
        service = ToolService().tools(tools)
        await service.achat(model, None, "grow")
    assert set(offered(model.requests[1])) == {"add_tool", "drop_tool", "describe"}


async def test_a_change_before_the_listing_is_registered_is_not_lost() -> None:
    """The server changes its list after `list_tools()` answered but before the service
    registered the listing: the first request already offers the new list."""
    heard = threading.Event()
    model = ScriptedChatModel([AiMessage("done")])
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(stdio_config(CHANGING), on_tools_changed=heard.set) as c,
    ):
        tools = await c.list_tools()
        await c.call_tool("add_tool", {"name": "early"})
        assert await asyncio.to_thread(heard.wait, TEST_TIMEOUT)
        service = ToolService().tools(tools)
        await service.achat(model, None, "hi")
    assert "early" in offered(model.requests[0])
