"""Client capabilities of `McpClient`: sampling (a ChatModel or a callback, with limits),
elicitation (defaults applied), roots, progress, server logs, tools/list_changed — against
real servers: ``toolweave mcp serve`` of the conformance module and the echo server."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp.client.client import Client
from mcp_support import ECHO, TEST_TIMEOUT, stdio_config

from toolweave import AiMessage, tool
from toolweave.chat.scripted import ScriptedChatModel
from toolweave.context import ElicitationResult, ToolContext
from toolweave.mcp import McpClient, McpServerConfig, SyncMcpClient, build_mcp_server
from toolweave.mcp.hooks import ElicitationRequest

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CONFORMANCE = str(Path(__file__).resolve().parent.parent / "servers/mcp_conformance_server.py")


def served(**kw: Any) -> McpServerConfig:
    """The conformance module served by `toolweave mcp serve` over stdio."""
    return McpServerConfig(
        server_name="tw",
        params={
            "command": sys.executable,
            "args": ["-m", "toolweave", "mcp", "serve", CONFORMANCE],
        },
        connect_timeout=60,
        **kw,
    )


def text(result: mcp_types.CallToolResult) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


async def test_sampling_with_a_chat_model_capped() -> None:
    model = ScriptedChatModel([AiMessage("forty-two")])
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(served(sampling_max_tokens=40), sampling=model) as client,
    ):
        result = await client.call_tool("test_sampling", {"prompt": "meaning of life?"})
    assert text(result) == "LLM response: forty-two"
    request = model.requests[0]
    assert request.messages[0].text == "meaning of life?"
    assert request.parameters.max_tokens == 40  # the server asked for 100


async def test_sampling_callback_and_rate_limit() -> None:
    seen: list[mcp_types.CreateMessageRequestParams] = []

    async def answer(params: mcp_types.CreateMessageRequestParams) -> str:
        seen.append(params)
        return "yes"

    cfg = served(sampling_max_per_minute=1)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg, sampling=answer) as client:
        first = await client.call_tool("test_sampling", {"prompt": "a"})
        second = await client.call_tool("test_sampling", {"prompt": "b"})
    assert text(first) == "LLM response: yes"
    assert second.is_error and "sampling limit reached" in text(second)
    assert len(seen) == 1


async def test_no_sampling_hook_means_no_capability() -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(served()) as client:
        result = await client.call_tool("test_sampling", {"prompt": "a"})
    assert result.is_error and "sampling is not available" in text(result)


async def test_elicitation_with_defaults_applied() -> None:
    asked: list[ElicitationRequest] = []

    async def ask(request: ElicitationRequest) -> ElicitationResult:
        asked.append(request)
        return ElicitationResult("accept", {"name": "Ada"})

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(served(), elicitation=ask) as client:
        result = await client.call_tool("test_elicitation_sep1034_defaults", {})
    content = json.loads(text(result).split("content=", 1)[1])
    # What the user gave wins; what they left out takes the schema's default.
    assert content == {
        "name": "Ada",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
    }
    assert asked[0].mode == "form" and asked[0].server_name == "tw"
    assert asked[0].schema is not None and "age" in asked[0].schema["properties"]


async def test_progress_and_server_logs() -> None:
    logs: list[tuple[str, str, object]] = []
    progress: list[tuple[float, float | None, str | None]] = []

    def on_log(server: str, params: mcp_types.LoggingMessageNotificationParams) -> None:
        logs.append((server, params.level, params.data))

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append((p, total, message))

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(served(), on_log=on_log) as client:
        await client.call_tool("test_tool_with_logging", {})
        await client.call_tool("test_tool_with_progress", {}, progress=on_progress)
    assert [d for _, _, d in logs] == [
        "Tool execution started",
        "Tool processing data",
        "Tool execution completed",
    ]
    assert {(s, lvl) for s, lvl, _ in logs} == {("tw", "info")}
    assert [p for p, _, _ in progress] == [0, 50, 100]


async def test_progress_passes_through_a_proxy() -> None:
    # An McpTool re-served by serve_mcp: the upstream's progress reaches the outer client.
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(served()) as upstream:
        tools = [t for t in await upstream.list_tools() if t.name == "test_tool_with_progress"]
        async with Client(build_mcp_server(tools), mode="legacy") as outer:
            result = await outer.call_tool(
                "test_tool_with_progress", {}, progress_callback=on_progress
            )
            assert not result.is_error
            for _ in range(100):  # forwarded without waiting: let the loop deliver them
                if len(progress) == 3:
                    break
                await asyncio.sleep(0.02)
    assert progress == [0, 50, 100]


async def test_roots_list_and_change(tmp_path: Path) -> None:
    current = [tmp_path]
    expected = tmp_path.as_uri()  # pytest's tmp_path is already resolved

    async def roots() -> list[Path]:
        return current

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(stdio_config(ECHO), roots=roots) as c:
        listed = json.loads(text(await c.call_tool("roots", {})))
        assert listed == [[expected, tmp_path.name]]
        current.append(tmp_path / "more")
        await c.roots_changed()
        assert len(json.loads(text(await c.call_tool("roots", {})))) == 2


def test_roots_list_sync_and_tools_changed() -> None:
    changed: list[bool] = []
    cfg = stdio_config(ECHO)
    with SyncMcpClient(
        cfg, roots=["file:///data", "/tmp"], on_tools_changed=lambda: changed.append(True)
    ) as client:
        listed = json.loads(text(client.call_tool("roots", {})))
        assert [u for u, _ in listed] == ["file:///data", Path("/tmp").resolve().as_uri()]
        assert text(client.call_tool("touch", {})) == "touched"
        client.list_tools()  # a round trip after the notification
    assert changed == [True]


@pytest.mark.parametrize(
    ("protocol", "answer"),
    # The handshake era: the SDK answers roots/list for a client without roots; 2026-07-28:
    # the server cannot send requests at all.
    [("auto", "List roots not supported"), ("newest", "roots/list")],
)
async def test_without_roots_the_server_gets_an_error(protocol: str, answer: str) -> None:
    from toolweave import McpError

    config = stdio_config(ECHO, protocol=protocol)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as client:
        with pytest.raises(McpError, match=answer):
            await client.call_tool("roots", {})


# --- HTTP servers that refuse us --------------------------------------------------------------


def refusing_server(status: int) -> tuple[Any, str]:
    import http.server
    import threading

    class Refuse(http.server.BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.server.posts += 1  # type: ignore[attr-defined]
            self.send_response(status)
            self.send_header("WWW-Authenticate", 'Bearer resource_metadata="http://x/prm"')
            self.send_header("Content-Length", "0")
            self.end_headers()

        do_GET = do_POST

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Refuse)
    server.posts = 0  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/mcp"


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_without_auth_is_a_typed_error(status: int) -> None:
    from toolweave import ErrorCode
    from toolweave.mcp import McpAuthError

    server, url = refusing_server(status)
    try:
        cfg = McpServerConfig(server_name="locked", params={"url": url}, connect_timeout=20)
        async with asyncio.timeout(TEST_TIMEOUT):
            with pytest.raises(McpAuthError) as info:
                async with McpClient(cfg):
                    pass
    finally:
        server.shutdown()
    error = info.value
    assert error.status == status and error.code == ErrorCode.MCP_AUTH_ERROR
    assert str(status) in error.message and "auth=" in error.message
    assert "resource_metadata" in error.details["www_authenticate"]


async def test_refused_with_a_hook_is_not_tried_again_with_the_newer_protocol() -> None:
    """A roots hook makes the client use the handshake; a 401 is not the server refusing
    the handshake, so the client does not start over with the 2026-07-28 probe."""
    from toolweave.mcp import McpAuthError

    server, url = refusing_server(401)
    try:
        cfg = McpServerConfig(server_name="locked", params={"url": url}, connect_timeout=20)
        async with asyncio.timeout(TEST_TIMEOUT):
            with pytest.raises(McpAuthError):
                async with McpClient(cfg, roots=["."]):
                    pass
    finally:
        server.shutdown()
    assert server.posts == 1  # type: ignore[attr-defined]


# --- progress in ToolService streams ------------------------------------------------------------


@tool
def local_steps(ctx: ToolContext) -> str:
    """A local sync tool reporting progress."""
    ctx.report_progress(1, 2, "half")
    ctx.report_progress(2, 2)
    return "local done"


async def test_tool_progress_events_in_a_service_stream() -> None:
    from toolweave import ToolExecutionRequest
    from toolweave.service import ToolExecutionFinished, ToolProgress, ToolService

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(served()) as client:
        remote = [t for t in await client.list_tools() if t.name == "test_tool_with_progress"]
        calls = (
            ToolExecutionRequest(id="l", name="local_steps", arguments="{}"),
            ToolExecutionRequest(id="r", name="test_tool_with_progress", arguments="{}"),
        )
        model = ScriptedChatModel([AiMessage(tool_execution_requests=calls), AiMessage("ok")])
        service = ToolService().tools([local_steps, *remote])
        events = [e async for e in service.achat_stream(model, messages="go")]
    progress = [e for e in events if isinstance(e, ToolProgress)]
    local = [(e.progress, e.total, e.message) for e in progress if e.request.id == "l"]
    assert local == [(1, 2, "half"), (2, 2, None)]
    # The MCP server's progress on the remote call arrives as events of that call.
    assert [e.progress for e in progress if e.request.id == "r"] == [0, 50, 100]
    finished = [i for i, e in enumerate(events) if isinstance(e, ToolExecutionFinished)]
    last_progress = max(i for i, e in enumerate(events) if isinstance(e, ToolProgress))
    assert last_progress < max(finished)


# --- resources and prompts of the server --------------------------------------------------------


async def test_resources_and_prompts_are_readable() -> None:
    from toolweave import McpError

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(served()) as client:
        resources = {r.uri: r for r in await client.list_resources()}
        assert "test://static-text" in resources
        templates = await client.list_resource_templates()
        assert [t.uri_template for t in templates] == ["test://template/{id}/data"]
        text = (await client.read_resource("test://static-text"))[0]
        assert getattr(text, "text", "") == "This is the content of the static text resource."
        filled = (await client.read_resource("test://template/7/data"))[0]
        assert json.loads(filled.text)["id"] == "7"  # type: ignore[union-attr]
        with pytest.raises(McpError, match="not found"):
            await client.read_resource("test://nothing")
        prompts = {p.name for p in await client.list_prompts()}
        assert "test_prompt_with_arguments" in prompts
        got = await client.get_prompt("test_prompt_with_arguments", {"arg1": "a", "arg2": "b"})
        assert got.messages[0].content.text == "Prompt with arguments: arg1='a', arg2='b'"  # type: ignore[union-attr]


def test_resources_and_prompts_sync() -> None:
    with SyncMcpClient(served()) as client:
        blob = client.read_resource("test://static-binary")[0]
        assert isinstance(blob, mcp_types.BlobResourceContents) and blob.mime_type == "image/png"
        got = client.get_prompt("test_simple_prompt")
        assert got.messages[0].content.text == "This is a simple prompt for testing."  # type: ignore[union-attr]


@tool
async def chatty(ctx: ToolContext) -> str:
    """A tool that reports progress and logs."""
    await ctx.areport_progress(1, 1, "all done")
    await ctx.alog("warning", "careful", logger="chatty")
    return "ok"


async def test_progress_and_logs_fire_callbacks_in_a_plain_chat() -> None:
    from toolweave import ToolExecutionRequest
    from toolweave.callbacks.framework import CallbackFramework
    from toolweave.service import ToolService

    seen: list[tuple[str, object]] = []
    fw = CallbackFramework()
    fw.register(
        "tool_progress",
        lambda tool_name, progress, message: seen.append((tool_name, (progress, message))),
    )
    fw.register("tool_log", lambda tool_name, level, data: seen.append((tool_name, (level, data))))
    call = ToolExecutionRequest(name="chatty", arguments="{}")
    model = ScriptedChatModel([AiMessage(tool_execution_requests=(call,)), AiMessage("ok")])
    async with asyncio.timeout(TEST_TIMEOUT):
        await ToolService(callbacks=fw).tools([chatty]).achat(model, messages="go")
    assert seen == [("chatty", (1, "all done")), ("chatty", ("warning", "careful"))]
