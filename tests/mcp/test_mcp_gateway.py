"""The MCP gateway (`serve_mcp(proxy=...)`, `toolweave mcp serve --proxy`): a real upstream
server (tests/servers/mcp_gateway_upstream.py, over stdio or streamable HTTP) proxied by a
toolweave server, seen by the Python SDK's client (in process) and by toolweave's
`McpClient` (over HTTP, the gateway in a subprocess)."""

from __future__ import annotations

import asyncio
import hashlib
import os
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.subscriptions import ToolsListChanged
from mcp_support import (
    SERVERS,
    TEST_TIMEOUT,
    ServerProcess,
    file_appears,
    free_port,
    start_server,
    stdio_config,
    wait_for_port,
)

from toolweave import tool
from toolweave.context import ElicitationResult
from toolweave.mcp import McpAuthError, McpClient, McpServerConfig, build_mcp_server
from toolweave.mcp.gateway import McpProxy, proxy_from_spec
from toolweave.mcp.hooks import ElicitationRequest

pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning"),
]

UPSTREAM = str(SERVERS / "mcp_gateway_upstream.py")
GATEWAY = str(SERVERS / "mcp_gateway_server.py")


@tool
def hello(name: str) -> str:
    """Say hello."""
    return f"hi {name}"


def text(result: types.CallToolResult) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


@pytest.fixture
def upstream_stdio(marker_dir: Path) -> McpServerConfig:
    return stdio_config(UPSTREAM, name="up", env={"MCP_MARKER_DIR": str(marker_dir)})


@pytest.fixture
def upstream_http(marker_dir: Path) -> Iterator[ServerProcess]:
    server = start_server([UPSTREAM, "streamable-http"], env={"MCP_MARKER_DIR": str(marker_dir)})
    try:
        yield server
    finally:
        server.stop()


def http_config(server: ServerProcess, **kw: Any) -> McpServerConfig:
    return McpServerConfig(
        server_name="up", params={"url": f"http://127.0.0.1:{server.port}/mcp"}, **kw
    )


@pytest.fixture(params=["stdio", "streamable-http"])
def upstream(request: pytest.FixtureRequest, marker_dir: Path) -> Iterator[McpServerConfig]:
    """The upstream over either transport."""
    if request.param == "stdio":
        yield stdio_config(UPSTREAM, name="up", env={"MCP_MARKER_DIR": str(marker_dir)})
        return
    server = start_server([UPSTREAM, "streamable-http"], env={"MCP_MARKER_DIR": str(marker_dir)})
    try:
        yield http_config(server)
    finally:
        server.stop()


@asynccontextmanager
async def gateway(*proxies: McpServerConfig | McpProxy, **client: Any) -> AsyncIterator[Client]:
    """The SDK's client connected in process to a toolweave server proxying `proxies`."""
    server = build_mcp_server([hello], proxy=proxies)
    async with asyncio.timeout(TEST_TIMEOUT), Client(server, mode="legacy", **client) as c:
        yield c


async def test_namespaced_tools_are_listed_verbatim_and_called(
    upstream_stdio: McpServerConfig,
) -> None:
    async with McpClient(upstream_stdio) as direct:
        upstream_tools = {t.name: t for t in await direct.list_mcp_tools()}
    async with gateway(upstream_stdio) as client:
        listed = {t.name: t for t in (await client.list_tools()).tools}
        assert "hello" in listed
        assert {n for n in listed if n != "hello"} == {f"up_{n}" for n in upstream_tools}
        add = listed["up_add"]
        assert add.input_schema == upstream_tools["add"].input_schema
        assert add.output_schema == upstream_tools["add"].output_schema
        assert add.description == upstream_tools["add"].description

        result = await client.call_tool("up_add", {"a": 2, "b": 3})
        assert not result.is_error
        assert text(result) == "5"
        assert result.structured_content == {"result": 5}
        assert text(await client.call_tool("hello", {"name": "ann"})) == "hi ann"
        with pytest.raises(Exception, match="Unknown tool"):
            await client.call_tool("add", {"a": 1, "b": 1})  # only the namespaced name


async def test_a_namespace_is_configurable_and_can_be_empty(
    upstream_stdio: McpServerConfig,
) -> None:
    async with gateway(McpProxy(upstream_stdio, namespace="calc", separator=".")) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert "calc.add" in names and "up_add" not in names
        assert text(await client.call_tool("calc.add", {"a": 1, "b": 2})) == "3"
    async with gateway(McpProxy(upstream_stdio, namespace="")) as client:
        assert text(await client.call_tool("add", {"a": 4, "b": 2})) == "6"


def test_two_upstreams_cannot_share_a_namespace(upstream_stdio: McpServerConfig) -> None:
    with pytest.raises(ValueError, match="share the namespace"):
        build_mcp_server([], proxy=[upstream_stdio, McpProxy(upstream_stdio, namespace="up")])


async def test_resources_keep_their_uris_and_prompts_are_namespaced(
    upstream: McpServerConfig,
) -> None:
    async with gateway(upstream) as client:
        resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in resources] == ["memo://readme"]
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["memo://notes/{name}"]

        read = await client.read_resource("memo://readme")
        assert [c.text for c in read.contents] == ["upstream readme"]  # type: ignore[union-attr]
        note = await client.read_resource("memo://notes/abc")
        assert [c.text for c in note.contents] == ["note abc"]  # type: ignore[union-attr]
        with pytest.raises(Exception, match=r"not found|Unknown resource"):
            await client.read_resource("memo://nothing/here")

        prompts = (await client.list_prompts()).prompts
        assert [p.name for p in prompts] == ["up_review"]
        got = await client.get_prompt("up_review", {"code": "x = 1"})
        assert got.messages[0].content.text == "Review this: x = 1"  # type: ignore[union-attr]


async def test_completions_reach_the_upstream_serving_the_prompt_or_template(
    upstream_stdio: McpServerConfig,
) -> None:
    async with gateway(upstream_stdio) as client:
        prompt = types.PromptReference(type="ref/prompt", name="up_review")
        done = await client.complete(prompt, {"name": "code", "value": "pr"})
        assert done.completion.values == ["print(1)"]
        template = types.ResourceTemplateReference(type="ref/resource", uri="memo://notes/{name}")
        done = await client.complete(template, {"name": "name", "value": "b"})
        assert done.completion.values == ["beta"]
        unknown = types.PromptReference(type="ref/prompt", name="nothing")
        assert (await client.complete(unknown, {"name": "x", "value": ""})).completion.values == []


async def test_the_upstreams_list_changed_reaches_the_client_with_the_new_list(
    upstream: McpServerConfig,
) -> None:
    changed = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            changed.set()

    async with gateway(upstream, message_handler=on_message) as client:
        before = {t.name for t in (await client.list_tools()).tools}
        assert "up_fresh" not in before
        assert text(await client.call_tool("up_grow", {"name": "fresh"})) == "grew fresh"
        await changed.wait()
        after = {t.name for t in (await client.list_tools()).tools}
        assert after == before | {"up_fresh"}
        assert text(await client.call_tool("up_fresh", {})) == "fresh ran"


async def test_resource_and_prompt_list_changes_are_followed(
    upstream_stdio: McpServerConfig,
) -> None:
    seen: set[str] = set()
    both = asyncio.Event()

    async def on_message(message: Any) -> None:
        note = getattr(message, "root", message)
        if isinstance(note, types.ResourceListChangedNotification):
            seen.add("resources")
        elif isinstance(note, types.PromptListChangedNotification):
            seen.add("prompts")
        if seen == {"resources", "prompts"}:
            both.set()

    async with gateway(upstream_stdio, message_handler=on_message) as client:
        assert [str(r.uri) for r in (await client.list_resources()).resources] == ["memo://readme"]
        assert [p.name for p in (await client.list_prompts()).prompts] == ["up_review"]
        await client.call_tool("up_grow_extras", {"name": "extra1"})
        await both.wait()
        uris = [str(r.uri) for r in (await client.list_resources()).resources]
        assert uris == ["memo://readme", "memo://extra1"]
        assert [p.name for p in (await client.list_prompts()).prompts] == [
            "up_review",
            "up_extra1",
        ]
        read = await client.read_resource("memo://extra1")
        assert [c.text for c in read.contents] == ["extra extra1"]  # type: ignore[union-attr]
        got = await client.get_prompt("up_extra1", {})
        assert got.messages[0].content.text == "extra extra1"  # type: ignore[union-attr]


async def test_a_subscription_reaches_the_upstream_and_its_updates_the_client(
    upstream_stdio: McpServerConfig,
) -> None:
    updated: list[str] = []
    seen = asyncio.Event()

    async def on_message(message: Any) -> None:
        note = getattr(message, "root", message)
        if isinstance(note, types.ResourceUpdatedNotification):
            updated.append(str(note.params.uri))
            seen.set()

    async with gateway(upstream_stdio, message_handler=on_message) as client:
        touched = await client.call_tool("up_touch", {"uri": "memo://readme"})
        assert text(touched) == "nobody subscribed to memo://readme"
        await client.subscribe_resource("memo://readme")
        touched = await client.call_tool("up_touch", {"uri": "memo://readme"})
        assert text(touched) == "touched memo://readme"
        await seen.wait()
        assert updated == ["memo://readme"]
        await client.unsubscribe_resource("memo://readme")
        touched = await client.call_tool("up_touch", {"uri": "memo://readme"})
        assert text(touched) == "nobody subscribed to memo://readme"


async def test_the_gateway_announces_list_changed(upstream_stdio: McpServerConfig) -> None:
    async with gateway(upstream_stdio) as client:
        caps = client.server_capabilities
        assert caps.tools is not None and caps.tools.list_changed
        assert caps.prompts is not None and caps.prompts.list_changed
        assert caps.resources is not None and caps.resources.list_changed


async def test_progress_and_logs_of_a_proxied_call_reach_its_client(
    upstream: McpServerConfig,
) -> None:
    progress: list[tuple[float, float | None, str | None]] = []
    logs: list[Any] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append((p, total, message))

    async def on_log(params: types.LoggingMessageNotificationParams) -> None:
        logs.append(params.data)

    async with gateway(upstream, logging_callback=on_log) as client:
        result = await client.call_tool("up_steps", {"n": 3}, progress_callback=on_progress)
        assert text(result) == "stepped 3"
    assert progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert logs == ["upstream step 1", "upstream step 2", "upstream step 3"]


async def test_elicitation_and_sampling_of_a_proxied_tool_are_asked_of_its_client(
    upstream: McpServerConfig,
) -> None:
    asked: list[str] = []
    sampled: list[str] = []

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"text": "blue"})

    async def sample(
        ctx: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        sampled.append(params.messages[0].content.text)  # type: ignore[union-attr]
        return types.CreateMessageResult(
            role="assistant",
            content=types.TextContent(type="text", text="forty-two"),
            model="test-model",
        )

    async with gateway(upstream, elicitation_callback=elicit, sampling_callback=sample) as client:
        answered = await client.call_tool("up_ask_user", {"question": "Favourite colour?"})
        assert text(answered) == "accept:blue"
        modelled = await client.call_tool("up_ask_model", {"prompt": "The answer?"})
        assert text(modelled) == "model said: forty-two"
    assert asked == ["Favourite colour?"]
    assert sampled == ["The answer?"]


async def test_the_upstreams_roots_request_is_asked_of_the_calling_client(
    upstream: McpServerConfig,
) -> None:
    async def roots(ctx: Any) -> types.ListRootsResult:
        return types.ListRootsResult(
            roots=[types.Root(uri="file:///srv/project"), types.Root(uri="file:///tmp/x")]
        )

    async with gateway(upstream, list_roots_callback=roots) as client:
        seen = await client.call_tool("up_roots_seen", {})
        assert text(seen) == "file:///srv/project,file:///tmp/x"
    async with gateway(upstream) as client:  # a client without roots: the upstream is refused
        assert (await client.call_tool("up_roots_seen", {})).is_error


async def test_sampling_with_tools_reaches_a_client_that_takes_them(
    upstream: McpServerConfig,
) -> None:
    offered: list[list[str]] = []

    async def sample(ctx: Any, params: types.CreateMessageRequestParams) -> Any:
        offered.append([t.name for t in params.tools or []])
        return types.CreateMessageResultWithTools(
            role="assistant",
            content=[
                types.ToolUseContent(type="tool_use", id="c1", name="lookup", input={"q": "x"})
            ],
            model="m",
            stop_reason="toolUse",
        )

    tools = types.SamplingCapability(tools=types.SamplingToolsCapability())
    async with gateway(upstream, sampling_callback=sample, sampling_capabilities=tools) as client:
        result = await client.call_tool("up_ask_model_with_tools", {"prompt": "find x"})
        assert text(result) == "toolUse: lookup({'q': 'x'})"
    assert offered == [["lookup"]]
    async with gateway(upstream, sampling_callback=sample) as client:  # no sampling.tools
        assert (await client.call_tool("up_ask_model_with_tools", {"prompt": "?"})).is_error
    assert len(offered) == 1


async def test_a_declined_elicitation_goes_back_declined(upstream_stdio: McpServerConfig) -> None:
    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with gateway(upstream_stdio, elicitation_callback=elicit) as client:
        result = await client.call_tool("up_ask_user", {"question": "?"})
        assert text(result) == "decline:"


async def test_a_client_without_elicitation_gets_an_error_result(
    upstream_stdio: McpServerConfig,
) -> None:
    async with gateway(upstream_stdio) as client:
        result = await client.call_tool("up_ask_user", {"question": "?"})
        assert result.is_error


async def test_a_cancelled_call_is_cancelled_upstream(
    upstream: McpServerConfig, marker_dir: Path
) -> None:
    async with gateway(upstream) as client:
        call = asyncio.create_task(client.call_tool("up_slow", {"seconds": 60, "tag": "gw"}))
        assert await asyncio.to_thread(file_appears, marker_dir / "started-gw")
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        assert await asyncio.to_thread(file_appears, marker_dir / "cancelled-gw")
        # the gateway goes on
        assert text(await client.call_tool("up_add", {"a": 1, "b": 1})) == "2"


async def test_an_upstream_that_dies_is_an_error_result_and_the_next_call_reconnects(
    upstream_stdio: McpServerConfig,
) -> None:
    async with gateway(upstream_stdio) as client:
        first = int(text(await client.call_tool("up_pid", {})))
        died = await client.call_tool("up_die", {})
        assert died.is_error
        assert "'up'" in text(died) and "die" in text(died)
        assert text(await client.call_tool("hello", {"name": "still"})) == "hi still"
        second = int(text(await client.call_tool("up_pid", {})))
        assert second != first


async def test_an_unreachable_upstream_leaves_the_rest_served(tmp_path: Path) -> None:
    missing = stdio_config(str(tmp_path / "no_such_server.py"), name="gone", connect_timeout=10)
    async with gateway(missing) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert names == {"hello"}
        assert text(await client.call_tool("hello", {"name": "x"})) == "hi x"


def test_proxy_specs() -> None:
    url = proxy_from_spec("https://tools.example.com/mcp")
    assert url.config.client_type == "streamable-http" and url.prefix == "tools_example_com_"
    assert proxy_from_spec("http://h:1/sse").config.client_type == "sse"
    script = proxy_from_spec("python servers/my_server.py --flag")
    assert script.config.client_type == "stdio" and script.prefix == "my_server_"
    assert script.config.params == {
        "command": "python",
        "args": ["servers/my_server.py", "--flag"],
    }
    named = proxy_from_spec("fs=npx -y @modelcontextprotocol/server-filesystem /tmp")
    assert named.prefix == "fs_" and named.config.params["command"] == "npx"


# over HTTP, toolweave's client, the gateway in a subprocess ---------------------------------
def fingerprint(header: str) -> str:
    return hashlib.sha256(header.encode()).hexdigest()[:16]


@pytest.fixture
def gateway_http(upstream_http: ServerProcess) -> Iterator[ServerProcess]:
    server = start_server([GATEWAY, f"http://127.0.0.1:{upstream_http.port}/mcp"])
    try:
        yield server
    finally:
        server.stop()


async def test_the_clients_token_never_reaches_the_upstream(
    gateway_http: ServerProcess,
) -> None:
    client_token = "Bearer the-clients-own-secret"
    config = McpServerConfig(
        server_name="gw",
        params={"url": f"http://127.0.0.1:{gateway_http.port}/mcp"},
        auth_headers={"Authorization": client_token},
    )
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as client:
        seen = text(await client.call_tool("up_auth_seen", {}))
    assert seen == fingerprint("Bearer gateway-own-token")
    assert seen != fingerprint(client_token)


class HeaderAuth(httpx2.Auth):
    """An httpx auth flow of the gateway's own (as an OAuth provider would add its token)."""

    def __init__(self, header: str) -> None:
        self.header = header

    def auth_flow(self, request: httpx2.Request) -> Iterator[httpx2.Request]:
        request.headers["Authorization"] = self.header
        yield request


async def test_an_upstream_reached_with_an_auth_flow_of_the_gateways_own(
    upstream_http: ServerProcess,
) -> None:
    proxy = McpProxy(http_config(upstream_http), auth=HeaderAuth("Bearer from-the-auth-flow"))

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"text": "red"})

    async with gateway(proxy, elicitation_callback=elicit) as client:
        seen = text(await client.call_tool("up_auth_seen", {}))
        assert seen == fingerprint("Bearer from-the-auth-flow")
        asked = await client.call_tool("up_ask_user", {"question": "?"})
        assert text(asked) == "accept:red"


@pytest.fixture
def authed_gateway(upstream_http: ServerProcess) -> Iterator[ServerProcess]:
    server = start_server([GATEWAY, f"http://127.0.0.1:{upstream_http.port}/mcp", "auth"])
    try:
        yield server
    finally:
        server.stop()


async def test_behind_auth_the_verified_clients_token_never_reaches_the_upstream(
    authed_gateway: ServerProcess,
) -> None:
    import jwt

    from servers.mcp_gateway_server import CLIENT_KEY, ISSUER

    url = f"http://127.0.0.1:{authed_gateway.port}/mcp"
    claims = {"iss": ISSUER, "aud": url, "sub": "alice", "exp": time.time() + 600}
    client_token = f"Bearer {jwt.encode(claims, CLIENT_KEY, algorithm='HS256')}"
    anonymous = McpServerConfig(server_name="gw", params={"url": url}, connect_timeout=20)
    with pytest.raises(McpAuthError):
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(anonymous) as client:
            await client.list_tools()
    config = anonymous.model_copy(update={"auth_headers": {"Authorization": client_token}})
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as client:
        assert text(await client.call_tool("hello", {"name": "alice"})) == "hi alice"
        seen = text(await client.call_tool("up_auth_seen", {}))
    assert seen == fingerprint("Bearer gateway-own-token")
    assert seen != fingerprint(client_token)


async def test_toolweave_client_through_an_http_gateway(gateway_http: ServerProcess) -> None:
    changed = asyncio.Event()
    asked: list[ElicitationRequest] = []

    async def elicit(request: ElicitationRequest) -> ElicitationResult:
        asked.append(request)
        return ElicitationResult(action="accept", content={"text": "green"})

    logs: list[Any] = []
    progress: list[float] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    config = McpServerConfig(
        server_name="gw", params={"url": f"http://127.0.0.1:{gateway_http.port}/mcp"}
    )
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(
            config,
            elicitation=elicit,
            on_tools_changed=changed.set,
            on_log=lambda server, params: logs.append(params.data),
        ) as client,
    ):
        stepped = await client.call_tool("up_steps", {"n": 2}, progress=on_progress)
        assert text(stepped) == "stepped 2"
        # both reached the client before the result ended the request's stream
        assert progress == [1, 2]
        assert logs == ["upstream step 1", "upstream step 2"]
        tools = {t.name: t for t in await client.list_tools()}
        assert {"hello", "up_add", "up_grow"} <= set(tools)
        assert str(await tools["up_add"].ainvoke({"a": 20, "b": 22})) == "42"
        assert text(await client.call_tool("up_ask_user", {"question": "Colour?"})) == (
            "accept:green"
        )
        assert [r.message for r in asked] == ["Colour?"]
        await client.call_tool("up_grow", {"name": "later"})
        await changed.wait()
        assert "up_later" in {t.name for t in await client.list_tools()}


@pytest.fixture
def cli_gateway(upstream_http: ServerProcess) -> Iterator[int]:
    """`toolweave mcp serve --proxy` (two upstreams: one named, one not) on a free port."""
    port = free_port()
    toolweave = Path(sys.executable).parent / "toolweave"
    argv = [str(toolweave), "mcp", "serve", "--transport", "http", "--port", str(port)]
    argv += ["--proxy", f"calc=http://127.0.0.1:{upstream_http.port}/mcp"]
    argv += ["--proxy", f"{sys.executable} {UPSTREAM}"]
    proc = subprocess.Popen(
        argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ}
    )
    try:
        wait_for_port(port, proc)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


async def test_cli_serves_proxied_servers(cli_gateway: int) -> None:
    config = McpServerConfig(
        server_name="gw", params={"url": f"http://127.0.0.1:{cli_gateway}/mcp"}
    )
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as client:
        names = {t.name for t in await client.list_tools()}
        assert {"calc_add", "mcp_gateway_upstream_add"} <= names
        assert text(await client.call_tool("calc_add", {"a": 1, "b": 2})) == "3"
        result = await client.call_tool("mcp_gateway_upstream_add", {"a": 2, "b": 2})
        assert text(result) == "4"


async def test_two_clients_elicitations_each_reach_their_own_client(
    upstream_http: ServerProcess,
) -> None:
    """Concurrent calls over one HTTP upstream: each upstream request goes to the client
    whose call it belongs to (matched by the request it came with), never to the other."""
    server = build_mcp_server([], proxy=[http_config(upstream_http)])
    both_asked = asyncio.Barrier(2)

    def answering(who: str) -> Any:
        async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
            await both_asked.wait()  # both calls are in flight upstream at once
            return types.ElicitResult(action="accept", content={"text": f"{who}:{params.message}"})

        return elicit

    async with (
        asyncio.timeout(TEST_TIMEOUT),
        Client(server, mode="legacy", elicitation_callback=answering("ann")) as ann,
        Client(server, mode="legacy", elicitation_callback=answering("bob")) as bob,
    ):
        got = await asyncio.gather(
            ann.call_tool("up_ask_user", {"question": "q-ann"}),
            bob.call_tool("up_ask_user", {"question": "q-bob"}),
        )
    assert [text(r) for r in got] == ["accept:ann:q-ann", "accept:bob:q-bob"]


def everything_config() -> McpServerConfig:
    from npm_support import EVERYTHING, npm_install

    script = npm_install(EVERYTHING) / "@modelcontextprotocol/server-everything/dist/index.js"
    return McpServerConfig(
        server_name="everything",
        params={"command": "node", "args": [str(script), "stdio"]},
        connect_timeout=60,
    )


async def test_the_reference_everything_server_through_the_gateway() -> None:
    """Real software upstream: npm's server-everything (stdio), its progress, sampling and
    elicitation forwarded to the SDK's client of the gateway."""
    config = everything_config()
    progress: list[float] = []
    sampled: list[str] = []
    asked: list[str] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append(p)

    async def sample(
        ctx: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult:
        sampled.append(params.messages[0].content.text)  # type: ignore[union-attr]
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="sampled!"), model="m"
        )

    async def elicit(ctx: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    async with gateway(config, sampling_callback=sample, elicitation_callback=elicit) as client:
        names = {t.name for t in (await client.list_tools()).tools}
        assert {"everything_echo", "everything_trigger-sampling-request"} <= names
        assert text(await client.call_tool("everything_echo", {"message": "hi"})) == "Echo: hi"

        ran = await client.call_tool(
            "everything_trigger-long-running-operation",
            {"duration": 0.3, "steps": 3},
            progress_callback=on_progress,
        )
        assert not ran.is_error and progress == [1, 2, 3]
        answered = await client.call_tool("everything_trigger-sampling-request", {"prompt": "hey"})
        assert "sampled!" in text(answered) and sampled and "hey" in sampled[0]
        declined = await client.call_tool("everything_trigger-elicitation-request", {})
        assert "declined" in text(declined) and len(asked) == 1

        uri = "demo://resource/dynamic/text/1"  # from one of its templates
        read = await client.read_resource(uri)
        assert str(read.contents[0].uri) == uri
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert "everything_simple-prompt" in prompts
        got = await client.get_prompt("everything_simple-prompt", {})
        assert got.messages


async def test_a_2026_client_hears_of_changes_on_its_listen_stream(
    upstream_stdio: McpServerConfig,
) -> None:
    server = build_mcp_server([hello], proxy=[upstream_stdio])
    async with asyncio.timeout(TEST_TIMEOUT), Client(server, mode="2026-07-28") as client:
        before = {t.name for t in (await client.list_tools()).tools}
        async with client.listen(tools_list_changed=True) as events:
            assert text(await client.call_tool("up_grow", {"name": "modern"})) == "grew modern"
            event = await events.__anext__()
        assert isinstance(event, ToolsListChanged)
        after = {t.name for t in (await client.list_tools()).tools}
        assert after == before | {"up_modern"}


@pytest.fixture
def sse_gateway() -> Iterator[int]:
    """`toolweave mcp serve --transport sse --proxy up=...` (stdio upstream) on a free port."""
    port = free_port()
    toolweave = Path(sys.executable).parent / "toolweave"
    argv = [str(toolweave), "mcp", "serve", "--transport", "sse", "--port", str(port)]
    argv += ["--proxy", f"up={sys.executable} {UPSTREAM}"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port, proc)
        yield port
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


async def test_over_sse_a_later_connection_gets_the_upstreams_again(sse_gateway: int) -> None:
    """Each SSE connection is a server run of its own: the upstreams start with the first
    and stop with the last, and a later connection starts them again."""
    config = McpServerConfig(
        server_name="gw",
        client_type="sse",
        params={"url": f"http://127.0.0.1:{sse_gateway}/sse"},
    )
    for _ in range(2):
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as client:
            assert text(await client.call_tool("up_add", {"a": 1, "b": 1})) == "2"
