"""McpClient / McpTool against real MCP servers over stdio (SDK `MCPServer` and low-level)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from mcp_support import ECHO, MODERN_ONLY, TEST_TIMEOUT, file_appears, stdio_config

from toolweave import ErrorCode, ImageContent, McpError, TextContent, ToolArgumentsError
from toolweave._utils.sync import run_sync
from toolweave.errors import ToolNotSupportedError, ToolTimeoutError
from toolweave.mcp import (
    McpClient,
    McpServerConfig,
    McpTimeoutError,
    McpTool,
    McpToolCard,
    SyncMcpClient,
)

PNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII="


async def tools_by_name(client: McpClient) -> dict[str, McpTool]:
    return {t.name: t for t in await client.list_tools()}


async def test_list_tools_gives_cards(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = await tools_by_name(client)
    assert {"add", "greet", "fail", "picture", "slow", "die"} <= set(tools)
    add = tools["add"]
    assert isinstance(add.card, McpToolCard)
    assert add.card.server_name == "demo" and add.card.server_id == "demo"
    assert add.card.description == "Add two integers."
    assert add.card.input_params["required"] == ["a", "b"]
    assert add.card.input_params["properties"]["a"]["type"] == "integer"
    # Annotations are kept; idempotentHint sets the card's flag.
    assert add.card.metadata["annotations"] == {"readOnlyHint": True, "idempotentHint": True}
    assert add.card.idempotent is True
    assert tools["greet"].card.idempotent is False


async def test_call_tool_raw_and_through_tool(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        raw = await client.call_tool("add", {"a": 1, "b": 2})
        assert raw.is_error is False
        assert raw.content[0].text == "3"  # type: ignore[union-attr]
        tools = await tools_by_name(client)
        # Lax coercion happens before the call: "3" -> 3 for an integer.
        assert await tools["add"].ainvoke({"a": 2, "b": "3"}) == "5"
        assert await tools["add"].ainvoke('{"a": 4, "b": 5}') == "9"


async def test_text_blocks_joined_with_blank_line(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = await tools_by_name(client)
        assert await tools["two_texts"].ainvoke({}) == "first\n\nsecond"


async def test_images_kept_as_content_parts(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = await tools_by_name(client)
        picture = await tools["picture"].ainvoke({})
        assert picture == [ImageContent(data=PNG, mime_type="image/png")]
        mixed = await tools["mixed"].ainvoke({})
        assert mixed == [
            TextContent(text="a caption"),
            ImageContent(data=PNG, mime_type="image/png"),
        ]


async def test_is_error_raises_mcp_error_with_server_text(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = await tools_by_name(client)
        with pytest.raises(McpError) as info:
            await tools["fail"].ainvoke({"message": "the disk is full"})
        assert info.value.code == ErrorCode.MCP_EXECUTION_ERROR
        assert "the disk is full" in info.value.message
        # An unexpected exception reaches the client only as the SDK's generic text.
        with pytest.raises(McpError) as info:
            await tools["crash"].ainvoke({})
        assert "Error executing tool crash" in info.value.message
        assert "secret" not in info.value.message
        # The connection is still fine.
        assert await tools["add"].ainvoke({"a": 1, "b": 1}) == "2"


async def test_bad_arguments_rejected_before_the_call(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = await tools_by_name(client)
        add = tools["add"]
        with pytest.raises(ToolArgumentsError) as info:
            await add.ainvoke({"a": 1})
        assert "b" in info.value.message
        with pytest.raises(ToolArgumentsError):
            await add.ainvoke({"a": "one", "b": 2})
        with pytest.raises(ToolArgumentsError):
            await add.ainvoke({"a": 1, "b": 2, "c": 3})  # unknown key
        with pytest.raises(ToolArgumentsError):
            await add.ainvoke("[1, 2]")  # not an object
        with pytest.raises(ToolArgumentsError):
            await add.ainvoke("{this is not json at all")


async def test_unknown_tool_is_a_clear_error(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        result = await client.call_tool("no_such_tool", {})
        assert result.is_error
        card = McpToolCard(name="no_such_tool", server_name="demo")
        with pytest.raises(McpError, match="no_such_tool"):
            await McpTool(card, client).ainvoke({})


async def test_stream_not_supported(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = await tools_by_name(client)
        with pytest.raises(ToolNotSupportedError) as info:
            tools["add"].stream({"a": 1, "b": 2})
        assert info.value.code == ErrorCode.TOOL_STREAM_NOT_SUPPORTED
        with pytest.raises(ToolNotSupportedError):
            tools["add"].astream({"a": 1, "b": 2})


def test_tool_without_client() -> None:
    with pytest.raises(McpError) as info:
        McpTool(McpToolCard(name="x"), None)
    assert info.value.code == ErrorCode.MCP_CLIENT_NOT_SUPPORTED


# --- input preparation, seen from the server side ------------------------------------------------


async def test_optional_none_dropped_empty_object_kept() -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(stdio_config(ECHO, name="echo")) as client:
        tools = await tools_by_name(client)
        echo = tools["echo"]
        out = json.loads(await echo.ainvoke({"text": "hi", "note": None, "options": {}}))
        # None for an optional argument is dropped; the schema default is filled; {} stays.
        assert out["arguments"] == {"text": "hi", "count": 1, "options": {}}
        # The model's JSON string goes through the same path.
        out = json.loads(await echo.ainvoke('{"text": "x", "note": null}'))
        assert out["arguments"] == {"text": "x", "count": 1}
        # No arguments at all: {} is sent (not null).
        loose = tools["echo_loose"]
        out = json.loads(await loose.ainvoke({}))
        assert out == {"arguments": {}, "name": "echo.loose"}
        out = json.loads(await loose.ainvoke(None))
        assert out["arguments"] == {}
        # skip_none_value=False sends the null through (the schema allows extra keys here).
        out = json.loads(await loose.ainvoke({"k": None}, skip_none_value=False))
        assert out["arguments"] == {"k": None}


async def test_defaults_filled_after_validation() -> None:
    # a default outside its own enum, and a null default on a string: the model's valid
    # call must not fail on them (JSON Schema's default is an annotation)
    schema = {
        "type": "object",
        "properties": {
            "text": {"type": "string"},
            "note": {"type": "string", "default": None},
            "unit": {"type": "string", "enum": ["c", "f"], "default": "kelvin"},
        },
        "required": ["text"],
    }
    cfg = stdio_config(ECHO, name="echo", env={"ECHO_SCHEMA": json.dumps(schema)})
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as client:
        echo = (await tools_by_name(client))["echo"]
        out = json.loads(await echo.ainvoke('{"text": "hi"}'))
        assert out["arguments"] == {"text": "hi", "unit": "kelvin"}
        out = json.loads(await echo.ainvoke('{"text": "hi", "note": null, "unit": "f"}'))
        assert out["arguments"] == {"text": "hi", "unit": "f"}


async def test_names_sanitised_and_prefixed() -> None:
    cfg = stdio_config(ECHO, name="my.server", prefix_tool_names=True)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as client:
        tools = await client.list_tools()
        names = [t.name for t in tools]
        assert names[0] == "mcp_my_server_echo"
        assert names[1] == "mcp_my_server_echo_loose"
        long = tools[2]
        assert len(long.name) == 64 and long.name.startswith("mcp_my_server_xxx")
        assert long.card.remote_name == "x" * 80
        # Calls use the server's own name.
        out = json.loads(await long.ainvoke({}))
        assert out["name"] == "x" * 80
    # Deterministic: listing again gives the same names.
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as client:
        assert [t.name for t in await client.list_tools()] == names


# --- timeouts and cancellation --------------------------------------------------------------------


async def wait_for_file(path: Path) -> bool:
    return await asyncio.to_thread(file_appears, path)


async def test_timeout_from_kwarg_cancels_on_server(
    demo_config: McpServerConfig, marker_dir: Path
) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        slow = (await tools_by_name(client))["slow"]
        for key, tag in (("timeout", "a"), ("operation_timeout", "b"), ("operationTimeout", "c")):
            with pytest.raises(ToolTimeoutError):
                await slow.ainvoke({"seconds": 60, "tag": tag}, **{key: 0.5})
            assert await wait_for_file(marker_dir / f"cancelled-{tag}")
        # The connection survives a timed-out call.
        assert await slow.ainvoke({"seconds": 0, "tag": "d"}) == "done"


async def test_timeout_from_card(demo_config: McpServerConfig, marker_dir: Path) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        slow = (await tools_by_name(client))["slow"]
        timed = McpTool(slow.card.model_copy(update={"timeout": 0.5}), client)
        with pytest.raises(ToolTimeoutError):
            await timed.ainvoke({"seconds": 60, "tag": "card"})
        assert await wait_for_file(marker_dir / "cancelled-card")


async def test_client_call_timeout(marker_dir: Path) -> None:
    from mcp_support import DEMO

    cfg = stdio_config(DEMO, env={"MCP_MARKER_DIR": str(marker_dir)}, call_timeout=0.5)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as client:
        with pytest.raises(McpTimeoutError) as info:
            await client.call_tool("slow", {"seconds": 60, "tag": "cfg"})
        assert info.value.code == ErrorCode.MCP_TIMEOUT
        assert isinstance(info.value, ToolTimeoutError)
        assert await wait_for_file(marker_dir / "cancelled-cfg")
        # A per-call timeout overrides the configured one.
        result = await client.call_tool("slow", {"seconds": 1, "tag": "ok"}, timeout=30)
        assert result.content[0].text == "done"  # type: ignore[union-attr]


async def test_caller_cancellation_reaches_server(
    demo_config: McpServerConfig, marker_dir: Path
) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        slow = (await tools_by_name(client))["slow"]
        task = asyncio.create_task(slow.ainvoke({"seconds": 60, "tag": "caller"}))
        assert await wait_for_file(marker_dir / "started-caller")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert await wait_for_file(marker_dir / "cancelled-caller")
        assert await slow.ainvoke({"seconds": 0, "tag": "after"}) == "done"


async def test_parallel_calls_share_one_connection(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        tools = await tools_by_name(client)
        pids = await asyncio.gather(*(tools["pid"].ainvoke({}) for _ in range(8)))
        assert len(set(pids)) == 1
        sums = await asyncio.gather(*(tools["add"].ainvoke({"a": i, "b": i}) for i in range(20)))
        assert sums == [str(2 * i) for i in range(20)]


# --- the sync face --------------------------------------------------------------------------------


def test_sync_client(demo_config: McpServerConfig) -> None:
    with SyncMcpClient(demo_config) as client:
        tools = {t.name: t for t in client.list_tools()}
        assert client.call_tool("add", {"a": 2, "b": 2}).content[0].text == "4"  # type: ignore[union-attr]
        assert tools["add"].invoke({"a": 5, "b": 6}) == "11"
        with pytest.raises(McpError, match="nope"):
            tools["fail"].invoke({"message": "nope"})
        with pytest.raises(ToolTimeoutError):
            tools["slow"].invoke({"seconds": 60}, timeout=0.5)


def test_sync_invoke_goes_straight_to_the_connections_loop(demo_config: McpServerConfig) -> None:
    """`invoke` from plain code blocks on the connection's loop once: no loop of the calling
    thread's own (which would then hand the call on to the connection's)."""
    import threading

    from toolweave._utils import sync

    with SyncMcpClient(demo_config) as client:
        add = {t.name: t for t in client.list_tools()}["add"]
        seen: list[object] = []

        def call() -> None:
            seen.append(add.invoke({"a": 1, "b": 1}))
            seen.append(getattr(sync._local, "held", None))

        worker = threading.Thread(target=call)
        worker.start()
        worker.join(TEST_TIMEOUT)
    assert seen == ["2", None]


def test_connect_sync_and_tools_usable_from_async_code(demo_config: McpServerConfig) -> None:
    client = McpClient.connect_sync(demo_config)
    try:
        tools = {t.name: t for t in client.list_tools()}

        async def use() -> list[str]:
            # A tool of a sync client, awaited on another loop; also invoke() from inside a
            # running loop (runs on a helper thread, never re-entering this loop).
            return [
                await tools["add"].ainvoke({"a": 1, "b": 2}),
                tools["add"].invoke({"a": 3, "b": 4}),
            ]

        assert asyncio.run(use()) == ["3", "7"]
    finally:
        client.close()
        client.close()  # idempotent


async def test_async_client_tools_usable_from_sync_code(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        add = (await tools_by_name(client))["add"]
        # invoke() (blocking) from a worker thread, while this loop keeps running.
        assert await asyncio.to_thread(add.invoke, {"a": 20, "b": 22}) == "42"


def _era(client: McpClient) -> str:
    conn = client._core._conn
    assert conn is not None and conn.client is not None
    return conn.client.protocol_version


@pytest.mark.parametrize(
    ("transport", "protocol", "era"),
    [
        # Over stdio "auto" is the handshake: the newer protocol costs per call and buys
        # nothing on a connection that is a session anyway; over HTTP it is the newest.
        ("demo_config", "auto", "2025-11-25"),
        ("demo_config", "handshake", "2025-11-25"),
        ("demo_config", "newest", "2026-07-28"),
        ("demo_http_config", "auto", "2026-07-28"),
        ("demo_http_config", "handshake", "2025-11-25"),
        ("demo_http_config", "newest", "2026-07-28"),
    ],
)
async def test_protocol_choice(
    request: pytest.FixtureRequest, transport: str, protocol: str, era: str
) -> None:
    base: McpServerConfig = request.getfixturevalue(transport)
    config = base.model_copy(update={"protocol": protocol})
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as client:
        add = (await tools_by_name(client))["add"]
        assert await add.ainvoke({"a": 1, "b": 2}) == "3"
        assert _era(client) == era


async def test_a_stdio_server_that_refuses_the_handshake_gets_the_newer_protocol(
    tmp_path: Path,
) -> None:
    """A server that speaks only 2026-07-28 answers ``initialize`` with -32022: the client
    starts it again and probes, once; reconnects then probe straight away."""
    log = tmp_path / "connections.log"
    config = stdio_config(MODERN_ONLY, name="modern", env={"MODERN_ONLY_LOG": str(log)})
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as client:
        (add,) = await client.list_tools()
        assert await add.ainvoke({"a": 2, "b": 3}) == "5"
        assert _era(client) == "2026-07-28"
        assert log.read_text().count("connected") == 2
        assert client._core._connect_mode() == "auto"


async def test_protocol_handshake_does_not_fall_back() -> None:
    config = stdio_config(MODERN_ONLY, name="modern", protocol="handshake")
    with pytest.raises(McpError) as info:
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(config):
            pass
    assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
    assert "the initialize handshake is not accepted" in info.value.message


def _mcp_threads() -> list[str]:
    import threading

    return [t.name for t in threading.enumerate() if t.name.startswith("toolweave-mcp-")]


async def test_async_client_lives_on_the_callers_loop(demo_config: McpServerConfig) -> None:
    # Connected from async code, the connection runs on this loop: calls made here run
    # inline (no private loop thread, no hop), the tools still work from other threads.
    before = _mcp_threads()
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        add = (await tools_by_name(client))["add"]
        assert await add.ainvoke({"a": 1, "b": 2}) == "3"
        assert _mcp_threads() == before
        assert await asyncio.to_thread(add.invoke, {"a": 2, "b": 3}) == "5"
        assert await asyncio.gather(*(add.ainvoke({"a": i, "b": i}) for i in range(5))) == [
            str(2 * i) for i in range(5)
        ]


async def test_blocking_call_on_the_clients_own_loop_fails_instead_of_hanging(
    demo_config: McpServerConfig,
) -> None:
    # invoke() inside a coroutine of the loop the connection lives on would wait for that
    # very loop: a clear error instead of a deadlock; the client stays usable.
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(demo_config) as client:
        add = (await tools_by_name(client))["add"]
        with pytest.raises(McpError, match="blocking call") as info:
            add.invoke({"a": 1, "b": 2})
        assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR

        async def nested() -> object:  # a sync face inside another one's helper loop
            return add.invoke({"a": 1, "b": 2})

        with pytest.raises(McpError, match="blocking call"):
            run_sync(nested())
        assert await add.ainvoke({"a": 1, "b": 2}) == "3"


def test_async_client_outlives_its_loop(demo_config: McpServerConfig) -> None:
    # The loop an async client connected from has ended (asyncio.run returned, the
    # connection closed with it): the next call, from another loop or sync code, reconnects.
    client = McpClient(demo_config)

    async def setup() -> dict[str, McpTool]:
        async with asyncio.timeout(TEST_TIMEOUT):
            await client.connect()
            return await tools_by_name(client)

    tools = asyncio.run(setup())
    try:

        async def use() -> str:
            async with asyncio.timeout(TEST_TIMEOUT):
                return str(await tools["add"].ainvoke({"a": 1, "b": 2}))

        assert asyncio.run(use()) == "3"
        assert tools["add"].invoke({"a": 3, "b": 4}) == "7"
        assert asyncio.run(use()) == "3"
    finally:
        asyncio.run(client.close())
    assert client.closed


def test_async_client_whose_loop_is_not_running(demo_config: McpServerConfig) -> None:
    # A loop driven now and then (run_until_complete): between its runs, a call from
    # plain code cannot be handed to it; the client reconnects on a loop of its own.
    loop = asyncio.new_event_loop()
    client = McpClient(demo_config)

    async def setup() -> dict[str, McpTool]:
        async with asyncio.timeout(TEST_TIMEOUT):
            await client.connect()
            return await tools_by_name(client)

    async def use() -> str:
        async with asyncio.timeout(TEST_TIMEOUT):
            return str(await tools["add"].ainvoke({"a": 1, "b": 1}))

    try:
        tools = loop.run_until_complete(setup())
        assert tools["add"].invoke({"a": 20, "b": 22}) == "42"
        assert loop.run_until_complete(use()) == "2"
    finally:
        loop.run_until_complete(asyncio.wait_for(client.close(), TEST_TIMEOUT))
        loop.run_until_complete(asyncio.sleep(0.5))  # the abandoned connection winds down
        loop.close()
    assert client.closed


async def test_closed_client_refuses_calls(demo_config: McpServerConfig) -> None:
    async with asyncio.timeout(TEST_TIMEOUT):
        client = McpClient(demo_config)
        async with client:
            add = (await tools_by_name(client))["add"]
        assert client.closed
        with pytest.raises(McpError, match="closed"):
            await add.ainvoke({"a": 1, "b": 2})
        with pytest.raises(McpError, match="closed"):
            await client.list_tools()


# --- identity, stderr, names and paging -----------------------------------------------------------


async def test_client_introduces_itself_as_toolweave() -> None:
    from toolweave import __version__

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(stdio_config(ECHO, name="echo")) as client:
        raw = await client.call_tool("whoami", {})
    assert json.loads(raw.content[0].text) == {  # type: ignore[union-attr]
        "name": "toolweave",
        "version": __version__,
    }


async def test_errlog_accepts_a_stream_without_fileno() -> None:
    import io

    errlog = io.StringIO()  # fileno() raises io.UnsupportedOperation
    async with asyncio.timeout(TEST_TIMEOUT):
        async with McpClient(stdio_config(ECHO, name="echo"), errlog=errlog) as client:
            assert (await client.call_tool("echo", {"text": "x"})).is_error is False
        # The pump copies the server's stderr once the server has closed it.
        for _ in range(600):
            if "echo server starting" in errlog.getvalue():
                break
            await asyncio.sleep(0.05)
    assert "echo server starting" in errlog.getvalue()


async def test_names_unique_for_repeats_and_clashes(caplog: pytest.LogCaptureFixture) -> None:
    cfg = stdio_config(ECHO, name="echo", env={"ECHO_LISTING": "dup"})
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as client:
        tools = await client.list_tools()
        names = [t.name for t in tools]
        remote = [t.card.remote_name for t in tools]
        # "echo" listed twice is kept once; three names that sanitise alike stay distinct.
        assert remote.count("echo") == 1
        assert {"echo.loose", "echo_loose", "echo/loose"} <= set(remote)
        assert len(set(names)) == len(names)
        assert tools[remote.index("echo.loose")].name == "echo_loose"
        # Calls reach the tool the name stands for.
        clash = tools[remote.index("echo/loose")]
        assert json.loads(await clash.ainvoke({}))["name"] == "echo/loose"
        assert "listed more than once" in caplog.text
        # A ToolService accepts them all.
        from toolweave.service import ToolService

        ToolService().tools(tools)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as client:
        assert [t.name for t in await client.list_tools()] == names  # deterministic


async def test_paging_loop_is_reported() -> None:
    cfg = stdio_config(ECHO, name="echo", env={"ECHO_LISTING": "loop"})
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as client:
        with pytest.raises(McpError, match="repeated the cursor 'again'") as info:
            await client.list_tools()
    assert info.value.code == ErrorCode.MCP_EXECUTION_ERROR
