"""Retries (issue 29 item 4): per-tool and per-toolset argument-retry budgets, `ModelRetry`,
and transient-failure retry of idempotent tools (`Retry`), through every face, with the
scripted model asserting what the model received."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from servers.flaky_http import flaky_server
from service.helpers import MODES, ai_calls, assert_history_valid, call, run
from toolweave import (
    AiMessage,
    ModelRetry,
    Retry,
    ScriptedChatModel,
    ToolArgumentsError,
    ToolCard,
    ToolCardError,
    ToolExecutionResultMessage,
    ToolService,
    tool,
)
from toolweave.errors import ErrorCode, McpError, RestfulApiError, ToolExecutionError
from toolweave.http import RestfulApi, RestfulApiCard
from toolweave.http.errors import RestfulApiResponseError, RestfulApiTimeoutError
from toolweave.mcp import McpClient, McpServerConfig
from toolweave.tools.retry import transient_error
from toolweave.toolsets import FunctionToolset

FAST = {"backoff": 0.001, "max_delay": 0.002}


def _results(model: ScriptedChatModel, turn: int) -> list[ToolExecutionResultMessage]:
    """The tool results the model received in its request number `turn` (0-based)."""
    return [m for m in model.requests[turn].messages if isinstance(m, ToolExecutionResultMessage)]


# ModelRetry ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_model_retry_sends_its_message_to_the_model_then_the_call_succeeds(mode: str) -> None:
    seen: list[int] = []

    @tool
    def pick(n: int) -> str:
        """Pick an even number."""
        seen.append(n)
        if n % 2:
            raise ModelRetry(f"{n} is odd: pick an even number")
        return f"picked {n}"

    model = ScriptedChatModel(
        [
            ai_calls(call("pick", '{"n": 3}', id="a")),
            ai_calls(call("pick", '{"n": 4}', id="b")),
            AiMessage("4 it is"),
        ]
    )
    result = run(mode, ToolService().tools(pick), model)
    assert seen == [3, 4]
    first = _results(model, 1)[-1]
    assert (first.id, first.text, first.is_error) == ("a", "3 is odd: pick an even number", True)
    assert first.attributes["toolweave.model_retry"] == 1
    second = _results(model, 2)[-1]
    assert (second.text, second.is_error) == ("picked 4", False)
    assert result.text == "4 it is"
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_model_retry_past_the_tools_budget_is_a_failure(
    mode: str, caplog: pytest.LogCaptureFixture
) -> None:
    @tool(max_argument_retries=1)
    def pick(n: int) -> str:
        """Pick."""
        raise ModelRetry("not that one")

    model = ScriptedChatModel(
        [
            ai_calls(call("pick", '{"n": 1}', id="a")),
            ai_calls(call("pick", '{"n": 2}', id="b")),
            AiMessage("giving up"),
        ]
    )
    with caplog.at_level("WARNING", logger="toolweave.service"):
        result = run(mode, ToolService(max_argument_retries=5).tools(pick), model)
    first, second = _results(model, 2)
    assert "toolweave.model_retry" in first.attributes  # within the budget: a retry prompt
    assert "toolweave.model_retry" not in second.attributes  # past it: the tool's failure
    assert second.is_error and second.text == "not that one"
    # only the failure went to the execution error handler (which logs it)
    assert [r for r in caplog.records if "pick" in r.getMessage()]
    assert len([r for r in caplog.records if "failed" in r.getMessage()]) == 1
    assert result.text == "giving up"


def test_a_model_retry_from_a_callable_executor_counts_too() -> None:
    def executor(request: Any, memory_id: Any) -> str:
        raise ModelRetry("use a positive number")

    model = ScriptedChatModel([ai_calls(call("neg", "{}", id="a")), AiMessage("ok")])
    service = ToolService().tool(ToolCard(name="neg", description="n"), executor)
    service.chat(model, None, "hi")
    answer = _results(model, 1)[-1]
    assert answer.text == "use a positive number"
    assert answer.attributes["toolweave.model_retry"] == 1


# argument-retry budgets ---------------------------------------------------------------------
def _bad_calls(name: str, n: int) -> list[AiMessage]:
    return [ai_calls(call(name, '{"n": "x"}', id=f"{name}{i}")) for i in range(n)]


def _count(n: int) -> int:
    return n


@pytest.mark.parametrize("mode", MODES)
def test_the_most_specific_argument_retry_budget_wins(mode: str) -> None:
    strict = tool(_count, name="strict", max_argument_retries=0)
    loose = tool(_count, name="loose")
    plain = tool(_count, name="plain")
    lenient = FunctionToolset(loose).limited(max_argument_retries=4)
    overridden = FunctionToolset(strict).limited(max_argument_retries=9)

    # the card's 0 wins over its toolset's 9: the first bad call aborts
    model = ScriptedChatModel([*_bad_calls("strict", 1), AiMessage("-")])
    with pytest.raises(ToolArgumentsError) as raised:
        run(mode, ToolService(toolsets=[overridden]), model)
    assert_history_valid(raised.value.partial_result.messages)  # type: ignore[attr-defined]

    # the toolset's 4 wins over the service's default 2: four bad calls go back to the model
    model = ScriptedChatModel([*_bad_calls("loose", 4), AiMessage("done")])
    assert run(mode, ToolService(toolsets=[lenient]), model).text == "done"
    with pytest.raises(ToolArgumentsError):
        model = ScriptedChatModel([*_bad_calls("loose", 5), AiMessage("done")])
        run(mode, ToolService(toolsets=[lenient]), model)

    # the service's budget for the rest
    model = ScriptedChatModel([*_bad_calls("plain", 3), AiMessage("done")])
    with pytest.raises(ToolArgumentsError):
        run(mode, ToolService(max_argument_retries=2).tools(plain), model)


def test_the_handler_sees_the_tools_budget() -> None:
    budgets: list[int] = []

    def handler(error: BaseException, ctx: Any) -> str:
        budgets.append(ctx.budget)
        return "again"

    t = tool(_count, name="t", max_argument_retries=7)
    model = ScriptedChatModel([*_bad_calls("t", 1), AiMessage("done")])
    ToolService(arguments_error_handler=handler).tools(t).chat(model, None, "hi")
    assert budgets == [7]


# Retry: declaration -------------------------------------------------------------------------
def test_retry_is_refused_unless_the_tool_is_idempotent() -> None:
    with pytest.raises(ToolCardError, match="not idempotent=True"):
        tool(_count, retry=Retry())
    with pytest.raises(ToolCardError, match="not idempotent=True"):
        ToolCard(name="x", retry=Retry())
    with pytest.raises(ToolCardError, match="not idempotent=True"):
        RestfulApiCard(name="api", url="http://127.0.0.1:1/x", retry=Retry())
    with pytest.raises(ToolCardError, match="a Retry"):
        ToolCard(name="x", idempotent=True, retry=3)
    with pytest.raises(ToolCardError):
        Retry(attempts=0)
    with pytest.raises(ToolCardError):
        Retry(on=("ConnectionError",))  # type: ignore[arg-type]
    assert tool(_count, idempotent=True, retry=Retry()).card.retry == Retry()
    base = ToolCard(name="y", idempotent=True)
    assert tool(_count, card=base, retry=Retry(attempts=2)).card.retry == Retry(attempts=2)


def test_the_backoff_grows_with_jitter_and_stays_capped() -> None:
    policy = Retry(attempts=7, backoff=0.5, max_delay=8.0, jitter=0.25)
    rng = random.Random(7)
    delays = [policy.delay(n, rng) for n in range(6)]
    for d, b in zip(delays, [0.5, 1, 2, 4, 8, 8], strict=True):
        assert 0.75 * b <= d <= b
    assert len(set(delays)) == 6  # jittered: no two the same
    assert Retry(jitter=0).delay(3) == 4.0


def test_the_default_retries_http_and_mcp_connection_errors_and_timeouts_only() -> None:
    import httpx2

    connect = RestfulApiError("x", cause=httpx2.ConnectError("refused"))
    dropped = RestfulApiError("x", cause=httpx2.RemoteProtocolError("no answer"))
    decoding = RestfulApiError(
        "x", code=ErrorCode.RESTFUL_API_RESPONSE_PROCESS_ERROR, cause=httpx2.DecodingError("z")
    )
    assert transient_error(connect) and transient_error(dropped)
    assert transient_error(RestfulApiTimeoutError("slow"))
    assert transient_error(McpError("gone", code=ErrorCode.MCP_CONNECTION_ERROR))
    assert transient_error(McpError("slow", code=ErrorCode.MCP_TIMEOUT))
    assert not transient_error(decoding)
    assert not transient_error(RestfulApiResponseError("503", status=503))
    assert not transient_error(McpError("the tool said no"))
    assert not transient_error(ToolExecutionError("x", cause=ConnectionError("local")))
    assert not transient_error(TimeoutError("a local tool's own"))


# Retry: real HTTP tools ---------------------------------------------------------------------
def _api(url: str, **card: Any) -> RestfulApi:
    return RestfulApi(
        RestfulApiCard(
            name="lookup", url=f"{url}/lookup", method="GET", allow_private_network=True, **card
        )
    )


@pytest.mark.parametrize("mode", MODES)
def test_an_idempotent_http_tool_is_retried_after_dropped_connections(mode: str) -> None:
    with flaky_server(failures=2) as server:
        api = _api(server.url, idempotent=True, retry=Retry(attempts=3, **FAST))
        model = ScriptedChatModel([ai_calls(call("lookup", "{}", id="l1")), AiMessage("found")])
        result = run(mode, ToolService().tools(api), model)
    assert server.count == 3
    answer = _results(model, 1)[-1]
    assert not answer.is_error and '"attempt":3' in answer.text
    assert result.tool_executions[0].result.attributes["toolweave.attempts"] == 3
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_retries_are_bounded_by_attempts_then_the_model_gets_the_error(mode: str) -> None:
    with flaky_server(failures=100) as server:
        api = _api(server.url, idempotent=True, retry=Retry(attempts=4, **FAST))
        model = ScriptedChatModel([ai_calls(call("lookup", "{}", id="l1")), AiMessage("sorry")])
        result = run(mode, ToolService().tools(api), model)
    assert server.count == 4
    answer = _results(model, 1)[-1]
    assert answer.is_error and "lookup" in answer.text
    assert result.text == "sorry"


def test_retries_are_bounded_by_total_time() -> None:
    with flaky_server(failures=100) as server:
        # the first wait (7.5 to 10 s) would pass total_time: no second attempt starts
        policy = Retry(attempts=5, backoff=10, max_delay=10, total_time=1)
        api = _api(server.url, idempotent=True, retry=policy)
        model = ScriptedChatModel([ai_calls(call("lookup", "{}", id="l1")), AiMessage("sorry")])
        ToolService().tools(api).chat(model, None, "hi")
    assert server.count == 1
    assert _results(model, 1)[-1].is_error


@pytest.mark.parametrize("mode", MODES)
def test_an_error_status_is_not_retried_by_default(mode: str) -> None:
    with flaky_server(failures=1, mode="status", status=503) as server:
        api = _api(server.url, idempotent=True, retry=Retry(attempts=3, **FAST))
        model = ScriptedChatModel([ai_calls(call("lookup", "{}", id="l1")), AiMessage("sorry")])
        run(mode, ToolService().tools(api), model)
    assert server.count == 1
    assert "HTTP 503" in _results(model, 1)[-1].text


def test_the_listed_exceptions_are_retried_instead() -> None:
    with flaky_server(failures=1, mode="status", status=503) as server:
        policy = Retry(attempts=3, on=(RestfulApiResponseError,), **FAST)
        api = _api(server.url, idempotent=True, retry=policy)
        model = ScriptedChatModel([ai_calls(call("lookup", "{}", id="l1")), AiMessage("ok")])
        ToolService().tools(api).chat(model, None, "hi")
    assert server.count == 2
    assert not _results(model, 1)[-1].is_error


@pytest.mark.parametrize("idempotent", [False, True])
def test_a_tool_without_a_retry_policy_is_never_resent(idempotent: bool) -> None:
    with flaky_server(failures=1) as server:
        api = _api(server.url, idempotent=idempotent)
        model = ScriptedChatModel([ai_calls(call("lookup", "{}", id="l1")), AiMessage("sorry")])
        ToolService().tools(api).chat(model, None, "hi")
    assert server.count == 1
    assert _results(model, 1)[-1].is_error


@pytest.mark.parametrize("mode", MODES)
def test_a_local_tools_own_errors_are_not_retried_by_default(mode: str) -> None:
    runs: list[int] = []

    @tool(idempotent=True, retry=Retry(attempts=3, **FAST))
    def local() -> str:
        """Local."""
        runs.append(1)
        raise ConnectionError("its own")

    model = ScriptedChatModel([ai_calls(call("local", "{}", id="l")), AiMessage("x")])
    run(mode, ToolService().tools(local), model)
    assert runs == [1]

    @tool(idempotent=True, retry=Retry(attempts=3, on=(ConnectionError,), **FAST))
    async def listed() -> str:
        """Listed."""
        runs.append(2)
        if len(runs) < 3:
            raise ConnectionError("flaky")
        return "ok"

    model = ScriptedChatModel([ai_calls(call("listed", "{}", id="l")), AiMessage("x")])
    run(mode, ToolService().tools(listed), model)
    assert runs == [1, 2, 2]
    assert _results(model, 1)[-1].text == "ok"


# Retry: a real MCP server ---------------------------------------------------------------------
FAULT_SERVER = str(Path(__file__).resolve().parent.parent / "servers" / "fault_mcp_server.py")


async def test_an_mcp_tool_made_idempotent_is_retried_after_timeouts(tmp_path: Path) -> None:
    log = tmp_path / "mcp.jsonl"
    config = McpServerConfig(
        server_name="fault",
        client_type="stdio",
        params={
            "command": sys.executable,
            "args": [FAULT_SERVER],
            "env": {"FAULT_MCP_LOG": str(log)},
        },
        connect_timeout=20.0,
        call_timeout=0.5,
    )

    def calls(name: str) -> int:
        lines = log.read_text().splitlines() if log.exists() else []
        return sum(
            1
            for m in map(json.loads, lines)
            if m.get("method") == "tools/call" and m["params"]["name"] == name
        )

    def idempotent(ctx: Any, cards: list[ToolCard]) -> list[ToolCard]:
        policy = Retry(attempts=2, **FAST)
        return [c.model_copy(update={"idempotent": True, "retry": policy}) for c in cards]

    async with McpClient(config) as client:
        listed = [t for t in await client.list_tools() if t.card.name in ("hang", "ok")]
        service = ToolService(toolsets=[FunctionToolset(*listed).prepared(idempotent)])
        model = ScriptedChatModel(
            [ai_calls(call("hang", "{}", id="h"), call("ok", '{"x": 1}', id="o")), AiMessage("x")]
        )
        await service.achat(model, None, "hi")
        plain = ToolService().tools(*listed)
        model2 = ScriptedChatModel([ai_calls(call("hang", "{}", id="h2")), AiMessage("x")])
        await plain.achat(model2, None, "hi")
    hang, ok = _results(model, 1)
    assert hang.is_error and "did not finish within 0.5 s" in hang.text
    assert not ok.is_error
    assert calls("ok") == 1  # a success is not repeated
    assert calls("hang") == 2 + 1  # twice under the policy, once without it
    assert _results(model2, 1)[-1].is_error
