"""MCP faults through `ToolService`: a hand-written stdio server (tests/servers/fault_mcp_server.py)
that crashes at start or mid-call, hangs, answers with an unknown id, writes invalid JSON-RPC
or a malformed result; plus cancellation of a conversation whose MCP call hangs.

Each case asserts the typed error (class and code), that the failing call reached the server
exactly once (never re-sent), an elapsed bound from the configured timeouts, the history, that
the connection recovers for the next call, and that no task, thread or child process is left.
"""

from __future__ import annotations

import asyncio
import json
import logging
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, ToolService
from toolweave.errors import ErrorCode, McpError
from toolweave.mcp import McpClient, McpServerConfig, McpTimeoutError, SyncMcpClient
from toolweave.service.handlers import RETHROW

from .invariants import (
    SECRET,
    LeakGuard,
    SecretScan,
    Timer,
    assert_history_valid,
    assert_partial_result,
    elapsed_bound,
)

SERVER = str(Path(__file__).resolve().parent.parent / "servers" / "fault_mcp_server.py")
CALL_TIMEOUT = 1.0
CONNECT_TIMEOUT = 20.0


def child_pids() -> set[int]:
    """Live child processes of this process (Linux /proc)."""
    pids: set[int] = set()
    for task in Path("/proc/self/task").iterdir():
        try:
            pids.update(int(p) for p in (task / "children").read_text().split())
        except OSError:
            continue
    return pids


def _config(log: Path, mode: str = "serve", **kw: Any) -> McpServerConfig:
    return McpServerConfig(
        server_name="fault",
        client_type="stdio",
        params={
            "command": sys.executable,
            "args": [SERVER, mode],
            # a planted secret in the child's environment must never surface in errors
            "env": {"FAULT_MCP_LOG": str(log), "FAULT_API_KEY": SECRET},
        },
        connect_timeout=kw.pop("connect_timeout", CONNECT_TIMEOUT),
        call_timeout=kw.pop("call_timeout", CALL_TIMEOUT),
        **kw,
    )


def _received(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines() if line.strip()]


def _calls(log: Path, name: str) -> list[dict[str, Any]]:
    return [
        m for m in _received(log) if m.get("method") == "tools/call" and m["params"]["name"] == name
    ]


def _call(name: str, call_id: str, **args: Any) -> ToolExecutionRequest:
    return ToolExecutionRequest(id=call_id, name=name, arguments=json.dumps(args))


@pytest.fixture
def log(tmp_path: Path) -> Path:
    return tmp_path / "mcp.jsonl"


@pytest.fixture
async def guard() -> AsyncIterator[LeakGuard]:
    """Snapshot before the client exists; after the test, no task, thread or child left."""
    children = child_pids()
    g = LeakGuard()
    yield g
    await g.acheck()
    for _ in range(100):
        if child_pids() <= children:
            break
        await asyncio.sleep(0.05)
    assert child_pids() <= children, "an MCP server process outlived its client"


# connect faults ---------------------------------------------------------------------------------
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_a_silent_tools_list_is_bounded_by_call_timeout(
    log: Path, guard: LeakGuard, face: str
) -> None:
    # The SDK's list_tools has no timer: the caller-side guard used to be the bound
    # (connect_timeout + call_timeout + 10 s of grace: 31 s here for a 1 s call timeout).
    cfg = _config(log, "silent-list")

    def sync_list() -> tuple[float, BaseException]:
        with SyncMcpClient(cfg) as client:
            client.connect()
            with Timer() as t, pytest.raises(McpTimeoutError) as info:
                client.list_tools()
        return t.elapsed, info.value

    if face == "sync":
        elapsed, error = await asyncio.to_thread(sync_list)
    else:
        async with McpClient(cfg) as client:
            await client.connect()
            with Timer() as t, pytest.raises(McpTimeoutError) as info:
                await client.list_tools()
        elapsed, error = t.elapsed, info.value
    assert isinstance(error, McpTimeoutError) and error.code == ErrorCode.MCP_TIMEOUT
    assert f"tools/list did not finish within {CALL_TIMEOUT:g} s" in error.message
    assert elapsed < elapsed_bound(attempts=1, per_attempt=CALL_TIMEOUT)
    assert [m["method"] for m in _received(log)].count("tools/list") == 1


@pytest.mark.parametrize("mode", ["crash-at-start", "crash-after-init"])
async def test_server_crashing_at_start_is_a_connection_error(
    log: Path, guard: LeakGuard, mode: str
) -> None:
    cfg = _config(log, mode)
    with Timer() as t, pytest.raises(McpError) as info:
        async with McpClient(cfg) as client:
            await client.list_tools()
    assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
    assert "could not connect" in info.value.message or "closed" in info.value.message
    assert t.elapsed < elapsed_bound(attempts=1, per_attempt=CONNECT_TIMEOUT)
    scan = SecretScan()
    scan.add_error(info.value)
    scan.check()


# call faults through the loop ---------------------------------------------------------------------
CASES = {
    # name: (code of the error, a fragment of the text the model sees, connection lost?)
    "hang": (ErrorCode.MCP_TIMEOUT, "did not finish within 1 s", False),
    "wrong_id": (ErrorCode.MCP_TIMEOUT, "did not finish within 1 s", False),
    "crash": (ErrorCode.MCP_CONNECTION_ERROR, "it was not retried", True),
    "half_line": (ErrorCode.MCP_CONNECTION_ERROR, "it was not retried", True),
    "garbage": (ErrorCode.MCP_CONNECTION_ERROR, "not valid JSON-RPC", True),
    "bad_result": (ErrorCode.MCP_EXECUTION_ERROR, "invalid result", False),
    "rpc_error": (ErrorCode.MCP_EXECUTION_ERROR, "JSON-RPC error -32603: it broke", False),
}


@pytest.mark.parametrize("fault", list(CASES))
async def test_mcp_fault_in_a_conversation(
    log: Path, guard: LeakGuard, caplog: pytest.LogCaptureFixture, fault: str
) -> None:
    caplog.set_level(logging.DEBUG)
    code, fragment, lost = CASES[fault]
    model = ScriptedChatModel(
        [
            AiMessage(tool_execution_requests=[_call(fault, "f1")]),
            AiMessage(tool_execution_requests=[_call("ok", "f2", x="after")]),
            AiMessage("done"),
        ]
    )
    async with McpClient(_config(log)) as client:
        tools = await client.list_tools()
        service = ToolService().tools(*tools)
        with Timer() as t:
            result = await service.achat(model, None, "go")
    assert_history_valid(result.messages)
    first, second = result.tool_executions
    assert first.result.is_error and fragment in first.result.result_text()
    error = first.result.error
    assert isinstance(error, McpError) and error.code == code
    # the connection recovered (a new server process when it was lost)
    assert second.result.result_text() == "ok after" and not second.result.is_error
    assert result.text == "done"
    # the failed call reached the server once: never re-sent
    assert len(_calls(log, fault)) == 1 and len(_calls(log, "ok")) == 1
    if fault in ("hang", "wrong_id"):
        cancels = [m for m in _received(log) if m.get("method") == "notifications/cancelled"]
        assert [c["params"]["requestId"] for c in cancels] == [_calls(log, fault)[0]["id"]]
    starts = sum(1 for m in _received(log) if m.get("method") == "initialize")
    assert starts == (2 if lost else 1)
    assert t.elapsed < elapsed_bound(attempts=2, per_attempt=CALL_TIMEOUT + CONNECT_TIMEOUT)
    scan = SecretScan()
    scan.add_error(error)
    scan.add_messages(result.messages)
    scan.add_records(caplog.records)
    scan.check()


@pytest.mark.parametrize("fault", ["crash", "hang"])
async def test_rethrow_handler_escapes_with_a_valid_partial_result(
    log: Path, guard: LeakGuard, fault: str
) -> None:
    model = ScriptedChatModel(
        [AiMessage(tool_execution_requests=[_call("ok", "a", x="1"), _call(fault, "b")])]
    )
    async with McpClient(_config(log)) as client:
        service = ToolService(execution_error_handler=RETHROW).tools(*await client.list_tools())
        with pytest.raises(McpError) as info:
            await service.achat(model, None, "go")
    partial = assert_partial_result(info.value)
    answered = [m.id for m in partial.messages if type(m).__name__ == "ToolExecutionResultMessage"]
    assert answered == ["a", "b"]
    assert info.value.code == CASES[fault][0]
    assert len(_calls(log, fault)) == 1


async def test_cancelling_a_conversation_cancels_the_mcp_call(log: Path, guard: LeakGuard) -> None:
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[_call("hang", "h1")])])
    async with McpClient(_config(log, call_timeout=60.0)) as client:
        service = ToolService().tools(*await client.list_tools())
        task = asyncio.create_task(service.achat(model, None, "go"))
        for _ in range(400):
            if _calls(log, "hang"):
                break
            await asyncio.sleep(0.025)
        assert _calls(log, "hang"), "the call never reached the server"
        with Timer() as t:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert t.elapsed < 5.0
        # the server is told, and the connection still works
        for _ in range(200):
            if any(m.get("method") == "notifications/cancelled" for m in _received(log)):
                break
            await asyncio.sleep(0.025)
        cancels = [m for m in _received(log) if m.get("method") == "notifications/cancelled"]
        assert [c["params"]["requestId"] for c in cancels] == [_calls(log, "hang")[0]["id"]]
        tools = {t.name: t for t in await client.list_tools()}
        assert await tools["ok"].ainvoke({"x": "still"}) == "ok still"


async def test_sync_face_with_a_crashing_server(log: Path, guard: LeakGuard) -> None:
    model = ScriptedChatModel(
        [AiMessage(tool_execution_requests=[_call("crash", "c1")]), AiMessage("done")]
    )
    async with McpClient(_config(log)) as client:
        service = ToolService().tools(*await client.list_tools())
        result = await asyncio.to_thread(service.chat, model, None, "go")
    assert_history_valid(result.messages)
    assert result.tool_executions[0].result.is_error
    assert result.tool_executions[0].result.error.code == ErrorCode.MCP_CONNECTION_ERROR
