"""What a server gets when the user's own code fails or a server asks too much: a hook that
raises (elicitation, sampling, roots) is answered with a generic JSON-RPC error (-32603, not
the SDK's code 0 with the exception text) and logged masked; a sampling request larger than
`sampling_max_input_bytes` is refused before the model is called; a resource, prompt or
completion function of ``mcp serve`` that raises is answered the same generic way.

The client side runs against a real stdio server (`mcp_asking_server.py`) whose tool returns
exactly what came back from the client."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import mcp_types
import pytest
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp_support import SERVERS, TEST_TIMEOUT, stdio_config

from toolweave import AiMessage
from toolweave.chat.scripted import ScriptedChatModel
from toolweave.context import ElicitationResult
from toolweave.mcp import McpClient, build_mcp_server, completion, prompt, resource
from toolweave.mcp.hooks import ElicitationRequest

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

ASKING = str(SERVERS / "mcp_asking_server.py")
LIVE_KEY = "sk-live-4f9c2a7e1b3d5c6a8e0f"
BEARER = "Bearer eyJhbGciOiJIUzI1NiJ9.c2VjcmV0.Zm9v"
CONFIGURED = "plainvalue-7Qx29"
"""A credential given to the stdio server in `env` (looks like no known pattern)."""
SECRETS = (LIVE_KEY, BEARER.split()[1], CONFIGURED)
FAILURE = f"upstream said no to {BEARER} / {LIVE_KEY} / token {CONFIGURED}"


async def ask(client: McpClient, what: str, **args: Any) -> dict[str, Any]:
    result = await client.call_tool("ask", {"what": what, **args})
    answer: dict[str, Any] = json.loads(result.content[0].text)  # type: ignore[union-attr]
    return answer


def assert_masked(
    caplog: pytest.LogCaptureFixture, *texts: str, secrets: tuple[str, ...] = SECRETS
) -> None:
    for text in (*texts, caplog.text, *(r.getMessage() for r in caplog.records)):
        for secret in secrets:
            assert secret not in text


async def failing_roots() -> list[Path]:
    raise RuntimeError(FAILURE)


async def failing_elicitation(request: ElicitationRequest) -> ElicitationResult:
    raise PermissionError(FAILURE)


async def failing_sampling(params: mcp_types.CreateMessageRequestParams) -> str:
    raise ValueError(FAILURE)


@pytest.mark.parametrize(
    ("what", "hooks"),
    [
        ("roots", {"roots": failing_roots}),
        ("elicit", {"elicitation": failing_elicitation}),
        ("sample", {"sampling": failing_sampling}),
    ],
)
async def test_a_raising_hook_sends_the_server_a_generic_error_and_logs_masked(
    caplog: pytest.LogCaptureFixture, what: str, hooks: dict[str, Any]
) -> None:
    caplog.set_level(logging.DEBUG)
    config = stdio_config(ASKING, env={"SERVICE_TOKEN": CONFIGURED})
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config, **hooks) as client:
        answer = await ask(client, what)
    assert answer["code"] == mcp_types.INTERNAL_ERROR  # -32603, not the SDK's 0
    assert answer["message"].endswith("failed on the client")
    assert "upstream" not in answer["message"]
    logged = [
        r for r in caplog.records if r.name == "toolweave.mcp" and "failed:" in r.getMessage()
    ]
    assert logged and "upstream said no to Bearer ***" in logged[0].getMessage()
    assert_masked(caplog, answer["message"])


async def test_a_sampling_request_over_the_input_cap_never_reaches_the_model() -> None:
    model = ScriptedChatModel([AiMessage("fine")])
    config = stdio_config(ASKING, sampling_max_input_bytes=10_000)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config, sampling=model) as client:
        refused = await ask(client, "sample", size=20_000)
        assert refused["code"] == mcp_types.INVALID_PARAMS
        assert "too large" in refused["message"] and "10000" in refused["message"]
        assert model.requests == []
        answered = await ask(client, "sample", size=1_000)
    assert answered["ok"]["content"]["text"] == "fine"
    assert len(model.requests) == 1


async def test_the_default_sampling_input_cap_is_one_mib() -> None:
    model = ScriptedChatModel([AiMessage("fine")])
    config = stdio_config(ASKING)
    assert config.sampling_max_input_bytes == 1024 * 1024
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config, sampling=model) as client:
        refused = await ask(client, "sample", size=2 * 1024 * 1024)
    assert refused["code"] == mcp_types.INVALID_PARAMS
    assert model.requests == []


# --- `mcp serve`: the user's resource, prompt and completion functions ---------------------


@resource("vault://{name}")
def vault(name: str) -> str:
    """A resource whose function fails with a credential in its message."""
    raise RuntimeError(FAILURE)


@prompt
def briefing(topic: str) -> str:
    """A prompt whose function fails."""
    raise KeyError(FAILURE)


@completion("briefing", "topic")
def topics(value: str) -> list[str]:
    raise LookupError(FAILURE)


@resource("vault://public")
def public() -> str:
    """An answer of the function's own: an MCPError passes unchanged."""
    raise MCPError(-32002, "public is gone")


async def test_a_raising_resource_prompt_or_completion_gets_a_generic_error(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    server = build_mcp_server([], features=[vault, briefing, topics, public])
    errors: list[MCPError] = []
    async with asyncio.timeout(TEST_TIMEOUT), Client(server, mode="legacy") as client:
        with pytest.raises(MCPError) as info:
            await client.read_resource("vault://alice")
        errors.append(info.value)
        with pytest.raises(MCPError) as info:
            await client.get_prompt("briefing", {"topic": "x"})
        errors.append(info.value)
        ref = mcp_types.PromptReference(type="ref/prompt", name="briefing")
        with pytest.raises(MCPError) as info:
            await client.complete(ref, {"name": "topic", "value": "a"})
        errors.append(info.value)
        with pytest.raises(MCPError) as own:
            await client.read_resource("vault://public")
    assert [e.code for e in errors] == [mcp_types.INTERNAL_ERROR] * 3
    assert errors[0].message == "reading the resource 'vault://{name}' failed on the server"
    assert (own.value.code, own.value.message) == (-32002, "public is gone")
    assert any(r.name == "toolweave.mcp.server" for r in caplog.records)
    # no credential is configured on the server side: the bearer and sk- ones are masked
    assert_masked(caplog, *(e.message for e in errors), secrets=SECRETS[:2])
