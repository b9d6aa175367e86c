"""A served tool's questions on 2026-07-28 connections: input-required results (SEP-2322).

`ctx.aelicit` / `ctx.asample` / `ctx.alist_roots` of a tool served by `build_mcp_server`
become ``inputRequests``; the client answers and sends the call again with
``inputResponses`` and the sealed ``requestState``; the tool runs again and gets the answers.
Checked with the SDK's client (in process, 2026-07-28 and the handshake for comparison, and
by hand with ``allow_input_required=True``) and with toolweave's `McpClient`
(``protocol="newest"``) against ``toolweave mcp serve`` over HTTP.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from typing import Any

import mcp_types
import pytest
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp_support import SERVERS, TEST_TIMEOUT, ServerProcess, start_server

from toolweave import McpError, tool
from toolweave.context import ElicitationResult, ToolContext
from toolweave.mcp import McpClient, McpServerConfig, build_mcp_server
from toolweave.mcp._input_required import STATE_KEYS_ENV
from toolweave.mcp.hooks import ElicitationRequest

MODERN = "2026-07-28"
FORM = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

runs: list[str] = []
done: list[str] = []


@tool
async def onboard(team: str, ctx: ToolContext) -> str:
    """Asks the user, the model and for the roots, one after the other; then acts once."""
    runs.append(team)
    answer = await ctx.aelicit("Your name?", FORM, key="who")
    motto = await ctx.asample(f"A motto for {team}", max_tokens=20)
    roots = await ctx.alist_roots()
    name = (answer.content or {}).get("name")
    done.append(f"{name}@{team}")  # the side effect, after every question
    return f"{name} joins {team} ({motto}) in {', '.join(r.uri for r in roots)}"


@tool
async def confirm(ctx: ToolContext) -> str:
    """Asks for a name."""
    answer = await ctx.aelicit("Your name?", FORM)
    return f"hello {(answer.content or {}).get('name')}"


@tool(requires_approval=True)
async def wipe(disk: str) -> str:
    """Needs the user's approval before it runs."""
    done.append(disk)
    return f"wiped {disk}"


@tool
async def ask_both(ctx: ToolContext) -> str:
    """Asks the user and the model at once."""
    answer, said = await asyncio.gather(ctx.aelicit("Name?", FORM), ctx.asample("Hi"))
    return f"{answer.content} {said}"


@pytest.fixture(autouse=True)
def _clear() -> Iterator[None]:
    runs.clear()
    done.clear()
    yield


async def on_elicit(context: Any, params: Any) -> mcp_types.ElicitResult:
    return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})


async def on_sample(context: Any, params: Any) -> mcp_types.CreateMessageResult:
    return mcp_types.CreateMessageResult(
        role="assistant",
        content=mcp_types.TextContent(type="text", text="onward"),
        model="test",
    )


async def on_roots(context: Any) -> mcp_types.ListRootsResult:
    return mcp_types.ListRootsResult(roots=[mcp_types.Root(uri="file:///work", name="work")])


def client(server: Any, mode: str = MODERN, **kw: Any) -> Client:
    answers: dict[str, Any] = dict(
        elicitation_callback=on_elicit, sampling_callback=on_sample, list_roots_callback=on_roots
    )
    answers.update(kw)
    return Client(server, mode=mode, **answers)


def text(result: Any) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


@pytest.mark.parametrize(("mode", "rounds"), [(MODERN, 4), ("legacy", 1)])
async def test_questions_are_answered_and_the_tool_runs_again_on_2026_07_28(
    mode: str, rounds: int
) -> None:
    server = build_mcp_server([onboard], name="tw")
    async with asyncio.timeout(TEST_TIMEOUT), client(server, mode) as c:
        result = await c.call_tool("onboard", {"team": "core"})
    assert not result.is_error, text(result)
    assert text(result) == "Ada joins core (onward) in file:///work"
    # 2026-07-28: one run per question plus the last; the handshake asks mid-call.
    assert runs == ["core"] * rounds
    assert done == ["Ada@core"]


async def test_the_first_answer_is_an_input_required_result_with_sealed_state() -> None:
    server = build_mcp_server([onboard], name="tw")
    async with asyncio.timeout(TEST_TIMEOUT), client(server) as c:
        first = await c.session.call_tool("onboard", {"team": "core"}, allow_input_required=True)
        assert isinstance(first, mcp_types.InputRequiredResult)
        assert first.input_requests is not None and list(first.input_requests) == ["who"]
        assert first.input_requests["who"].method == "elicitation/create"
        state = first.request_state
        assert state is not None and "who" not in state  # sealed, not readable
        answer = {"who": mcp_types.ElicitResult(action="accept", content={"name": "Bo"})}
        second = await c.session.call_tool(
            "onboard",
            {"team": "core"},
            input_responses=answer,
            request_state=state,
            allow_input_required=True,
        )
        # The elicitation is answered; the sampling comes next, under its ordinal key.
        assert isinstance(second, mcp_types.InputRequiredResult)
        assert second.input_requests is not None
        assert list(second.input_requests) == ["input_1"]
        assert second.request_state != state
        # A changed state is refused, and so is the state of another call (other arguments).
        for args, bad in (({"team": "core"}, state[:-2] + "xx"), ({"team": "ops"}, state)):
            with pytest.raises(MCPError) as refused:
                await c.session.call_tool(
                    "onboard",
                    args,
                    input_responses=answer,
                    request_state=bad,
                    allow_input_required=True,
                )
            assert refused.value.error.code == mcp_types.INVALID_PARAMS
    assert done == []


async def test_an_answer_that_does_not_fit_the_form_is_asked_again() -> None:
    server = build_mcp_server([confirm], name="tw")
    async with asyncio.timeout(TEST_TIMEOUT), client(server) as c:
        wrong = {"input_1": mcp_types.ElicitResult(action="accept", content={"age": 3})}
        again = await c.session.call_tool(
            "confirm", {}, input_responses=wrong, allow_input_required=True
        )
        assert isinstance(again, mcp_types.InputRequiredResult)
        right = {"input_1": mcp_types.ElicitResult(action="accept", content={"name": "Cy"})}
        done_ = await c.session.call_tool(
            "confirm", {}, input_responses=right, allow_input_required=True
        )
        assert isinstance(done_, mcp_types.CallToolResult) and text(done_) == "hello Cy"


@pytest.mark.parametrize(("approve", "answer"), [(True, "wiped d1"), (False, "did not approve")])
async def test_the_approval_of_a_tool_that_needs_it_is_an_input_required_question(
    approve: bool, answer: str
) -> None:
    asked: list[str] = []

    async def decide(context: Any, params: Any) -> mcp_types.ElicitResult:
        asked.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"approve": approve})

    server = build_mcp_server([wipe], name="tw")
    async with asyncio.timeout(TEST_TIMEOUT), client(server, elicitation_callback=decide) as c:
        first = await c.session.call_tool("wipe", {"disk": "d1"}, allow_input_required=True)
        assert isinstance(first, mcp_types.InputRequiredResult)
        result = await c.call_tool("wipe", {"disk": "d1"})
    assert answer in text(result)
    assert len(asked) == 1 and "d1" in asked[0]
    assert done == (["d1"] if approve else [])


@pytest.mark.parametrize(
    ("name", "missing"), [("confirm", "elicitation"), ("ask_both", "sampling")]
)
async def test_a_missing_capability_is_minus_32021(name: str, missing: str) -> None:
    # Also when another question of the same round could be asked.
    server = build_mcp_server([confirm, ask_both], name="tw")
    without = {f"{missing}_callback": None}
    async with asyncio.timeout(TEST_TIMEOUT), client(server, **without) as c:
        with pytest.raises(MCPError) as refused:
            await c.call_tool(name, {})
    assert refused.value.error.code == mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY
    data = refused.value.error.data
    assert isinstance(data, dict) and list(data["requiredCapabilities"]) == [missing]


async def test_workers_sharing_the_state_keys_accept_each_others_state(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv(STATE_KEYS_ENV, "k" * 32 + ",old-" + "o" * 32)
    one, two = build_mcp_server([confirm], name="tw"), build_mcp_server([confirm], name="tw")
    monkeypatch.setenv(STATE_KEYS_ENV, "x" * 32)
    other = build_mcp_server([confirm], name="tw")
    answer = {"input_1": mcp_types.ElicitResult(action="accept", content={"name": "Di"})}
    async with asyncio.timeout(TEST_TIMEOUT), client(one) as a:
        first = await a.session.call_tool("confirm", {}, allow_input_required=True)
    assert isinstance(first, mcp_types.InputRequiredResult) and first.request_state
    async with client(two) as b:
        result = await b.session.call_tool(
            "confirm",
            {},
            input_responses=answer,
            request_state=first.request_state,
            allow_input_required=True,
        )
        assert isinstance(result, mcp_types.CallToolResult) and text(result) == "hello Di"
    async with client(other) as c:
        with pytest.raises(MCPError) as refused:
            await c.session.call_tool(
                "confirm",
                {},
                input_responses=answer,
                request_state=first.request_state,
                allow_input_required=True,
            )
        assert refused.value.error.code == mcp_types.INVALID_PARAMS


# --- toolweave's McpClient against `toolweave mcp serve` over HTTP --------------------------
@pytest.fixture(scope="module")
def served_http() -> Iterator[ServerProcess]:
    module = str(SERVERS / "mcp_conformance_server.py")
    server = start_server(
        ["-m", "toolweave", "mcp", "serve", module, "--transport", "http", "--port"]
    )
    yield server
    server.stop()


def http_config(server: ServerProcess, **kw: Any) -> McpServerConfig:
    return McpServerConfig(
        server_name="tw",
        params={"url": f"http://127.0.0.1:{server.port}/mcp"},
        call_timeout=60,
        **kw,
    )


async def test_mcp_client_newest_without_hooks_is_refused_with_the_capability_named(
    served_http: ServerProcess,
) -> None:
    config = http_config(served_http, protocol="newest")
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config) as c:
        assert c._core._conn is not None and c._core._conn.modern
        with pytest.raises(McpError) as refused:
            await c.call_tool("test_input_required_result_elicitation", {})
        # A tool that asks nothing is served as before on the same connection.
        plain = await c.call_tool("test_simple_text", {})
    assert "elicitation" in str(refused.value)
    cause = refused.value.__cause__
    assert isinstance(cause, MCPError)
    assert cause.error.code == mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY
    assert not plain.is_error


async def test_mcp_client_with_hooks_gets_the_same_tools_answered(
    served_http: ServerProcess,
) -> None:
    # McpClient with hooks speaks the handshake (the server asks mid-call); the same tool
    # code answers 2026-07-28 clients with input-required results (the tests above).
    asked: list[str] = []

    async def ask(request: ElicitationRequest) -> ElicitationResult:
        asked.append(request.message)
        return ElicitationResult("accept", {"name": "Eve", "context": "tests"})

    async def sample(params: mcp_types.CreateMessageRequestParams) -> str:
        return "Bonjour"

    config = http_config(served_http, protocol="newest")
    hooks: dict[str, Any] = dict(elicitation=ask, sampling=sample, roots=["file:///srv"])
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config, **hooks) as c:
        result = await c.call_tool("test_input_required_result_multiple_inputs", {})
        prompt = await c.get_prompt("test_input_required_result_prompt", {})
    assert not result.is_error
    assert "".join(getattr(b, "text", "") for b in result.content) == "Bonjour Eve (1 roots)"
    assert asked == ["What is your name?", "What context should the prompt use?"]
    assert "Use this context: tests" in json.dumps(prompt.model_dump(mode="json"))
