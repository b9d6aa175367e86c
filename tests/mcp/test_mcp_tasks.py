"""Task-augmented tool calls (MCP 2025-11-25 tasks) against a real server on the official
TypeScript SDK's experimental tasks (tests/mcp/ts_task_server.mjs, over stdio): required
tools listed and called, polling, status notifications, failed tasks, timeouts and caller
cancellation (``tasks/cancel``), ``input_required`` answered by the elicitation hook,
progress, and the ``task_calls`` policy for optional tools; deadlines against hostile servers
(a flood of status notifications, a ``tasks/cancel`` never answered)."""

from __future__ import annotations

import asyncio
import json
import logging
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_support import BROKEN, TEST_TIMEOUT, free_port, stdio_config, wait_for_port
from npm_support import TS_SDK, script_beside

from toolweave import AiMessage
from toolweave.chat.scripted import ScriptedChatModel
from toolweave.context import ElicitationResult
from toolweave.errors import ErrorCode, McpError, ToolTimeoutError
from toolweave.mcp import McpClient, McpServerConfig, McpTimeoutError, SyncMcpClient, _tasks
from toolweave.mcp._deadline import CallDeadline
from toolweave.mcp.hooks import ElicitationRequest

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def script() -> str:
    path = script_beside(TS_SDK, HERE / "ts_task_server.mjs")
    return str(path)


def config(script: str, **kw: Any) -> McpServerConfig:
    env = kw.pop("env", None)
    params: dict[str, Any] = {"command": "node", "args": [script]}
    if env:
        params["env"] = env
    return McpServerConfig(server_name="tasks", params=params, connect_timeout=60, **kw)


async def task_log(client: McpClient) -> list[dict[str, Any]]:
    result = await client.call_tool("task_log", {})
    return json.loads(result.content[0].text)  # type: ignore[union-attr]


async def test_required_tools_are_listed_and_called_as_tasks(script: str) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(script)) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert set(tools) == {
            "wait",
            "fail",
            "crash",
            "ask",
            "ask_model",
            "count",
            "maybe",
            "task_log",
        }
        assert tools["wait"].card.metadata["task_support"] == "required"
        assert tools["maybe"].card.metadata["task_support"] == "optional"
        assert await tools["wait"].ainvoke({"ms": 300, "text": "done waiting"}) == "done waiting"
        [task] = await task_log(client)
    # polled until completed; the task was asked to live past the call's timeout (300 s)
    assert task["tool"] == "wait" and task["status"] == "completed"
    assert task["ttl"] >= 300_000


async def test_a_status_notification_ends_the_wait_for_the_next_poll(script: str) -> None:
    # The server suggests polling once a minute but notifies the status change: the call
    # ends when the task does. Were the notification ignored, the call would time out.
    # (A call by name before any listing: the client lists the tools to learn which take tasks.)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(script)) as client:
        result = await client.call_tool(
            "wait", {"ms": 100, "text": "notified", "poll": 60_000}, timeout=20
        )
    assert result.content[0].text == "notified"  # type: ignore[union-attr]


async def test_a_failed_task_is_an_error_result(script: str) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(script)) as client:
        raw = await client.call_tool("fail", {})
        assert raw.is_error and raw.content[0].text == "the disk is full"  # type: ignore[union-attr]
        tools = {t.name: t for t in await client.list_tools()}
        with pytest.raises(McpError, match="the disk is full") as info:
            await tools["fail"].ainvoke({})
        assert info.value.code == 182301


async def test_a_task_that_failed_without_a_result_is_an_error(script: str) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(script)) as client:
        tools = {t.name: t for t in await client.list_tools()}
        with pytest.raises(McpError, match="the task failed: Error: the worker crashed"):
            await tools["crash"].ainvoke({})


async def test_a_timeout_cancels_the_task(script: str) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(script)) as client:
        await client.list_tools()
        with pytest.raises(McpTimeoutError) as info:
            await client.call_tool("wait", {"ms": 60_000, "text": "too late"}, timeout=1)
        assert isinstance(info.value, ToolTimeoutError)
        assert "did not finish within 1 s" in info.value.message
        [task] = await task_log(client)
    assert task["status"] == "cancelled"  # tasks/cancel reached the server


async def test_a_tool_timeout_cancels_the_task(script: str) -> None:
    # The McpTool's own limit (card or per call) covers the task too.
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(script)) as client:
        tools = {t.name: t for t in await client.list_tools()}
        with pytest.raises(ToolTimeoutError):
            await tools["wait"].ainvoke({"ms": 60_000, "text": "too late"}, timeout=1)
        for _ in range(200):
            [task] = await task_log(client)
            if task["status"] != "working":
                break
            await asyncio.sleep(0.05)
    assert task["status"] == "cancelled"


async def test_cancelling_the_caller_cancels_the_task(script: str) -> None:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(script)) as client:
        tools = {t.name: t for t in await client.list_tools()}
        call = asyncio.create_task(tools["wait"].ainvoke({"ms": 60_000, "text": "never"}))
        for _ in range(200):  # until the task exists on the server
            if await task_log(client):
                break
            await asyncio.sleep(0.05)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        for _ in range(200):
            [task] = await task_log(client)
            if task["status"] != "working":
                break
            await asyncio.sleep(0.05)
    assert task["status"] == "cancelled"


async def test_input_required_is_answered_by_the_elicitation_hook(script: str) -> None:
    asked: list[ElicitationRequest] = []

    async def ask_user(request: ElicitationRequest) -> ElicitationResult:
        asked.append(request)
        return ElicitationResult("accept", {"colour": "teal"})

    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(config(script), elicitation=ask_user) as client,
    ):
        tools = {t.name: t for t in await client.list_tools()}
        assert await tools["ask"].ainvoke({}) == "accept: teal"
    assert [r.message for r in asked] == ["Which colour?"]


async def test_input_required_is_answered_by_the_sampling_hook(script: str) -> None:
    model = ScriptedChatModel([AiMessage("heron")])
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(config(script), sampling=model) as client,
    ):
        tools = {t.name: t for t in await client.list_tools()}
        assert await tools["ask_model"].ainvoke({}) == "the model said heron"
    assert model.requests[0].messages[-1].text == "One word?"  # type: ignore[union-attr]


async def test_progress_reaches_the_call_for_the_whole_task(script: str) -> None:
    seen: list[tuple[float, float | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        seen.append((done, total))

    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(script)) as client:
        await client.list_tools()
        result = await client.call_tool("count", {}, progress=progress)
        assert result.content[0].text == "counted"  # type: ignore[union-attr]
        for _ in range(100):  # reports are handed over as they arrive; let them land
            if len(seen) == 3:
                break
            await asyncio.sleep(0.02)
    assert sorted(seen) == [(1, 3), (2, 3), (3, 3)]


@pytest.mark.parametrize(("policy", "as_task"), [("when_required", False), ("when_allowed", True)])
async def test_optional_tools_are_tasks_only_when_allowed(
    script: str, policy: str, as_task: bool
) -> None:
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(config(script, task_calls=policy)) as client,
    ):
        tools = {t.name: t for t in await client.list_tools()}
        assert await tools["maybe"].ainvoke({}) == f"as a task: {str(as_task).lower()}"


async def test_task_calls_never_leaves_required_tools_out(
    script: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "toolweave.mcp")
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(config(script, task_calls="never")) as client,
    ):
        tools = {t.name: t for t in await client.list_tools()}
        assert set(tools) == {"maybe", "task_log"}
        assert await tools["maybe"].ainvoke({}) == "as a task: false"
    assert "'wait' requires a task-augmented call, and task_calls is 'never'" in caplog.text


async def test_required_tools_of_a_server_without_the_tasks_capability_are_left_out(
    script: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, "toolweave.mcp")
    cfg = config(script, env={"NO_TASKS_CAPABILITY": "1"})
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as client:
        tools = {t.name: t for t in await client.list_tools()}
        assert set(tools) == {"maybe", "task_log"}
    assert "does not declare tasks.requests.tools.call" in caplog.text


def test_sync_client_calls_a_task_tool(script: str) -> None:
    with SyncMcpClient(config(script)) as client:
        tools = {t.name: t for t in client.list_tools()}
        assert tools["wait"].invoke({"ms": 50, "text": "sync"}) == "sync"


@pytest.mark.parametrize(
    ("tool", "problem"),
    [("bad_create", "taskId"), ("bad_status", "exploded")],
)
async def test_malformed_task_answers_are_typed_errors(tool: str, problem: str) -> None:
    cfg = stdio_config(BROKEN, "task-liar", name="liar")
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg) as client:
        tools = {t.name: t for t in await client.list_tools()}
        with pytest.raises(McpError, match="returned an invalid result") as info:
            await tools[tool].ainvoke({})
        assert problem in info.value.message and info.value.code == 182301
        # the connection lives on
        assert {t.name for t in await client.list_tools()} == {"bad_create", "bad_status"}


class HttpServer:
    """ts_task_server.mjs over streamable HTTP on 127.0.0.1; `restart` keeps the port."""

    def __init__(self, script: str) -> None:
        self.port = free_port()
        self.argv = ["node", script, "http", str(self.port)]
        self.proc = self.start()
        self.config = McpServerConfig(
            server_name="tasks", params={"url": f"http://127.0.0.1:{self.port}/mcp"}
        )

    def start(self) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(self.argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_port(self.port, proc)
        return proc

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)

    def restart(self) -> None:
        self.stop()
        self.proc = self.start()


@pytest.fixture
def http_server(script: str) -> Iterator[HttpServer]:
    server = HttpServer(script)
    yield server
    server.stop()


async def test_a_plain_call_after_a_typescript_server_restart_opens_a_new_session(
    http_server: HttpServer,
) -> None:
    # A TypeScript-SDK server that lost the session answers 404 with JSON-RPC error -32001
    # "Session not found" (-32001 is also the timeout code): the session is re-opened and the
    # call, which never ran, sent again; it was reported as a timeout before.
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(http_server.config) as client:
        assert await task_log(client) == []
        await asyncio.to_thread(http_server.restart)
        assert await task_log(client) == []


async def test_a_task_is_not_sent_again_when_the_http_session_is_lost(
    http_server: HttpServer,
) -> None:
    # The server restarts while the task runs: polling finds the session gone. The call ran
    # (a task was created), so it is not re-sent on a new session, unlike a plain call that
    # never reached the server.
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(http_server.config) as client:
        tools = {t.name: t for t in await client.list_tools()}
        args = {"ms": 60_000, "text": "never", "poll": 3000}
        call = asyncio.create_task(tools["wait"].ainvoke(args, timeout=20))
        for _ in range(200):  # until the task exists on the server
            if await task_log(client):
                break
            await asyncio.sleep(0.05)
        await asyncio.to_thread(http_server.restart)
        with pytest.raises(McpError) as info:
            await call
        assert info.value.code == ErrorCode.MCP_CONNECTION_ERROR
        assert "not retried" in info.value.message
        assert await task_log(client) == []  # the new server never got the call


# hostile servers (tests/servers/mcp_broken_server.py task-storm) ------------------------------
def storm_config(**kw: Any) -> McpServerConfig:
    return stdio_config(BROKEN, "task-storm", name="storm", **kw)


async def tasks_seen(client: McpClient, count: int) -> list[str]:
    """The task methods the storm server received, once it has `count` of them."""
    for _ in range(200):
        result = await client.call_tool("seen", {})
        seen: list[str] = json.loads(result.content[0].text)  # type: ignore[union-attr]
        if len(seen) >= count:
            break
        await asyncio.sleep(0.05)
    return seen


async def test_a_flood_of_status_notifications_does_not_stretch_the_deadline() -> None:
    # Each call's task is flooded with notifications/tasks/status (working). On Python 3.11
    # asyncio.wait_for (the wait for the next notification) returned a notification that
    # raced the deadline's cancellation and dropped the cancellation: the call then ran
    # until the caller's own outer timeout. Several calls at once, with deadlines apart, so
    # the race is near certain before the fix.
    timeouts = [1 + i / 4 for i in range(6)]
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(storm_config()) as client:
        await client.list_tools()
        started = time.monotonic()
        async with asyncio.timeout(40):
            outcomes = await asyncio.gather(
                *(client.call_tool("storm", {}, timeout=t) for t in timeouts),
                return_exceptions=True,
            )
        took = time.monotonic() - started
        assert all(isinstance(o, McpTimeoutError) for o in outcomes), outcomes
        assert took < 20  # generous: the longest deadline is 2.25 s, the outer limit 40 s
        assert await tasks_seen(client, 6) == ["tasks/cancel"] * 6


@pytest.mark.parametrize("deadline", ["call_timeout", "caller"])
async def test_an_unanswered_tasks_cancel_does_not_delay_the_caller(
    deadline: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server never answers tasks/cancel. The caller used to wait for that answer (up to
    # the cancel's own bound, widened here to 60 s to make the wait plain); it is now sent
    # in the background, and the client's close stops it: no task outlives the client.
    monkeypatch.setattr(_tasks, "_CANCEL_TIMEOUT", 60.0)
    client = McpClient(storm_config(call_timeout=1 if deadline == "call_timeout" else 120))
    async with asyncio.timeout(TEST_TIMEOUT):
        async with client:
            await client.list_tools()
            started = time.monotonic()
            if deadline == "call_timeout":
                with pytest.raises(McpTimeoutError, match="did not finish within 1 s"):
                    await client.call_tool("deaf", {})
            else:
                with pytest.raises(TimeoutError):
                    async with asyncio.timeout(1):
                        await client.call_tool("deaf", {})
            assert time.monotonic() - started < 20  # generous; the cancel's bound is 60 s
            assert await tasks_seen(client, 1) == ["tasks/cancel"]
            started = time.monotonic()
        assert time.monotonic() - started < 20  # closing does not wait for the answer either
    assert asyncio.all_tasks() == {asyncio.current_task()}


async def test_a_deadline_holds_when_the_call_swallows_its_cancellation() -> None:
    # What asyncio.wait_for on 3.11 can do to a deadline: the first cancellation is caught
    # and dropped. The deadline cancels again until the call ends.
    async def swallowing() -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            pass
        await asyncio.sleep(30)
        return "too late"

    deadline = CallDeadline(0.05)
    started = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await swallowing()
    assert deadline.settle()  # the deadline's own cancellations, all taken back
    assert asyncio.current_task().cancelling() == 0  # type: ignore[union-attr]
    assert time.monotonic() - started < 10
