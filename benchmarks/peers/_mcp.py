"""W9: an MCP round trip over stdio, toolweave against the `mcp` SDK itself.

- W9.sdk (the baseline): the SDK's `ClientSession.call_tool` against the SDK's `MCPServer`
  (a session opened with `initialize`: the handshake-era protocol, 2025-11-25);
- W9.sdk26 (information): the same call on a 2026-07-28 connection (the SDK `Client`'s
  default negotiation), through the `Client`'s `ClientSession`: what the newer protocol
  itself costs per call;
- W9: toolweave's `McpTool.ainvoke` against the same server program (toolweave's client,
  default settings: the handshake over stdio; result converted to a toolweave value):
  what toolweave adds on the client side;
- W9.new (information): the same with ``McpServerConfig(protocol="newest")`` (2026-07-28),
  against W9.sdk26, the SDK on that protocol;
- W9.serve: the SDK's `ClientSession.call_tool` against `toolweave mcp serve` serving the
  same function: what toolweave adds on the server side (calls per second = 1 / time).

Every server is a subprocess of this process, started once; the calls are timed inside one
long-lived task that owns the SDK session (anyio's task groups must be left by the task that
entered them), so no extra hop is measured. Where the machine has two CPUs or more, the
servers run on CPUs of their own and this process on another, for every case alike: left to
the scheduler, a client and a server sharing a CPU or not (which stays so for the whole
run) moved one case against another by 10% from run to run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import os
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from ._common import Case

ROOT = Path(__file__).resolve().parents[2]
ARGS = {"key": "alpha", "limit": 3}


def _env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(ROOT), *sys.path[1:]]), "PATH": os.environ["PATH"]}


SDK_SERVER = [sys.executable, "-m", "benchmarks.peers.mcp_servers", "sdk"]
TOOLWEAVE_SERVER = [
    sys.executable,
    "-m",
    "toolweave",
    "mcp",
    "serve",
    "benchmarks.peers.mcp_servers:lookup_tool",
]


class _Holder:
    """Keeps a client open in one task of `loop` and times batches of calls there."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        opener: Callable[[], contextlib.AbstractAsyncContextManager[Callable[[], Awaitable[Any]]]],
    ) -> None:
        self.loop = loop
        self.requests: asyncio.Queue[tuple[int, asyncio.Future[int]]] = asyncio.Queue()
        self.ready: asyncio.Future[None] = loop.create_future()
        self.task = loop.create_task(self._main(opener))
        loop.run_until_complete(asyncio.wait_for(asyncio.shield(self.ready), 60))

    async def _main(self, opener: Any) -> None:
        try:
            async with opener() as call:
                await call()  # one call before timing: connects, warms up
                self.ready.set_result(None)
                while True:
                    n, done = await self.requests.get()
                    if n == 0:
                        done.set_result(0)
                        return
                    start = time.perf_counter_ns()
                    for _ in range(n):
                        await call()
                    done.set_result(time.perf_counter_ns() - start)
        except BaseException as e:
            if not self.ready.done():
                self.ready.set_exception(e)
            raise

    def run(self, n: int) -> int:
        done: asyncio.Future[int] = self.loop.create_future()
        self.requests.put_nowait((n, done))
        return self.loop.run_until_complete(done)

    def close(self) -> None:
        if not self.task.done():
            self.run(0)
            self.loop.run_until_complete(self.task)


@contextlib.asynccontextmanager
async def _sdk_client(command: list[str]) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    from mcp import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=command[0], args=command[1:], env=_env(), cwd=ROOT)
    async with (
        stdio_client(params, errlog=sys.stderr) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield _caller(session)


@contextlib.asynccontextmanager
async def _sdk_modern_client(command: list[str]) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters

    params = StdioServerParameters(command=command[0], args=command[1:], env=_env(), cwd=ROOT)
    async with Client(params) as client:
        assert client.protocol_version == "2026-07-28", client.protocol_version
        await client.list_tools()  # as toolweave does: the session learns the output schema
        yield _caller(client.session)


def _caller(session: Any) -> Callable[[], Awaitable[Any]]:
    """One W9 call through an SDK `ClientSession`, its answer checked."""

    async def call() -> Any:
        result = await session.call_tool("lookup", ARGS)
        assert not result.is_error and result.content[0].text == "alpha"
        return result

    return call


@contextlib.asynccontextmanager
async def _toolweave_client(
    command: list[str], protocol: str = "auto"
) -> AsyncIterator[Callable[[], Awaitable[Any]]]:
    from toolweave.mcp import McpClient, McpServerConfig

    config = McpServerConfig(
        server_name="bench",
        params={"command": command[0], "args": command[1:], "env": _env(), "cwd": str(ROOT)},
        protocol=protocol,  # type: ignore[arg-type]
    )
    async with McpClient(config, errlog=sys.stderr) as client:
        (lookup,) = await client.list_tools()

        async def call() -> Any:
            value = await lookup.ainvoke(ARGS)
            assert value == "alpha", value
            return value

        yield call


def cases(loop: asyncio.AbstractEventLoop, holders: list[_Holder]) -> list[Case]:
    """The W9 cases (servers started now; `holders` collects what to close at the end)."""
    plan = [
        (
            "W9.sdk",
            "mcp SDK: ClientSession.call_tool -> SDK MCPServer (stdio)",
            None,
            _sdk_client,
            SDK_SERVER,
        ),
        (
            "W9.sdk26",
            "mcp SDK: ClientSession.call_tool on a 2026-07-28 connection (Client default)",
            "W9.sdk",
            _sdk_modern_client,
            SDK_SERVER,
        ),
        (
            "W9",
            "toolweave McpTool.ainvoke -> the same SDK server (stdio)",
            "W9.sdk",
            _toolweave_client,
            SDK_SERVER,
        ),
        (
            "W9.new",
            "toolweave McpTool.ainvoke with McpServerConfig(protocol='newest'): 2026-07-28",
            "W9.sdk26",
            functools.partial(_toolweave_client, protocol="newest"),
            SDK_SERVER,
        ),
        (
            "W9.serve",
            "SDK ClientSession.call_tool -> toolweave mcp serve (stdio)",
            "W9.sdk",
            _sdk_client,
            TOOLWEAVE_SERVER,
        ),
    ]
    out: list[Case] = []
    client_cpus, server_cpus = _placement()
    if server_cpus:
        os.sched_setaffinity(0, server_cpus)  # the servers started below inherit it
    try:
        for id_, label, baseline, client, command in plan:
            holder = _Holder(loop, lambda client=client, command=command: client(command))
            holders.append(holder)
            out.append(Case(id_, label, holder.run, baseline, max_number=200, rounds=60))
    finally:
        if client_cpus:
            os.sched_setaffinity(0, client_cpus)
    return out


def _placement() -> tuple[set[int], set[int]]:
    """(this process's CPUs, the servers' CPUs); empty sets where that cannot be chosen."""
    if not hasattr(os, "sched_getaffinity"):
        return set(), set()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        return set(), set()
    return {cpus[0]}, set(cpus[1:])
