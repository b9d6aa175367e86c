"""`SourceToolset` over the project's own changing MCP server: include and exclude (names,
globs, a predicate) keep following `notifications/tools/list_changed`."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, ToolService
from toolweave.mcp import McpServerConfig, SyncMcpClient
from toolweave.toolsets import SourceToolset

from ..service.helpers import MODES, run

CHANGING = str(Path(__file__).resolve().parent.parent / "servers" / "mcp_changing_server.py")


def config() -> McpServerConfig:
    return McpServerConfig(
        server_name="changing",
        client_type="stdio",
        params={"command": sys.executable, "args": [CHANGING]},
        connect_timeout=30.0,
    )


def calls(*pairs: tuple[str, dict[str, str]]) -> AiMessage:
    return AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest(id=f"c{i}_{name}", name=name, arguments=json.dumps(args))
            for i, (name, args) in enumerate(pairs)
        ]
    )


def offered(model: ScriptedChatModel) -> list[list[str]]:
    return [[c.name for c in r.parameters.tools or ()] for r in model.requests]


@pytest.mark.parametrize("mode", MODES)
def test_include_and_exclude_keep_following_the_servers_changes(mode: str) -> None:
    model = ScriptedChatModel(
        [
            calls(
                ("add_tool", {"name": "fresh_1"}),
                ("add_tool", {"name": "other"}),
                ("add_tool", {"name": "fresh_hidden"}),
            ),
            calls(("drop_tool", {"name": "old"}), ("fresh_1", {})),
            AiMessage("done"),
        ]
    )
    with SyncMcpClient(config()) as client:
        toolset = SourceToolset(
            client.list_tools(),
            include=["add_tool", "drop_tool", "fresh*", "old"],
            exclude="*_hidden",
            instructions="The changing server.",
        )
        result = run(mode, ToolService(toolsets=[toolset]), model)
    assert offered(model) == [
        ["add_tool", "drop_tool", "old"],
        ["add_tool", "drop_tool", "old", "fresh_1"],
        ["add_tool", "drop_tool", "fresh_1"],
    ]
    assert result.tool_executions[-1].result.result_text() == "fresh_1 ran"
    assert model.requests[0].messages[0].text == "The changing server."  # type: ignore[union-attr]


def test_a_predicate_and_a_prefix_follow_changes_too() -> None:
    model = ScriptedChatModel(
        [
            calls(("srv_add_tool", {"name": "extra"})),
            calls(("srv_extra", {})),
            AiMessage("ok"),
        ]
    )
    with SyncMcpClient(config()) as client:
        toolset = SourceToolset(
            client.list_tools(), include=lambda card: card.name != "describe"
        ).prefixed("srv")
        result = ToolService(toolsets=[toolset]).chat(model, None, "grow")
    first, second, _ = offered(model)
    assert first == ["srv_add_tool", "srv_drop_tool", "srv_old"]
    assert second == [*first, "srv_extra"]
    assert result.tool_executions[-1].result.result_text() == "extra ran"


def test_a_listing_registered_on_the_service_keeps_following_next_to_toolsets() -> None:
    from toolweave import tool
    from toolweave.toolsets import FunctionToolset

    @tool
    def local_note() -> str:
        """A local tool."""
        return "noted"

    model = ScriptedChatModel(
        [calls(("add_tool", {"name": "extra"})), calls(("extra", {})), AiMessage("ok")]
    )
    with SyncMcpClient(config()) as client:
        service = ToolService(toolsets=[FunctionToolset(local_note)]).tools(client.list_tools())
        result = service.chat(model, None, "grow")
    first, second, _ = offered(model)
    assert first == ["add_tool", "drop_tool", "describe", "old", "local_note"]
    assert second == ["add_tool", "drop_tool", "describe", "old", "extra", "local_note"]
    assert result.tool_executions[-1].result.result_text() == "extra ran"
