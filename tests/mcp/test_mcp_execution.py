"""McpTool inside the execution layer: `DefaultToolExecutor`, and the `ToolService` loop."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_support import DEMO, TEST_TIMEOUT, stdio_config

from toolweave import (
    DefaultToolExecutor,
    ImageContent,
    TextContent,
    ToolArgumentsError,
    ToolExecutionRequest,
)
from toolweave.errors import ErrorCode, McpError, ToolTimeoutError
from toolweave.mcp import McpClient, McpServerConfig

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


async def test_default_executor_runs_mcp_tool(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = {t.name: t for t in await client.list_tools()}

        ok = await DefaultToolExecutor(tools["add"]).aexecute_with_result(
            ToolExecutionRequest(name="add", arguments='{"a": 1, "b": "2"}')
        )
        assert not ok.is_error and ok.text == "3"

        failed = await DefaultToolExecutor(tools["fail"]).aexecute_with_result(
            ToolExecutionRequest(name="fail", arguments='{"message": "quota exceeded"}')
        )
        assert failed.is_error
        assert "quota exceeded" in failed.text
        assert isinstance(failed.error, McpError)

        image = await DefaultToolExecutor(tools["mixed"]).aexecute_with_result(
            ToolExecutionRequest(name="mixed")
        )
        assert image.contents == (
            TextContent(text="a caption"),
            ImageContent(data=PNG, mime_type="image/png"),
        )
        assert image.result_text() == "a caption"

        timed_out = await DefaultToolExecutor(tools["slow"]).aexecute_with_result(
            ToolExecutionRequest(name="slow", arguments='{"seconds": 60}'), timeout=0.5
        )
        assert timed_out.is_error and isinstance(timed_out.error, ToolTimeoutError)

        # Bad arguments surface as ToolArgumentsError (the loop turns them into feedback).
        with pytest.raises(ToolArgumentsError):
            await DefaultToolExecutor(tools["add"]).aexecute_with_result(
                ToolExecutionRequest(name="add", arguments='{"a": 1}')
            )


def test_default_executor_sync_path(demo_config: McpServerConfig) -> None:
    with McpClient.connect_sync(demo_config) as client:
        add = next(t for t in client.list_tools() if t.name == "add")
        assert (
            DefaultToolExecutor(add).execute(
                ToolExecutionRequest(name="add", arguments='{"a": 2, "b": 2}')
            )
            == "4"
        )


async def test_tool_service_loop_with_mcp_tools(demo_config: McpServerConfig) -> None:
    service_mod = pytest.importorskip("toolweave.service")
    chat_mod = pytest.importorskip("toolweave.chat")
    ToolService = service_mod.ToolService
    ScriptedChatModel = chat_mod.ScriptedChatModel
    AiMessage = chat_mod.AiMessage

    model = ScriptedChatModel(
        [
            AiMessage(
                tool_execution_requests=[
                    ToolExecutionRequest(id="c1", name="add", arguments='{"a": 20, "b": 22}'),
                    ToolExecutionRequest(id="c2", name="fail", arguments='{"message": "no"}'),
                ]
            ),
            AiMessage("The answer is 42."),
        ]
    )
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = [t for t in await client.list_tools() if t.name in ("add", "fail")]
        service = ToolService().tools(tools)
        result = await service.achat(model, messages="What is 20 + 22?")
    assert result.text == "The answer is 42."
    by_id = {e.request.id: e for e in result.tool_executions}
    assert by_id["c1"].result.text == "42" and not by_id["c1"].has_failed
    assert by_id["c2"].has_failed and "no" in by_id["c2"].result_text
    # The tool results went back to the model on the second request.
    assert len(model.requests) == 2


def test_import_without_sdk_gives_clear_error() -> None:
    # Hide the SDK: `import toolweave` works, `import toolweave.mcp` explains what to install.
    code = (
        "import sys\n"
        "class Block:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name == 'mcp' or name.startswith('mcp.') or name == 'mcp_types':\n"
        "            raise ImportError('blocked ' + name)\n"
        "sys.meta_path.insert(0, Block())\n"
        "import toolweave\n"
        "assert 'mcp' not in sys.modules\n"
        "try:\n"
        "    import toolweave.mcp\n"
        "except ImportError as e:\n"
        "    print(e)\n"
        "else:\n"
        "    raise SystemExit('no ImportError')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert "pip install 'toolweave[mcp]'" in out.stdout


def test_config_validation() -> None:
    from toolweave import ToolCardError

    cfg = McpServerConfig(server_name="s", params={"url": "http://127.0.0.1:1/mcp"})
    assert cfg.client_type == "streamable-http" and cfg.server_id == "s"
    assert (
        McpServerConfig(
            server_name="s", client_type="streamable_http", server_path="http://x/mcp"
        ).url
        == "http://x/mcp"
    )
    cfg = McpServerConfig(
        server_name="s",
        client_type="sse",
        params={"url": "http://h/sse?x=1", "headers": {"A": "1"}},
        auth_headers={"Authorization": "Bearer t"},
        auth_query_params={"k": "v"},
    )
    assert cfg.url == "http://h/sse?x=1&k=v"
    assert cfg.headers == {"A": "1", "Authorization": "Bearer t"}
    assert "Bearer" not in cfg.describe()
    with pytest.raises(ToolCardError):
        McpServerConfig(server_name="s", client_type="stdio")
    with pytest.raises(ToolCardError):
        McpServerConfig(server_name="s", client_type="sse", params={})
    with pytest.raises(ToolCardError):
        McpServerConfig(server_name="s", client_type="websocket", params={"url": "ws://x"})  # type: ignore[arg-type]


def test_name_helpers() -> None:
    from toolweave.mcp import mcp_model_tool_name, sanitize_tool_name
    from toolweave.tools import TOOL_NAME_PATTERN

    assert mcp_model_tool_name("fs", "read_file") == "mcp_fs_read_file"
    assert sanitize_tool_name("a.b/c d") == "a_b_c_d"
    assert sanitize_tool_name("") == "tool"
    long1, long2 = sanitize_tool_name("y" * 70 + "1"), sanitize_tool_name("y" * 70 + "2")
    assert long1 != long2 and len(long1) == 64 and TOOL_NAME_PATTERN.match(long1)
    assert sanitize_tool_name("y" * 70 + "1") == long1


_ = ErrorCode


async def test_requires_approval_per_server_and_by_name(marker_dir: Path) -> None:
    """`requires_approval` on a server config gates its tools in a ToolService (all of them,
    or those named), and an approved call then runs on the real server."""
    from toolweave import AiMessage, Approve, ChatStatus, ScriptedChatModel, ToolService
    from toolweave.execution import ToolExecutionRequest

    env = {"MCP_MARKER_DIR": str(marker_dir)}
    named = stdio_config(DEMO, env=env, requires_approval=["add"])
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(named) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert tools["add"].card.requires_approval is True
        assert tools["greet"].card.requires_approval is False
        service = ToolService().tools(list(tools.values()))
        calls = [
            ToolExecutionRequest(id="g", name="greet", arguments='{"name": "Ann"}'),
            ToolExecutionRequest(id="a", name="add", arguments='{"a": 2, "b": 3}'),
        ]
        model = ScriptedChatModel([AiMessage(tool_execution_requests=calls), AiMessage("ok")])
        first = await service.achat(model, None, "hi")
        assert first.status is ChatStatus.PENDING and [p.id for p in first.pending] == ["a"]
        assert [e.request.id for e in first.tool_executions] == ["g"]
        assert first.state is not None
        second = await service.achat(model, None, first.state, decisions={"a": Approve()})
        assert second.text == "ok"
        assert [e.result.result_text() for e in second.tool_executions][-1] == "5"
    every = stdio_config(DEMO, env=env, requires_approval=True)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(every) as client:
        assert all(t.card.requires_approval is True for t in await client.list_tools())
