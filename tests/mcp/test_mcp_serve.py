"""`serve_mcp` / `build_mcp_server`: toolweave tools as an MCP server, checked with our own
client and with the official SDK's client, in process and over stdio, streamable HTTP and SSE."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
from mcp.client.client import Client
from mcp_support import DEMO, TEST_TIMEOUT, TOOLWEAVE, ServerProcess, start_server, stdio_config

from toolweave import (
    ImageContent,
    LocalFunction,
    McpError,
    TextContent,
    ToolArgumentsError,
    ToolCard,
    tool,
)
from toolweave.mcp import McpClient, McpServerConfig, McpTool, build_mcp_server

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


@tool(idempotent=True, metadata={"readOnlyHint": True})
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def divide(a: float, b: float) -> float:
    """Divide a by b."""
    return a / b


@tool
async def picture() -> list[object]:
    """A caption and an image."""
    return [TextContent(text="caption"), ImageContent(data=PNG)]


@tool
def nothing() -> None:
    """Returns None."""


# --- in process, with the official SDK client ----------------------------------------------------


async def test_sdk_client_in_process() -> None:
    from toolweave import __version__

    server = build_mcp_server([add, divide, picture, nothing], name="tw")
    async with asyncio.timeout(TEST_TIMEOUT), Client(server, mode="legacy") as client:
        assert client.server_info is not None
        assert (client.server_info.name, client.server_info.version) == ("tw", __version__)
        listing = {t.name: t for t in (await client.list_tools()).tools}
        assert set(listing) == {"add", "divide", "picture", "nothing"}
        assert listing["add"].input_schema == add.card.input_params
        assert listing["add"].description == "Add two integers."
        ann = listing["add"].annotations
        assert ann is not None and ann.read_only_hint is True and ann.idempotent_hint is True
        assert listing["divide"].annotations is None

        result = await client.call_tool("add", {"a": 2, "b": 3})
        assert not result.is_error and result.content[0].text == "5"  # type: ignore[union-attr]

        # A tool error is an isError result carrying the message, not a protocol error.
        result = await client.call_tool("divide", {"a": 1, "b": 0})
        assert result.is_error
        assert "division by zero" in result.content[0].text  # type: ignore[union-attr]

        # Bad arguments too: the model can read and correct them.
        result = await client.call_tool("add", {"a": "x", "b": 1})
        assert result.is_error and "a" in result.content[0].text  # type: ignore[union-attr]
        result = await client.call_tool("add", {"a": 1})
        assert result.is_error

        result = await client.call_tool("picture", {})
        assert [c.type for c in result.content] == ["text", "image"]
        assert result.content[1].data == PNG  # type: ignore[union-attr]

        result = await client.call_tool("nothing", {})
        assert result.content[0].text == "Success"  # type: ignore[union-attr]


async def test_unknown_tool_is_a_protocol_error() -> None:
    from mcp.shared.exceptions import MCPError

    server = build_mcp_server([add])
    async with asyncio.timeout(TEST_TIMEOUT), Client(server) as client:
        try:
            result = await client.call_tool("nope", {})
        except MCPError as e:
            assert "nope" in e.message
        else:  # some SDK paths turn it into an error result
            assert result.is_error


def test_duplicate_names_rejected() -> None:
    from toolweave import ToolCardError

    other = LocalFunction(ToolCard(name="add"), lambda: 1)
    with pytest.raises(ToolCardError, match="add"):
        build_mcp_server([add, other])


# --- over real transports, subprocess servers ------------------------------------------------------


@pytest.fixture
def toolweave_http() -> Iterator[ServerProcess]:
    server = start_server([TOOLWEAVE, "streamable-http"])
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def toolweave_sse() -> Iterator[ServerProcess]:
    server = start_server([TOOLWEAVE, "sse"])
    try:
        yield server
    finally:
        server.stop()


async def check_toolweave_server(client: McpClient) -> None:
    tools = {t.name: t for t in await client.list_tools()}
    assert set(tools) == {"add", "divide", "snapshot", "shout"}
    assert tools["add"].card.metadata["annotations"] == {
        "readOnlyHint": True,
        "idempotentHint": True,
    }
    assert tools["shout"].card.metadata["annotations"] == {
        "destructiveHint": False,
        "title": "Shout",
    }
    assert tools["shout"].card.input_params["properties"]["text"]["description"] == "what to shout"
    assert await tools["add"].ainvoke({"a": 20, "b": 22}) == "42"
    assert await tools["shout"].ainvoke({"text": "hey"}) == "HEY"
    with pytest.raises(McpError, match="division by zero"):
        await tools["divide"].ainvoke({"a": 1, "b": 0})
    assert await tools["snapshot"].ainvoke({}) == [
        TextContent(text="shot"),
        ImageContent(data=PNG, mime_type="image/png"),
    ]
    # Our client validates before sending: the server never sees this.
    with pytest.raises(ToolArgumentsError):
        await tools["add"].ainvoke({"a": 1})


async def test_serve_stdio_with_our_client() -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(stdio_config(TOOLWEAVE, name="tw")) as c:
        await check_toolweave_server(c)


async def test_serve_streamable_http_with_our_client(toolweave_http: ServerProcess) -> None:
    cfg = McpServerConfig(
        server_name="tw", params={"url": f"http://127.0.0.1:{toolweave_http.port}/mcp"}
    )
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as c:
        await check_toolweave_server(c)


async def test_serve_sse_with_our_client(toolweave_sse: ServerProcess) -> None:
    cfg = McpServerConfig(
        server_name="tw",
        client_type="sse",
        params={"url": f"http://127.0.0.1:{toolweave_sse.port}/sse"},
    )
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as c:
        await check_toolweave_server(c)


async def test_serve_streamable_http_with_sdk_client(toolweave_http: ServerProcess) -> None:
    url = f"http://127.0.0.1:{toolweave_http.port}/mcp"
    async with asyncio.timeout(TEST_TIMEOUT), Client(url) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"add", "divide", "snapshot", "shout"}
        result = await client.call_tool("add", {"a": 1, "b": 2})
        assert result.content[0].text == "3"  # type: ignore[union-attr]
        result = await client.call_tool("divide", {"a": 1, "b": 0})
        assert result.is_error and "division by zero" in result.content[0].text  # type: ignore[union-attr]
        # Validation happens on the server too, for clients that do not validate.
        result = await client.call_tool("add", {"a": 1, "b": 2, "c": 3})
        assert result.is_error and "c" in result.content[0].text  # type: ignore[union-attr]


async def test_serve_legacy_handshake_with_sdk_client(toolweave_http: ServerProcess) -> None:
    url = f"http://127.0.0.1:{toolweave_http.port}/mcp"
    async with asyncio.timeout(TEST_TIMEOUT), Client(url, mode="legacy") as client:
        result = await client.call_tool("shout", {"text": "old"})
        assert result.content[0].text == "OLD"  # type: ignore[union-attr]


async def test_proxy_mcp_tools_through_serve_mcp(demo_config: McpServerConfig) -> None:
    # McpTools from one server, re-served by build_mcp_server: a tiny MCP proxy.
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as upstream:
        tools: list[McpTool] = [
            t for t in await upstream.list_tools() if t.name in ("add", "fail", "picture")
        ]
        proxy = build_mcp_server(tools, name="proxy")
        async with Client(proxy) as client:
            listing = {t.name: t for t in (await client.list_tools()).tools}
            assert listing["add"].annotations is not None
            assert listing["add"].annotations.read_only_hint is True
            result = await client.call_tool("add", {"a": 5, "b": 5})
            assert result.content[0].text == "10"  # type: ignore[union-attr]
            result = await client.call_tool("fail", {"message": "upstream says no"})
            assert result.is_error and "upstream says no" in result.content[0].text  # type: ignore[union-attr]
            result = await client.call_tool("picture", {})
            assert result.content[0].type == "image"


def test_cli_http_start_up_line_is_the_full_url() -> None:
    import os
    import re
    import subprocess
    import sys

    from mcp_support import free_port

    port = free_port()
    argv = [sys.executable, "-m", "toolweave", "mcp", "serve", TOOLWEAVE, "--transport", "http"]
    proc = subprocess.Popen(
        [*argv, "--port", str(port), "--name", "tw"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        env={**os.environ, "NO_COLOR": "1", "COLUMNS": "200"},
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        match = re.search(r"http://\S+", line)
        assert match, line
        assert match.group(0) == f"http://127.0.0.1:{port}/mcp"

        async def use() -> None:
            cfg = McpServerConfig(server_name="tw", params={"url": match.group(0)})
            async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as c:
                assert {t.name for t in await c.list_tools()} >= {"add", "shout"}

        from mcp_support import wait_for_port

        wait_for_port(port, proc)  # type: ignore[arg-type]
        asyncio.run(use())
    finally:
        proc.terminate()
        proc.wait(10)


_ = DEMO


async def test_a_served_tool_requiring_approval_asks_through_elicitation() -> None:
    """`requires_approval` on a served tool: the server asks the client's user (MCP
    elicitation) before running it; a decline, or a client that cannot be asked, is an
    error result and the tool does not run."""
    import mcp_types

    ran: list[int] = []

    @tool(requires_approval=lambda args, ctx: args["amount"] > 10)
    def pay(amount: int) -> str:
        """Pay an amount."""
        ran.append(amount)
        return f"paid {amount}"

    server = build_mcp_server([pay])
    questions: list[str] = []
    answers = iter([True, False])

    async def elicit(context: object, params: mcp_types.ElicitRequestParams) -> object:
        questions.append(params.message)
        approve = next(answers)
        return mcp_types.ElicitResult(action="accept", content={"approve": approve})

    async with (
        asyncio.timeout(TEST_TIMEOUT),
        Client(server, mode="legacy", elicitation_callback=elicit) as client,
    ):
        small = await client.call_tool("pay", {"amount": 5})  # under the policy: not asked
        assert not small.is_error and ran == [5] and questions == []
        approved = await client.call_tool("pay", {"amount": 50})
        assert not approved.is_error and ran == [5, 50]
        assert "'pay'" in questions[0] and '"amount": 50' in questions[0]
        declined = await client.call_tool("pay", {"amount": 70})
        assert declined.is_error and ran == [5, 50]
        assert "did not approve" in declined.content[0].text  # type: ignore[union-attr]
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        Client(server, mode="legacy") as client,
    ):  # no elicitation
        refused = await client.call_tool("pay", {"amount": 99})
        assert refused.is_error and ran == [5, 50]
        assert "elicitation" in refused.content[0].text  # type: ignore[union-attr]
