"""Guarantee 6 for MCP: the credentials a client sends never reach error texts, reprs, the
`__cause__` chain, log records or spans, whatever a server echoes back — against a real
loopback server that prints them raw, JSON-escaped and percent-encoded into its 401
challenge (streamable HTTP and SSE), an SSE 500 reason phrase, a JSON-RPC error message, an
``isError`` tool result (which is for the model) and a server log notification."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any
from urllib.parse import quote

import httpx2
import pytest
from mcp_support import TEST_TIMEOUT

from reliability.invariants import SecretScan, tracing
from servers.mcp_credential_echo_server import EchoingServer
from toolweave import AiMessage, McpError, ToolExecutionRequest, ToolService
from toolweave.callbacks import CallbackFramework
from toolweave.callbacks.events import ToolCallEvents as E
from toolweave.callbacks.otel import set_content_capture
from toolweave.chat.scripted import ScriptedChatModel
from toolweave.mcp import McpAuthError, McpClient, McpServerConfig, SyncMcpClient

TOKEN = "aB3/dE6+fG9=="
"""A bearer token whose JSON and percent-encoded forms differ from it (`/`, `+`, `=`)."""
KEY = 'Zq9"x/7\\Lm4wQ'
"""An `X-API-Key` that looks like no known credential pattern (`"`, `/`, `\\`)."""
FORMS = (
    TOKEN,
    KEY,
    quote(TOKEN, safe=""),
    quote(KEY, safe=""),
    json.dumps(KEY)[1:-1],
    json.dumps(TOKEN)[1:-1].replace("/", "\\/"),
    repr(KEY)[1:-1],
)


def config(url: str, client_type: str = "streamable-http") -> McpServerConfig:
    return McpServerConfig(
        server_name="echoing",
        client_type=client_type,  # type: ignore[arg-type]
        params={"url": url},
        auth_headers={"Authorization": f"Bearer {TOKEN}", "X-API-Key": KEY},
        connect_timeout=20,
    )


def scan(caplog: pytest.LogCaptureFixture, *errors: BaseException) -> SecretScan:
    found = SecretScan(FORMS)
    for error in errors:
        found.add_error(error)
    found.add_records(caplog.records)
    found.add("caplog text", caplog.text)
    return found


@pytest.mark.parametrize(
    ("mode", "client_type", "path"),
    [("challenge", "streamable-http", "/mcp"), ("sse-challenge", "sse", "/sse")],
)
async def test_credentials_echoed_in_the_auth_challenge_are_masked(
    caplog: pytest.LogCaptureFixture, mode: str, client_type: str, path: str
) -> None:
    caplog.set_level(logging.DEBUG)
    with EchoingServer(mode) as url:
        async with asyncio.timeout(TEST_TIMEOUT):
            with pytest.raises(McpAuthError) as info:
                async with McpClient(config(url + path, client_type)):
                    pass
    error = info.value
    assert error.status == 401
    assert 'error="invalid_token"' in error.message  # the challenge is still shown
    assert "***" in error.message and "***" in error.details["www_authenticate"]
    assert any("connect attempt 1 failed" in r.getMessage() for r in caplog.records)
    assert scan(caplog, error).check() > 0


async def test_credentials_in_an_sse_reason_phrase_are_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    with EchoingServer("sse-500") as url:
        async with asyncio.timeout(TEST_TIMEOUT):
            with pytest.raises(McpError) as info:
                async with McpClient(config(url + "/sse", "sse")):
                    pass
    assert "500 Oops ***" in info.value.message
    assert any(r.name == "httpx2" for r in caplog.records)  # its INFO line, masked too
    assert scan(caplog, info.value).check() > 0


async def test_credentials_echoed_in_a_json_rpc_error_and_logs_are_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    errors: list[BaseException] = []
    with EchoingServer("echo") as url:
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(url + "/mcp")) as client:
            tools = {t.name: t for t in await client.list_tools()}
            with pytest.raises(McpError) as info:
                await client.call_tool("fail", {})
            errors.append(info.value)
            assert "bad credentials: ***" in info.value.message
            with pytest.raises(McpError) as info:
                await tools["fail"].ainvoke({})
            errors.append(info.value)
            # an isError result, the server's log notification with it
            with pytest.raises(McpError) as info:
                await tools["error_result"].ainvoke({})
            errors.append(info.value)
            assert info.value.message.startswith("refused: ***")
    assert any(r.name == "toolweave.mcp.server_log" for r in caplog.records)
    assert scan(caplog, *errors).check() > 0


def test_the_sync_face_masks_too(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with EchoingServer("echo") as url, SyncMcpClient(config(url + "/mcp")) as client:
        tools = {t.name: t for t in client.list_tools()}
        with pytest.raises(McpError) as failed:
            client.call_tool("fail", {})
        with pytest.raises(McpError) as refused:
            tools["error_result"].invoke({})
    assert scan(caplog, failed.value, refused.value).check() > 0


async def test_an_echoing_error_result_reaches_the_model_and_spans_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    calls = (ToolExecutionRequest(id="c1", name="error_result", arguments="{}"),)
    model = ScriptedChatModel([AiMessage(tool_execution_requests=calls), AiMessage("ok")])
    set_content_capture(True)
    try:
        with tracing() as spans, EchoingServer("echo") as url:
            async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(url + "/mcp")) as client:
                result = (
                    await ToolService().tools(await client.list_tools()).achat(model, None, "go")
                )
    finally:
        set_content_capture(None)
    answer: Any = result.messages[2]
    assert answer.is_error and "refused: ***" in answer.text
    found = scan(caplog)
    found.add_messages(result.messages)
    found.add_messages(model.requests[1].messages)  # what the model was sent
    found.add_spans(spans)
    assert spans.get_finished_spans()
    assert found.check() > 0


async def test_a_successful_result_echoing_the_credentials_reaches_the_model_masked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An echo tool's answer (text, a part for the user, structured content with the
    credentials as a value and as a key) is masked as an error result is."""
    caplog.set_level(logging.DEBUG)
    calls = (ToolExecutionRequest(id="c1", name="echo", arguments="{}"),)
    model = ScriptedChatModel([AiMessage(tool_execution_requests=calls), AiMessage("ok")])
    set_content_capture(True)
    try:
        with tracing() as spans, EchoingServer("echo") as url:
            async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(url + "/mcp")) as client:
                service = ToolService().tools(await client.list_tools())
                result = await service.achat(model, None, "go")
                direct = await client.list_tools()
                value = await direct[[t.card.name for t in direct].index("echo")].ainvoke({})
    finally:
        set_content_capture(None)
    answer: Any = result.messages[2]
    assert not answer.is_error and "you sent ***" in answer.text
    assert "***" in repr(value)
    found = scan(caplog)
    found.add_messages(result.messages)
    found.add_messages(model.requests[1].messages)
    found.add_spans(spans)
    found.add("value", repr(value))
    found.add("execution", repr(result.tool_executions[0].result))
    assert found.check() > 0


class RotatingAuth(httpx2.Auth):
    """Adds a token the configuration never saw, and holds it where the SDK's OAuth
    provider does (``context.current_tokens``)."""

    token = "oauth-acc/ess+9"

    def __init__(self) -> None:
        tokens = SimpleNamespace(access_token=self.token, refresh_token="rEfr3sh/99")
        self.context = SimpleNamespace(current_tokens=tokens, client_info=None)

    def auth_flow(self, request: httpx2.Request) -> Iterator[httpx2.Request]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


async def test_tokens_an_auth_provider_sends_are_masked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    with EchoingServer("echo") as url:
        cfg = McpServerConfig(server_name="oauth", params={"url": url + "/mcp"})
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg, auth=RotatingAuth()) as client:
            with pytest.raises(McpError) as info:
                await client.call_tool("fail", {})
    assert "bad credentials: ***" in info.value.message
    found = SecretScan((RotatingAuth.token, quote(RotatingAuth.token, safe="")))
    found.add_error(info.value)
    found.add_records(caplog.records)
    assert found.check() > 0


async def test_credentials_tool_auth_adds_are_masked(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    fw = CallbackFramework()
    fresh = "r0tated/Key+42"

    @fw.on(E.TOOL_AUTH)
    def rotate(**kwargs: Any) -> dict[str, Any]:
        return {"headers": {"X-API-Key": fresh}}

    with EchoingServer("echo") as url:
        cfg = McpServerConfig(server_name="rotating", params={"url": url + "/mcp"})
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg, callbacks=fw) as client:
            with pytest.raises(McpError) as info:
                await client.call_tool("fail", {})
    assert info.value.message.count("***") >= 3
    found = SecretScan((fresh, quote(fresh, safe=""), json.dumps(fresh)[1:-1]))
    found.add_error(info.value)
    found.add_records(caplog.records)
    assert found.check() > 0
