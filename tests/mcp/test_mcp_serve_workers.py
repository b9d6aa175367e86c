"""`toolweave mcp serve --transport http --workers N`: a stateless server in N worker
processes (uvicorn's supervisor), with the rate limit's counters in a store they share.

Each test starts the command as a subprocess on loopback (in a session of its own, so
whatever it started is killed at the end even when a test fails) and finds its workers
through /proc."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import mcp_types
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import SERVERS, TEST_TIMEOUT, free_port, wait_for_port

from toolweave import tool
from toolweave.mcp import McpClient, McpServerConfig, build_mcp_server
from toolweave.mcp.middleware import RATE_LIMITED, CachingMiddleware
from toolweave.mcp.store import MemoryStore, SqliteStore

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/stat").exists(), reason="finds the workers through /proc (Linux)"
)

TOOLS = str(SERVERS / "mcp_worker_tools.py")
BOUND = 40  # rounds of calls at most, before a test gives up on reaching every worker


def _parents() -> dict[int, int]:
    found: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        found[int(entry.name)] = int(stat.rpartition(")")[2].split()[1])
    return found


def descendants(pid: int) -> set[int]:
    """Every live process below `pid`."""
    parents = _parents()
    below: set[int] = set()
    todo = [pid]
    while todo:
        p = todo.pop()
        for child, parent in parents.items():
            if parent == p and child not in below:
                below.add(child)
                todo.append(child)
    return below


def running(pid: int) -> bool:
    """Whether `pid` is a process that has not exited (a zombie has)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


class Served:
    """`toolweave mcp serve ... --workers N` on a free port."""

    def __init__(
        self, tmp: Path, *extra: str, workers: int = 2, argv: list[str] | None = None
    ) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.log = tmp / f"serve-{self.port}.log"
        if argv is None:
            argv = [sys.executable, "-m", "toolweave", "mcp", "serve", TOOLS, "--transport"]
            argv += ["http", "--workers", str(workers), *extra, "--port"]
        argv = [*argv, str(self.port)]
        with self.log.open("wb") as out:
            self.proc = subprocess.Popen(
                argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        self.expected = workers

    def wait_ready(self) -> None:
        """Until the port is bound and every worker process is up (bounded)."""
        wait_for_port(self.port, self.proc, timeout=60)  # type: ignore[arg-type]
        deadline = time.monotonic() + 60
        while len(self.workers()) < self.expected:
            assert time.monotonic() < deadline, self.log.read_text()
            time.sleep(0.1)

    def workers(self) -> set[int]:
        """The worker processes (not the multiprocessing resource tracker)."""
        return {p for p in descendants(self.proc.pid) if "spawn_main" in _cmdline(p)}

    def stop(self) -> None:
        """Stop the supervisor, then make sure nothing of its session is left."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever is left of the session
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(10)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served(tmp_path_factory.mktemp("workers"))
    try:
        served.wait_ready()
        yield served
    finally:
        served.stop()


@pytest.fixture
def limited(tmp_path: Path) -> Iterator[Served]:
    store = tmp_path / "shared.db"
    served = Served(tmp_path, "--rate-limit", "6/hour", "--store", f"sqlite:{store}")
    try:
        served.wait_ready()
        yield served
    finally:
        served.stop()


def pinned(url: str, **kw: Any) -> Client:
    """An SDK client over one HTTP connection (kept alive: it stays with one worker)."""
    http = httpx2.AsyncClient(limits=httpx2.Limits(max_connections=1))
    return Client(streamable_http_client(url, http_client=http), **kw)


def text(result: mcp_types.CallToolResult) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


def text_of(read: mcp_types.ReadResourceResult) -> str:
    return "".join(getattr(c, "text", "") for c in read.contents)


async def test_calls_from_our_client_and_the_sdks_land_on_every_worker(server: Served) -> None:
    workers = server.workers()
    assert len(workers) == 2
    cfg = McpServerConfig(server_name="w", params={"url": server.url}, protocol="newest")

    async def ours() -> set[int]:
        async with McpClient(cfg) as c:
            (tool,) = [t for t in await c.list_tools() if t.name == "whoami"]
            return {int(await tool.ainvoke({})) for _ in range(3)}

    async def sdks() -> set[int]:
        async with Client(server.url) as c:  # the newest protocol: sessionless
            return {int(text(await c.call_tool("whoami", {}))) for _ in range(3)}

    async with asyncio.timeout(TEST_TIMEOUT):
        for client in (ours, sdks):
            seen: set[int] = set()
            for _ in range(BOUND):  # concurrent clients: several connections, both workers
                for found in await asyncio.gather(*(client() for _ in range(4))):
                    seen |= found
                if seen == workers:
                    break
            assert seen == workers, (client.__name__, seen, workers)
        async with httpx2.AsyncClient() as http:
            health = await http.get(f"http://127.0.0.1:{server.port}/healthz")
        assert (health.status_code, health.text) == (200, "ok")


async def test_a_2025_client_is_served_without_a_session(server: Served) -> None:
    """The choice: a client of the initialize handshake is served, statelessly: no
    Mcp-Session-Id, every request on its own (any worker answers it), and a tool that
    asks the client something is told clearly why it cannot."""
    session_ids: list[str] = []

    async def seen(response: httpx2.Response) -> None:
        if "mcp-session-id" in response.headers:
            session_ids.append(response.headers["mcp-session-id"])

    async def elicit(ctx: object, params: object) -> mcp_types.ElicitResult:
        return mcp_types.ElicitResult(action="accept", content={"name": "old"})

    async with asyncio.timeout(TEST_TIMEOUT):
        http = httpx2.AsyncClient(event_hooks={"response": [seen]})
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, mode="legacy", elicitation_callback=elicit) as c:
            assert c.protocol_version not in (None, "2026-07-28")
            pids = {int(text(await c.call_tool("whoami", {}))) for _ in range(4)}
            asked = await c.call_tool("ask", {})
        await http.aclose()
        assert pids <= server.workers()
        assert session_ids == []
        assert asked.is_error
        assert "stateless" in text(asked) and "2026-07-28" in text(asked)
        # our client with the handshake, too
        cfg = McpServerConfig(server_name="w", params={"url": server.url}, protocol="handshake")
        async with McpClient(cfg) as ours:
            (tool,) = [t for t in await ours.list_tools() if t.name == "whoami"]
            assert int(await tool.ainvoke({})) in server.workers()


async def test_the_rate_limit_holds_across_workers(limited: Served) -> None:
    """6 calls per hour for the client (sessionless: its address), counted in the SQLite
    store both workers share: once one worker has allowed 6, the other refuses the 7th."""
    workers = limited.workers()
    async with asyncio.timeout(TEST_TIMEOUT), contextlib.AsyncExitStack() as stack:
        # one connection to each worker, found by a resource read (not rate-limited)
        clients: dict[int, Client] = {}
        for _ in range(BOUND):
            c = await stack.enter_async_context(pinned(limited.url))
            pid = int(text_of(await c.read_resource("pid://worker")))
            clients.setdefault(pid, c)
            if set(clients) == workers:
                break
        assert set(clients) == workers
        (first_pid, first), (second_pid, second) = clients.items()
        allowed = 0
        for _ in range(20):
            try:
                result = await first.call_tool("whoami", {})
            except MCPError as e:
                assert e.code == RATE_LIMITED
                assert "retryAfterSeconds" in (e.error.data or {})
                break
            assert int(text(result)) == first_pid
            allowed += 1
        assert allowed == 6
        with pytest.raises(MCPError) as refused:
            await second.call_tool("whoami", {})
        assert refused.value.code == RATE_LIMITED
        # still the other worker, which has counted none of the six itself
        assert int(text_of(await second.read_resource("pid://worker"))) == second_pid


class _Router(httpx2.AsyncBaseTransport):
    """Two HTTP connections (one each): tool calls alternate between them, the rest goes
    through the one `pin` names."""

    def __init__(self) -> None:
        self.lanes = [self._lane(), self._lane()]
        self.pin = 0
        self.calls: list[int] = []
        self._turn = 0

    @staticmethod
    def _lane() -> httpx2.AsyncHTTPTransport:
        return httpx2.AsyncHTTPTransport(limits=httpx2.Limits(max_connections=1))

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        lane = self.pin
        if request.method == "POST" and b'"tools/call"' in request.content:
            lane, self._turn = self._turn, 1 - self._turn
            self.calls.append(lane)
        return await self.lanes[lane].handle_async_request(request)

    async def aclose(self) -> None:
        for lane in self.lanes:
            await lane.aclose()


async def test_an_input_required_round_is_answered_by_the_other_worker(server: Served) -> None:
    """2026-07-28: the tool's question goes out from one worker in a sealed request state;
    the retry with the answer reaches the other, which opens the state with the key the
    supervisor gave both."""
    workers = server.workers()

    async def elicit(ctx: object, params: object) -> mcp_types.ElicitResult:
        return mcp_types.ElicitResult(action="accept", content={"name": "ada"})

    router = _Router()
    async with asyncio.timeout(TEST_TIMEOUT), httpx2.AsyncClient(transport=router) as http:
        transport = streamable_http_client(server.url, http_client=http)
        async with Client(transport, elicitation_callback=elicit) as c:

            async def pid_of(lane: int) -> int:
                router.pin = lane
                return int(text_of(await c.read_resource("pid://worker")))

            for _ in range(BOUND):  # the second connection to the other worker
                if await pid_of(1) != await pid_of(0):
                    break
                await router.lanes[1].aclose()
                router.lanes[1] = router._lane()
            lanes = [await pid_of(0), await pid_of(1)]
            assert set(lanes) == workers
            result = await c.call_tool("ask", {})
            assert (text(result), result.is_error) == ("hello ada", False)
            assert router.calls == [0, 1]  # asked on one worker, answered on the other
            assert [await pid_of(0), await pid_of(1)] == lanes


def test_stopping_the_server_stops_every_worker(tmp_path: Path) -> None:
    served = Served(tmp_path)
    try:
        served.wait_ready()
        workers = served.workers()
        everything = descendants(served.proc.pid)
        assert len(workers) == 2 and workers <= everything

        async def answered() -> set[int]:
            async with Client(served.url) as c:
                return {int(text(await c.call_tool("whoami", {})))}

        assert asyncio.run(answered()) <= workers
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(60) == 0
        deadline = time.monotonic() + 30
        while any(running(p) for p in everything) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in everything if running(p)]
    finally:
        served.stop()


async def test_stores_count_and_expire(tmp_path: Path) -> None:
    for store in (MemoryStore(), SqliteStore(tmp_path / "store.db")):
        assert [await store.take("k", rate=1, per=3600, burst=2) for _ in range(2)] == [0, 0]
        assert await store.take("k", rate=1, per=3600, burst=2) > 3000
        assert await store.take("other", rate=1, per=3600, burst=2) == 0
        await store.put("v", "kept", 3600)
        await store.put("gone", "x", -1)
        assert (await store.get("v"), await store.get("gone"), await store.get("no")) == (
            "kept",
            None,
            None,
        )


async def test_two_servers_share_cached_results_through_the_store(tmp_path: Path) -> None:
    """Two servers (as two workers) with caches over one SQLite file: a result computed by
    one answers the same call on the other."""
    runs: list[str] = []

    @tool(idempotent=True)
    def slow_square(n: int) -> int:
        """n squared."""
        runs.append(f"square {n}")
        return n * n

    store = SqliteStore(tmp_path / "cache.db")
    caches = [CachingMiddleware(ttl=3600, shared=True, store=store) for _ in range(2)]
    servers = [build_mcp_server([slow_square], middleware=[cache]) for cache in caches]
    async with asyncio.timeout(TEST_TIMEOUT):
        answers = []
        for server in [*servers, servers[0]]:
            async with Client(server) as c:
                answers.append(text(await c.call_tool("slow_square", {"n": 7})))
        async with Client(servers[1]) as c:
            answers.append(text(await c.call_tool("slow_square", {"n": 8})))
    assert answers == ["49", "49", "49", "64"]
    assert runs == ["square 7", "square 8"]
    assert [(c.hits, c.misses) for c in caches] == [(1, 1), (1, 1)]


def test_workers_are_for_http(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolweave", "mcp", "serve", TOOLS, "--workers", "2"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert "--transport http" in done.stderr


def test_serve_mcp_workers_serves_an_app_of_mcp_http_app(tmp_path: Path) -> None:
    """The Python API: ``serve_mcp_workers("mcp_worker_app:app", workers=2)``."""
    served = Served(tmp_path, argv=[sys.executable, str(SERVERS / "mcp_worker_app.py")])
    try:
        served.wait_ready()
        workers = served.workers()
        cfg = McpServerConfig(server_name="w", params={"url": served.url}, protocol="newest")

        async def calls() -> set[int]:
            async with McpClient(cfg) as c:
                (tool,) = await c.list_tools()
                return {int(await tool.ainvoke({})) for _ in range(3)}

        async def until_both() -> set[int]:
            seen: set[int] = set()
            async with asyncio.timeout(TEST_TIMEOUT):
                for _ in range(BOUND):
                    for found in await asyncio.gather(*(calls() for _ in range(4))):
                        seen |= found
                    if seen == workers:
                        break
            return seen

        assert asyncio.run(until_both()) == workers
        everything = descendants(served.proc.pid)
        served.proc.send_signal(signal.SIGTERM)
        assert served.proc.wait(60) == 0
        deadline = time.monotonic() + 30
        while any(running(p) for p in everything) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in everything if running(p)]
    finally:
        served.stop()


def test_workers_of_a_killed_supervisor_stop_themselves(tmp_path: Path) -> None:
    """SIGKILL gives uvicorn's supervisor no chance to stop its workers: each stops itself
    when its parent is gone (Linux's parent-death signal), so the port is free again."""
    if not sys.platform.startswith("linux"):
        pytest.skip("the parent-death signal is Linux's")
    served = Served(tmp_path)
    try:
        served.wait_ready()
        workers = served.workers()
        assert len(workers) == 2
        served.proc.kill()
        served.proc.wait(30)
        deadline = time.monotonic() + 30
        while any(running(p) for p in workers) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [p for p in workers if running(p)]
    finally:
        served.stop()


async def test_one_stateless_process_issues_no_session(tmp_path: Path) -> None:
    """``--stateless`` without ``--workers``: the same stateless server in one process."""
    argv = [sys.executable, "-m", "toolweave", "mcp", "serve", TOOLS, "--transport", "http"]
    served = Served(tmp_path, argv=[*argv, "--stateless", "--port"])
    session_ids: list[str] = []

    async def seen(response: httpx2.Response) -> None:
        session_ids.extend(v for k, v in response.headers.items() if k == "mcp-session-id")

    try:
        wait_for_port(served.port, served.proc)  # type: ignore[arg-type]
        async with asyncio.timeout(TEST_TIMEOUT):
            async with httpx2.AsyncClient(event_hooks={"response": [seen]}) as http:
                transport = streamable_http_client(served.url, http_client=http)
                async with Client(transport, mode="legacy") as c:
                    pid = int(text(await c.call_tool("whoami", {})))
        assert pid == served.proc.pid
        assert session_ids == []
    finally:
        served.stop()
