"""Server middleware (`serve_mcp(middleware=...)`, `toolweave.mcp.middleware`): the chain
around every request kind and the built-ins (logging and timing, rate limits, caching of
idempotent tools, error masking), seen by the SDK's client in process; caching also through
the gateway in front of a real upstream server (stdio)."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import (
    SERVERS,
    TEST_TIMEOUT,
    ServerProcess,
    free_port,
    start_server,
    wait_for_port,
)

from toolweave import tool
from toolweave.errors import McpError
from toolweave.mcp import (
    McpClient,
    McpServerConfig,
    build_mcp_server,
    completion,
    prompt,
    resource,
)
from toolweave.mcp.middleware import (
    RATE_LIMITED,
    CachingMiddleware,
    ErrorMaskingMiddleware,
    LoggingMiddleware,
    McpRequest,
    RateLimitMiddleware,
)

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

CALLS: dict[str, int] = {}


@tool(idempotent=True)
def lookup(key: str) -> str:
    """Look a key up (idempotent)."""
    CALLS[key] = CALLS.get(key, 0) + 1
    return f"value of {key}"


@tool
def bump(key: str) -> str:
    """Count a call (not idempotent)."""
    CALLS[key] = CALLS.get(key, 0) + 1
    return f"bumped {key}"


@tool(idempotent=True)
def broken(password: str) -> str:
    """Fails with an internal detail."""
    raise RuntimeError(f"database refused password {password}")


@resource("memo://one", mime_type="text/plain")
def one() -> str:
    """A memo."""
    return "memo one"


@resource("memo://{name}")
def memo(name: str) -> str:
    return f"memo {name}"


@prompt
def greet(who: str) -> str:
    """Greet someone."""
    return f"Hello {who}"


@completion("greet", "who")
def people(value: str) -> list[str]:
    return [p for p in ("ann", "bob") if p.startswith(value)]


TOOLS = [lookup, bump, broken]
FEATURES = [one, memo, greet, people]


@pytest.fixture(autouse=True)
def _fresh_counts() -> None:
    CALLS.clear()


def text(result: types.CallToolResult) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


def served(*middleware: Any, proxy: Any = ()) -> Any:
    return build_mcp_server(TOOLS, features=FEATURES, middleware=middleware, proxy=proxy)


class Recorder:
    def __init__(self, tag: str, seen: list[str]) -> None:
        self.tag, self.seen = tag, seen

    async def __call__(self, request: McpRequest, call_next: Any) -> Any:
        self.seen.append(f"{self.tag}> {request.method} {request.name}")
        result = await call_next(request)
        self.seen.append(f"<{self.tag}")
        return result


async def test_the_chain_wraps_every_request_kind_first_one_outermost() -> None:
    seen: list[str] = []
    server = served(Recorder("a", seen), Recorder("b", seen))
    async with asyncio.timeout(TEST_TIMEOUT), Client(server, mode="legacy") as client:
        await client.list_tools()
        await client.call_tool("lookup", {"key": "k"})
        await client.list_resources()
        await client.list_resource_templates()
        await client.read_resource("memo://one")
        await client.list_prompts()
        await client.get_prompt("greet", {"who": "ann"})
        done = await client.complete(
            types.PromptReference(type="ref/prompt", name="greet"),
            {"name": "who", "value": "a"},
        )
        assert done.completion.values == ["ann"]
    outer = [s for s in seen if s.startswith("a>")]
    assert outer == [
        "a> tools/list None",
        "a> tools/call lookup",
        "a> resources/list None",
        "a> resources/templates/list None",
        "a> resources/read memo://one",
        "a> prompts/list None",
        "a> prompts/get greet",
        "a> completion/complete greet",
    ]
    assert seen[:4] == ["a> tools/list None", "b> tools/list None", "<b", "<a"]


async def test_a_middleware_can_rewrite_a_request_and_answer_one_itself() -> None:
    async def rewrite(request: McpRequest, call_next: Any) -> Any:
        if request.name == "lookup":
            params = request.params.model_copy(update={"arguments": {"key": "rewritten"}})
            return await call_next(dataclasses.replace(request, params=params))
        if request.name == "bump":
            return types.CallToolResult(content=[types.TextContent(type="text", text="no")])
        return await call_next(request)

    async with asyncio.timeout(TEST_TIMEOUT), Client(served(rewrite), mode="legacy") as client:
        assert text(await client.call_tool("lookup", {"key": "asked"})) == "value of rewritten"
        assert text(await client.call_tool("bump", {"key": "b"})) == "no"
    assert CALLS == {"rewritten": 1}  # bump never ran


async def test_logging_middleware_logs_each_request_with_its_outcome_never_arguments(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="toolweave.mcp.middleware")
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        Client(served(LoggingMiddleware()), mode="legacy") as client,
    ):
        await client.call_tool("lookup", {"key": "the-secret-key"})
        await client.call_tool("broken", {"password": "hunter2"})
        with pytest.raises(MCPError):
            await client.call_tool("nope", {})
    lines = [r.getMessage() for r in caplog.records if r.name == "toolweave.mcp.middleware"]
    calls = [line for line in lines if line.startswith("tools/call")]
    assert len(calls) == 3
    assert calls[0].startswith("tools/call 'lookup' client=connection:") and calls[0].endswith(
        " ms ok"
    )
    assert calls[1].startswith("tools/call 'broken'") and calls[1].endswith("tool error")
    assert calls[2].endswith("JSON-RPC error -32602")
    assert not any("the-secret-key" in line or "hunter2" in line for line in lines)


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


async def test_rate_limit_refuses_a_client_over_its_rate_and_not_the_others() -> None:
    clock = Clock()
    limit = RateLimitMiddleware(2, per=60, clock=clock)
    server = served(limit)
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        Client(server, mode="legacy") as ann,
        Client(server, mode="legacy") as bob,
    ):
        for _ in range(2):
            await ann.call_tool("bump", {"key": "ann"})
        with pytest.raises(MCPError) as refused:
            await ann.call_tool("bump", {"key": "ann"})
        assert refused.value.code == RATE_LIMITED
        assert refused.value.error.data == {"retryAfterSeconds": 30.0}
        await ann.list_tools()  # listings are not counted
        await bob.call_tool("bump", {"key": "bob"})  # another client has its own bucket
        clock.now += 30  # one request's worth refilled
        await ann.call_tool("bump", {"key": "ann"})
        with pytest.raises(MCPError):
            await ann.call_tool("bump", {"key": "ann"})
    assert CALLS == {"ann": 3, "bob": 1}  # the refused calls never ran


async def test_rate_limit_by_a_key_of_your_own() -> None:
    def by_tool(request: McpRequest) -> str | None:
        return request.name if request.name == "bump" else None  # only bump is limited

    limit = RateLimitMiddleware(1, per=3600, by=by_tool)
    async with asyncio.timeout(TEST_TIMEOUT), Client(served(limit), mode="legacy") as client:
        await client.call_tool("bump", {"key": "x"})
        with pytest.raises(MCPError):
            await client.call_tool("bump", {"key": "x"})
        for _ in range(3):
            await client.call_tool("lookup", {"key": "y"})


async def test_caching_answers_repeated_idempotent_calls_per_client() -> None:
    clock = Clock()
    cache = CachingMiddleware(ttl=60, clock=clock)
    server = served(cache)
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        Client(server, mode="legacy") as ann,
        Client(server, mode="legacy") as bob,
    ):
        for _ in range(3):
            assert text(await ann.call_tool("lookup", {"key": "k"})) == "value of k"
        assert CALLS == {"k": 1}
        await ann.call_tool("lookup", {"key": "other"})
        await bob.call_tool("lookup", {"key": "k"})  # not shared: bob's own miss
        assert CALLS == {"k": 2, "other": 1}
        await ann.call_tool("bump", {"key": "b"})
        await ann.call_tool("bump", {"key": "b"})  # not idempotent: runs every time
        assert CALLS["b"] == 2
        for _ in range(2):
            assert (await ann.call_tool("broken", {"password": "p"})).is_error
        clock.now += 61  # expired
        await ann.call_tool("lookup", {"key": "k"})
        assert CALLS["k"] == 3
    assert cache.hits == 2


async def test_a_shared_cache_serves_every_client() -> None:
    cache = CachingMiddleware(shared=True)
    server = served(cache)
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        Client(server, mode="legacy") as ann,
        Client(server, mode="legacy") as bob,
    ):
        await ann.call_tool("lookup", {"key": "k"})
        assert text(await bob.call_tool("lookup", {"key": "k"})) == "value of k"
    assert CALLS == {"k": 1} and cache.hits == 1


async def test_caching_an_upstreams_idempotent_tool_through_the_gateway(
    demo_config: McpServerConfig,
) -> None:
    cache = CachingMiddleware()
    server = served(cache, proxy=[demo_config])
    async with asyncio.timeout(TEST_TIMEOUT), Client(server, mode="legacy") as client:
        first = await client.call_tool("demo_add", {"a": 1, "b": 2})
        again = await client.call_tool("demo_add", {"a": 1, "b": 2})
        assert text(first) == text(again) == "3"
        assert cache.hits == 1  # the demo server annotates add idempotentHint
        await client.call_tool("demo_greet", {"name": "x"})
        await client.call_tool("demo_greet", {"name": "x"})
    assert cache.hits == 1 and cache.misses == 1  # greet is not idempotent: not looked up


async def test_error_masking_keeps_internal_text_in_the_log(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def explode(request: McpRequest, call_next: Any) -> Any:
        if request.method == "resources/read":
            raise RuntimeError("connection string postgres://admin:hunter2@db")
        return await call_next(request)

    caplog.set_level(logging.WARNING, logger="toolweave.mcp.middleware")
    server = served(ErrorMaskingMiddleware(), explode)
    async with asyncio.timeout(TEST_TIMEOUT), Client(server, mode="legacy") as client:
        result = await client.call_tool("broken", {"password": "hunter2"})
        assert result.is_error
        assert "hunter2" not in text(result) and "error reference" in text(result)
        with pytest.raises(MCPError) as failed:
            await client.read_resource("memo://one")
        assert failed.value.code == types.INTERNAL_ERROR
        assert "hunter2" not in failed.value.message
        with pytest.raises(MCPError) as unknown:  # errors raised on purpose pass
            await client.call_tool("nope", {})
        assert "Unknown tool" in unknown.value.message
        assert text(await client.call_tool("lookup", {"key": "k"})) == "value of k"
    logged = " ".join(r.getMessage() for r in caplog.records)
    ref = text(result).split("error reference ")[1].rstrip(").")
    assert f"reference {ref}" in logged and "database refused password hunter2" in logged
    assert "postgres://admin:hunter2@db" in logged


async def test_error_masking_can_leave_tool_errors_alone() -> None:
    server = served(ErrorMaskingMiddleware(tool_errors=False))
    async with asyncio.timeout(TEST_TIMEOUT), Client(server, mode="legacy") as client:
        result = await client.call_tool("broken", {"password": "pw"})
    assert result.is_error and "database refused password pw" in text(result)


@pytest.fixture
def limited_server() -> Iterator[ServerProcess]:
    """A served `hello` behind JWT auth, each token allowed two tool calls."""
    server = start_server([str(SERVERS / "mcp_gateway_server.py"), "none", "auth", "limit"])
    try:
        yield server
    finally:
        server.stop()


async def test_a_rate_limit_per_token_holds_across_sessions(limited_server: ServerProcess) -> None:
    import jwt

    from servers.mcp_gateway_server import CLIENT_KEY, ISSUER

    url = f"http://127.0.0.1:{limited_server.port}/mcp"

    def as_user(subject: str) -> McpServerConfig:
        claims = {"iss": ISSUER, "aud": url, "sub": subject, "exp": time.time() + 600}
        token = jwt.encode(claims, CLIENT_KEY, algorithm="HS256")
        return McpServerConfig(
            server_name="limited",
            params={"url": url},
            auth_headers={"Authorization": f"Bearer {token}"},
        )

    async with asyncio.timeout(TEST_TIMEOUT):
        async with McpClient(as_user("alice")) as alice:
            for _ in range(2):
                assert text(await alice.call_tool("hello", {"name": "a"})) == "hi a"
        async with McpClient(as_user("alice")) as again:  # a new session, the same token
            with pytest.raises(McpError, match=f"JSON-RPC error {RATE_LIMITED}.*Rate limit"):
                await again.call_tool("hello", {"name": "a"})
        async with McpClient(as_user("bob")) as bob:
            assert text(await bob.call_tool("hello", {"name": "b"})) == "hi b"


COUNTER = '''
import itertools

from toolweave import tool

_seen = itertools.count(1)


@tool(idempotent=True)
def counter(key: str) -> str:
    """How many times this server ran a call."""
    return f"{key} run {next(_seen)}"
'''


@pytest.fixture
def cli_server(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """`toolweave mcp serve` with --log-requests --rate-limit 2/h --cache-ttl 600 (its
    stderr in a file)."""
    (tmp_path / "counter.py").write_text(COUNTER)
    port = free_port()
    toolweave = Path(sys.executable).parent / "toolweave"
    argv = [str(toolweave), "mcp", "serve", str(tmp_path / "counter.py")]
    argv += ["--transport", "http", "--port", str(port)]
    argv += ["--log-requests", "--rate-limit", "2/h", "--cache-ttl", "600"]
    log_file = tmp_path / "stderr.txt"
    with log_file.open("wb") as err:
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=err, cwd=tmp_path)
    try:
        wait_for_port(port, proc)
        yield port, log_file
    finally:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(15)


async def test_the_cli_builds_the_chain_from_its_options(cli_server: tuple[int, Path]) -> None:
    port, log_file = cli_server
    config = McpServerConfig(server_name="cli", params={"url": f"http://127.0.0.1:{port}/mcp"})
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as client:
        assert text(await client.call_tool("counter", {"key": "a"})) == "a run 1"
        assert text(await client.call_tool("counter", {"key": "a"})) == "a run 1"  # cached
        with pytest.raises(McpError, match="Rate limit exceeded"):
            await client.call_tool("counter", {"key": "b"})
    logged = log_file.read_text()
    # sessionless 2026-07-28 requests count by the client's address
    assert "tools/call 'counter' client=address:127.0.0.1" in logged
    assert f"JSON-RPC error {RATE_LIMITED}" in logged
