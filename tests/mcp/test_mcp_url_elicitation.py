"""A tool call the server answers with JSON-RPC -32042 (URL elicitation required, MCP
2025-11-25): the client's elicitation hook is asked, in URL mode, for each URL the error
lists; when all are accepted the call is sent once more, otherwise the model gets an error
result holding the URLs and the server's messages. A hand-written server in a real
subprocess (tests/servers/mcp_raw_stdio_server.py)."""

from __future__ import annotations

import asyncio

import pytest
from mcp_support import SERVERS, TEST_TIMEOUT, stdio_config

from toolweave.context import ElicitationResult
from toolweave.errors import McpError
from toolweave.execution.executor import DefaultToolExecutor
from toolweave.execution.requests import ToolExecutionRequest
from toolweave.mcp import McpClient
from toolweave.mcp.hooks import ElicitationRequest

RAW = str(SERVERS / "mcp_raw_stdio_server.py")
URL = "https://auth.example.com/connect?elicitation=e1"


def answering(action: str, asked: list[ElicitationRequest]):  # type: ignore[no-untyped-def]
    async def hook(request: ElicitationRequest) -> ElicitationResult:
        asked.append(request)
        return ElicitationResult(action)

    return hook


async def test_url_elicitation_required_asks_the_hook_then_retries_once() -> None:
    asked: list[ElicitationRequest] = []
    config = stdio_config(RAW, name="raw", call_timeout=30)
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(config, elicitation=answering("accept", asked)) as client,
    ):
        tools = {t.card.name: t for t in await client.list_tools()}
        assert await tools["connect"].ainvoke({}) == "connected after 1 refusal"
    assert asked == [
        ElicitationRequest(
            server_name="raw",
            message="Sign in (1)",
            mode="url",
            url=URL,
            elicitation_id="e1",
        )
    ]


async def test_url_elicitation_required_without_a_hook_gives_the_model_the_url() -> None:
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(stdio_config(RAW, name="raw", call_timeout=30)) as client,
    ):
        tools = {t.card.name: t for t in await client.list_tools()}
        result = await DefaultToolExecutor(tools["connect"]).aexecute_with_result(
            ToolExecutionRequest(name="connect", arguments="{}")
        )
    assert result.is_error
    text = result.result_text()  # what the model reads
    assert URL in text and "Sign in (1)" in text
    assert "This request requires more information." in text
    assert "no elicitation hook" in text and "did not run" in text


@pytest.mark.parametrize(("action", "said"), [("decline", "declined"), ("cancel", "cancelled")])
async def test_a_declined_url_elicitation_is_an_error_result_with_the_url(
    action: str, said: str
) -> None:
    asked: list[ElicitationRequest] = []
    config = stdio_config(RAW, name="raw", call_timeout=30)
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(config, elicitation=answering(action, asked)) as client,
    ):
        tools = {t.card.name: t for t in await client.list_tools()}
        with pytest.raises(McpError) as caught:
            await tools["connect"].ainvoke({})
    assert URL in caught.value.message
    assert f"the user {said} it" in caught.value.message
    assert len(asked) == 1


async def test_url_elicitation_is_retried_only_once_and_malformed_entries_are_skipped() -> None:
    """The server asks again after the user accepted: no second round of questions; of its
    four entries the two well-formed ones are asked about, and a line break in a URL reaches
    the model as a space."""
    asked: list[ElicitationRequest] = []
    config = stdio_config(RAW, name="raw", call_timeout=30)
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(config, elicitation=answering("accept", asked)) as client,
    ):
        result = await client.call_tool("always_url", {})
    assert [(r.elicitation_id, r.mode) for r in asked] == [("e1", "url"), ("e2", "url")]
    assert result.is_error
    text = result.content[0].text  # type: ignore[union-attr]
    assert "still asks for it after the user accepted" in text
    assert URL in text and "https://pay.example.com/ line" in text


async def test_a_url_elicitation_hook_that_fails_or_never_answers_is_an_error_result() -> None:
    async def broken(request: ElicitationRequest) -> ElicitationResult:
        raise RuntimeError("token sk-secret leaked")

    async def silent(request: ElicitationRequest) -> ElicitationResult:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    config = stdio_config(RAW, name="raw", call_timeout=30)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config, elicitation=broken) as client:
        result = await client.call_tool("connect", {})
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error and "the elicitation hook failed" in text and "sk-secret" not in text
    assert URL in text

    config = stdio_config(RAW, name="raw", call_timeout=1)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config, elicitation=silent) as client:
        result = await client.call_tool("connect", {})
    text = result.content[0].text  # type: ignore[union-attr]
    assert result.is_error and "did not answer within the call's timeout" in text
