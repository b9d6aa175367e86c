"""`McpClient` (async) and `SyncMcpClient`: one connection to one MCP server.

The connection lives on one event loop, its home (see `_loop.py`), so the anyio task groups
of the SDK are always entered and left by one owner task: the application's loop for an
async client connected from it (calls made there run inline, no thread hop), a private
loop thread for a sync client. The tools it lists can be called from any event loop or
thread, sync or async; work for an async client's loop is handed to it while it runs.

Failure handling:

- connecting is bounded by `connect_timeout`; a server that exits at start, or writes
  something that is not JSON-RPC, fails the connect at once with `McpError` (182302);
- a call is bounded by its timeout (card, per call, or `call_timeout`); on expiry, or when
  the caller is cancelled, the SDK sends ``notifications/cancelled`` to the server;
- a connection that breaks during a call fails that call with `McpError` (182302; the call is
  not retried, tools need not be idempotent) and the next call reconnects, with up to
  `max_reconnect_attempts` attempts; an HTTP session the server no longer knows
  ("Session terminated") is re-opened and the call re-sent, since it never ran.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import sys
import threading
import warnings
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Mapping
from typing import Any, Literal, TextIO, TypeVar

import anyio
import httpx2
import mcp_types
import pydantic
from mcp.client.client import Client
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from .._utils.sync import in_sync_bridge
from ..callbacks.events import ToolCallEvents as E
from ..callbacks.framework import CallbackFramework, callback_framework
from ..errors import ErrorCode, McpError, ToolTimeoutError
from ._deadline import CallDeadline
from ._errlog import errlog_file
from ._listing import McpToolList, McpToolSource
from ._loop import CallerLoop, Home, LoopThread
from ._secrets import McpSecrets
from ._session import ProgressCallback, is_session_lost
from ._stdio_transport import MessageTooLargeError, stdio_transport
from ._tasks import TaskCalls
from .config import McpServerConfig
from .hooks import ElicitationHook, LogHook, McpClientHooks, RootsHook, SamplingHook
from .tool import McpTool, McpToolCard

__all__ = ["McpAuthError", "McpClient", "McpTimeoutError", "SyncMcpClient"]

log = logging.getLogger("toolweave.mcp")

T = TypeVar("T")
ConnectMode = Literal["legacy", "auto"]
"""How the SDK `Client` connects: the ``initialize`` handshake, or its probe for the newest."""

_MAX_PAGES = 100
_CLIENT_INFO = mcp_types.Implementation(name="toolweave", version=__version__)
_CLOSE_TIMEOUT = 10.0
_CALL_GRACE = 10.0
"""Extra time a caller waits past the SDK's own timer before giving up on its own."""


class McpTimeoutError(McpError, ToolTimeoutError):
    """An MCP request timed out; a cancellation was sent to the server."""

    default_code = ErrorCode.MCP_TIMEOUT


class McpAuthError(McpError):
    """An HTTP MCP server refused us (401 / 403); `status` is the HTTP status."""

    default_code = ErrorCode.MCP_AUTH_ERROR

    @property
    def status(self) -> int:
        """The HTTP status (401 or 403)."""
        return int(self.details.get("status", 0))


def _connection_error(
    config: McpServerConfig, message: str, cause: BaseException | None = None
) -> McpError:
    return McpError(
        f"{config.describe()}: {message}",
        code=ErrorCode.MCP_CONNECTION_ERROR,
        cause=cause,
        details={"server_name": config.server_name, "server_id": config.server_id},
    )


def _leaf_errors(exc: BaseException) -> list[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        out: list[BaseException] = []
        for e in exc.exceptions:
            out.extend(_leaf_errors(e))
        return out
    return [exc]


def _describe_error(exc: BaseException) -> str:
    leaves = [
        e
        for e in _leaf_errors(exc)
        if not isinstance(e, (asyncio.CancelledError, anyio.get_cancelled_exc_class()))
    ] or [exc]
    parts = []
    for e in leaves[:3]:
        text = str(e).strip()
        parts.append(f"{type(e).__name__}: {text}" if text else type(e).__name__)
    return "; ".join(parts)


_CACHEABLE_KEYS = ("tools", "resources", "resourceTemplates", "prompts", "contents")


def _lenient_result(result: Any) -> None:
    """A 2026-07-28 result read as the spec allows: an absent ``resultType`` is
    ``"complete"`` (servers written before it existed omit it, and so do some that
    announce 2026-07-28), and a listing or resource read without caching directives is
    immediately stale and private (``ttlMs`` 0, ``cacheScope`` "private", the strictest
    reading). The SDK's 2026-07-28 result check would refuse the whole result."""
    if not isinstance(result, dict):
        return
    if "resultType" not in result:
        result["resultType"] = "complete"
    if any(k in result for k in _CACHEABLE_KEYS):
        result.setdefault("ttlMs", 0)
        result.setdefault("cacheScope", "private")


class _WatchedReadStream:
    """Wraps the transport's read stream to see end of stream and unparseable messages."""

    def __init__(self, inner: Any, conn: _Connection) -> None:
        self._inner = inner
        self._conn = conn

    def __getattr__(self, name: str) -> Any:  # last_context and friends
        return getattr(self._inner, name)

    def _seen(self, item: Any) -> Any:
        if isinstance(item, Exception):
            self._conn.bad_message(item)
            return item
        message = getattr(item, "message", None)
        if self._conn.modern and isinstance(message, mcp_types.JSONRPCResponse):
            _lenient_result(message.result)
        if self._conn.tasks.watching:
            self._conn.tasks.seen(message)
        return item

    async def receive(self) -> Any:
        try:
            return self._seen(await self._inner.receive())
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._conn.ended("the server closed the connection")
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _WatchedReadStream:
        return self

    async def __anext__(self) -> Any:
        try:
            return self._seen(await self._inner.__anext__())
        except StopAsyncIteration:
            self._conn.ended("the server closed the connection")
            raise

    async def __aenter__(self) -> _WatchedReadStream:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc: Any) -> bool | None:
        result: bool | None = await self._inner.__aexit__(*exc)
        return result


def _why(error: Exception) -> str:
    """The first reason `error` gives, short (a pydantic error's first line names only the
    model; its first error says what was wrong)."""
    if isinstance(error, pydantic.ValidationError) and error.errors():
        first = error.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        text = f"{where}: {first['msg']}" if where else first["msg"]
    else:
        lines = str(error).strip().splitlines()
        text = lines[0] if lines else type(error).__name__
    return text[:200]


class _Connection:
    """One live SDK `Client`, owned by one task on the home loop."""

    def __init__(
        self,
        config: McpServerConfig,
        errlog: TextIO,
        hooks: McpClientHooks,
        auth: httpx2.Auth | None = None,
        tasks: TaskCalls | None = None,
        mode: ConnectMode = "auto",
        secrets: McpSecrets | None = None,
    ) -> None:
        self.config = config
        self.errlog = errlog
        self.hooks = hooks
        self.auth = auth
        self.secrets = secrets
        self.tasks = tasks if tasks is not None else TaskCalls(config)
        self.mode = mode
        """The SDK's connect mode: ``"legacy"`` (the handshake) or ``"auto"`` (probe)."""
        self.handshake_refused = False
        """The server answered ``initialize`` with an error (it may speak only 2026-07-28)."""
        self.refused: tuple[int, str] | None = None
        """The last 401/403 the server answered: (status, WWW-Authenticate)."""
        self.client: Client | None = None
        self.modern = False
        """Connected with a 2026-07-28 (or later) protocol: results carry ``resultType``."""
        self.ready: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self.stop = asyncio.Event()
        self.done = asyncio.Event()
        self.scope: anyio.CancelScope | None = None
        self.problem: str | None = None
        self.alive = True
        self.task: asyncio.Task[None] | None = None

    # signals from the transport ----------------------------------------------------------
    def bad_message(self, error: Exception) -> None:
        if isinstance(error, MessageTooLargeError):
            reason = f"the server sent {error}"
        else:
            reason = f"the server sent a message that is not valid JSON-RPC ({_why(error)})"
        log.warning("%s: %s", self.config.describe(), reason)
        # A stdio server that writes anything but JSON-RPC to stdout is broken, and its
        # pending requests would never be answered: fail the connection. Over HTTP a bad
        # response already fails only its request.
        if not self.ready.done() or self.config.client_type == "stdio":
            self.fail(reason)

    def ended(self, reason: str) -> None:
        if self.problem is None:
            self.problem = reason
        self.alive = False
        self.stop.set()

    def fail(self, reason: str) -> None:
        if self.problem is None:
            self.problem = reason
        self.alive = False
        if not self.ready.done() and self.scope is not None:
            self.scope.cancel()
        self.stop.set()

    def call_tool(
        self, name: str, arguments: dict[str, Any], progress: ProgressCallback | None
    ) -> Awaitable[mcp_types.CallToolResult]:
        """``tools/call`` on this connection, without a timer of the SDK's. On a handshake
        connection straight through the SDK's session: the `Client` wrapper only adds what
        2026-07-28 has (input-required rounds, header-mismatch retries, result claims)."""
        client = self.client
        assert client is not None
        if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
            return client.call_tool(name, arguments, progress_callback=progress)
        return client.session.call_tool(name, arguments, progress_callback=progress)

    @property
    def usable(self) -> bool:
        return self.alive and self.client is not None and not self.done.is_set()

    # lifecycle ----------------------------------------------------------------------------
    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        cfg = self.config
        async with contextlib.AsyncExitStack() as stack:
            if cfg.client_type == "stdio":
                params = StdioServerParameters(**cfg.stdio_parameters())
                errlog = stack.enter_context(errlog_file(self.errlog))
                read, write = await stack.enter_async_context(
                    stdio_transport(params, errlog, cfg.max_message_bytes)
                )
            elif cfg.client_type == "streamable-http":
                # Redirects stay off: the SDK's transport follows same-origin ones itself.
                http = httpx2.AsyncClient(
                    headers=cfg.headers or None,
                    timeout=httpx2.Timeout(cfg.connect_timeout, read=300.0),
                    auth=self.auth,
                    event_hooks=self._event_hooks(),
                )
                await stack.enter_async_context(http)
                read, write = await stack.enter_async_context(
                    streamable_http_client(
                        cfg.url, http_client=http, max_sse_event_size=cfg.max_message_bytes
                    )
                )
            else:
                read, write = await stack.enter_async_context(
                    sse_client(
                        cfg.url,
                        headers=cfg.headers or None,
                        timeout=cfg.connect_timeout,
                        auth=self.auth,
                        httpx_client_factory=self._sse_http_client,
                    )
                )
            yield _WatchedReadStream(read, self), write

    def _event_hooks(self) -> dict[str, list[Any]]:
        hooks: dict[str, list[Any]] = {"response": [self._seen_response]}
        if self.auth is not None and self.secrets is not None:
            hooks["request"] = [self._seen_request]  # the tokens `auth` adds, masked too
        return hooks

    async def _seen_request(self, request: httpx2.Request) -> None:
        if self.secrets is not None:
            self.secrets.observe(request)

    async def _seen_response(self, response: httpx2.Response) -> None:
        if response.status_code in (401, 403):
            self.refused = (response.status_code, response.headers.get("www-authenticate", ""))
            if self.auth is None and not self.ready.done():
                # Nothing here can answer the challenge: fail now, not at connect_timeout.
                self.fail(f"the server answered {response.status_code}")

    def _sse_http_client(
        self,
        headers: dict[str, str] | None = None,
        timeout: httpx2.Timeout | None = None,
        auth: httpx2.Auth | None = None,
    ) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(
            headers=headers,
            timeout=timeout or httpx2.Timeout(self.config.connect_timeout, read=300.0),
            auth=auth,
            event_hooks=self._event_hooks(),
        )

    def connect_error(self, message: str, cause: BaseException | None) -> McpError:
        """`McpAuthError` when the server refused us, else the connection error."""
        if self.refused is None:
            return _connection_error(self.config, f"could not connect: {message}", cause)
        status, challenge = self.refused
        what = "401 Unauthorized" if status == 401 else "403 Forbidden"
        hint = (
            "the configured credentials were not accepted"
            if self.auth is not None or self.config.auth_headers
            else "pass auth= (e.g. the SDK's OAuthClientProvider) to McpClient, or put a "
            "token in McpServerConfig.auth_headers"
        )
        text = f"{self.config.describe()}: the server answered {what}; {hint}"
        if self.auth is not None:
            text += f" ({message})"
        if challenge:
            text += f" (WWW-Authenticate: {challenge[:300]})"
        return McpAuthError(
            text,
            cause=cause,
            details={
                "server_name": self.config.server_name,
                "status": status,
                "www_authenticate": challenge,
            },
        )

    async def own(self) -> None:
        """The owner task: connect, publish the client, wait for `stop`, disconnect."""
        cfg = self.config
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + cfg.connect_timeout) as scope:
                self.scope = scope
                async with Client(
                    self._transport(),  # type: ignore[arg-type]
                    cache=None,
                    client_info=_CLIENT_INFO,
                    message_handler=self._on_message,
                    mode=self.mode,
                    **self.hooks.sdk_callbacks(cfg),
                ) as client:
                    self.client = client
                    self.modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
                    scope.deadline = math.inf
                    if not self.ready.done():
                        self.ready.set_result(None)
                    async with anyio.create_task_group() as listeners:
                        if _announces_tool_changes(client):
                            listeners.start_soon(self._listen_for_tool_changes, client)
                        await self.stop.wait()
                        listeners.cancel_scope.cancel()
            if not self.ready.done():
                if self.problem is not None:
                    msg = self.problem
                elif scope.cancelled_caught:
                    msg = f"no answer within the connect timeout ({cfg.connect_timeout:g} s)"
                else:
                    msg = "the connection closed during the handshake"
                self.ready.set_exception(self.connect_error(msg, None))
        except BaseException as e:
            if not self.ready.done():
                msg = self.problem or _describe_error(e)
                if isinstance(e, MCPError) and e.code == mcp_types.CONNECTION_CLOSED:
                    msg = self.problem or "the server closed the connection during the handshake"
                error = self.connect_error(msg, e)
                if self.mode == "legacy" and self.refused is None and _refuses_handshake(e):
                    error.details["handshake_refused"] = True
                self.ready.set_exception(error)
            else:
                self.problem = self.problem or _describe_error(e)
                log.debug("%s: connection ended: %s", cfg.describe(), self.problem)
            if isinstance(e, (KeyboardInterrupt, SystemExit)):
                raise
        finally:
            self.alive = False
            self.client = None
            self.done.set()

    async def _listen_for_tool_changes(self, client: Client) -> None:
        """On a 2026-07-28 connection a server announces changes only on a
        ``subscriptions/listen`` stream the client opens; its events also reach
        `_on_message`, which handles them, so here they are only drained."""
        try:
            async with client.listen(tools_list_changed=True) as subscription:
                async for _ in subscription:
                    pass
        except Exception as e:  # the tools still work; only their changes go unseen
            log.info("%s: no tools/list_changed events: %s", self.config.describe(), e)

    async def _on_message(self, message: Any) -> None:
        note = getattr(message, "root", message)
        if isinstance(note, mcp_types.ToolListChangedNotification):
            log.info("%s: the server's tool list changed", self.config.describe())
            await self.hooks.tools_changed()
        elif isinstance(note, mcp_types.ResourceListChangedNotification):
            await self.hooks.list_changed("resources")
        elif isinstance(note, mcp_types.PromptListChangedNotification):
            await self.hooks.list_changed("prompts")
        elif isinstance(note, mcp_types.ResourceUpdatedNotification):
            await self.hooks.resource_updated(str(note.params.uri))

    async def close(self) -> None:
        self.alive = False
        self.stop.set()
        if self.task is None:
            return
        try:
            await asyncio.wait_for(asyncio.shield(self.done.wait()), _CLOSE_TIMEOUT)
        except TimeoutError:
            self.task.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(self.task, _CLOSE_TIMEOUT)


class _Core:
    """State shared by `McpClient`, `SyncMcpClient` and their tools. Coroutine methods whose
    name starts with ``_do_`` run on the connection's home loop."""

    def __init__(
        self,
        config: McpServerConfig,
        errlog: TextIO | None,
        callbacks: CallbackFramework | None = None,
        hooks: McpClientHooks | None = None,
        auth: httpx2.Auth | None = None,
    ) -> None:
        self.config = config
        self.callbacks = callbacks
        self.errlog = errlog if errlog is not None else sys.stderr
        self.hooks = hooks or McpClientHooks()
        self.auth = auth
        self.tasks = TaskCalls(config)
        self.secrets = McpSecrets(config, auth)
        """The credentials this client sends: masked in every error leaving it."""
        self._home: Home | None = None
        self._home_lock = threading.Lock()
        self._conn: _Connection | None = None
        self._lock: asyncio.Lock | None = None
        self._connected_once = False
        self._handshake_refused = False
        self.closed = False

    # the home loop -----------------------------------------------------------------------------
    def _home_for(self, *, adopt: bool) -> Home:
        """The home that serves this caller. A client without one (or whose loop closed or
        stopped running, taking the connection with it) gets a new home: the caller's loop
        when `adopt` and the caller is async code (not a sync face's bridge loop), else a
        private loop thread."""
        home = self._home
        if home is not None and home.here():
            return home
        with self._home_lock:
            if self.closed:
                raise _connection_error(self.config, "the client is closed")
            home = self._home
            if home is not None and home.alive() and (home.serving() or home.here()):
                if home.blocked():
                    raise _connection_error(
                        self.config,
                        "a blocking call (invoke, a sync API) was made from a coroutine on the "
                        "event loop this client's connection runs on, which would wait forever; "
                        "await the async API (ainvoke) there, or call it from another thread",
                    )
                return home
            if home is not None:
                self._abandon(home, "the client moved to another loop")
            running = asyncio._get_running_loop()
            if adopt and running is not None and not in_sync_bridge():
                home = CallerLoop(running)
            else:
                home = LoopThread(f"toolweave-mcp-{self.config.server_name}")
            self._home = home
            return home

    def _abandon(self, home: Home, reason: str) -> None:
        """Forget a home that cannot serve calls any more (closed, or not running): its
        connection is told to close whenever that loop runs again."""
        conn, self._conn, self._lock = self._conn, None, None
        if conn is not None and not home.loop.is_closed():
            log.info("%s: %s (its event loop is not running)", self.config.describe(), reason)
            with contextlib.suppress(RuntimeError):
                home.loop.call_soon_threadsafe(conn.fail, reason)
        home.stop()

    async def run(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            home = self._home_for(adopt=True)
        except BaseException:
            coro.close()
            raise
        try:
            return await home.run(coro)
        except BaseException as e:
            self.secrets.scrub(e)  # the one boundary errors leave the client by
            raise

    def run_sync(self, coro: Coroutine[Any, Any, T]) -> T:
        try:
            home = self._home_for(adopt=False)
        except BaseException:
            coro.close()
            raise
        try:
            return home.run_sync(coro)
        except BaseException as e:
            self.secrets.scrub(e)
            raise

    def mask(self, text: str) -> str:
        """`text` with this client's credentials masked (an error result for the model)."""
        return self.secrets.mask(text)

    # connection management (home loop) ----------------------------------------------------------
    async def _authorized_config(self) -> McpServerConfig:
        """The configuration of one new HTTP connection: `tool_auth` fires on every connect
        and reconnect (so tokens can rotate), and the headers and query parameters its
        callbacks return go over `auth_headers` / `auth_query_params`."""
        cfg = self.config
        cb = self.callbacks if self.callbacks is not None else callback_framework
        if cfg.client_type == "stdio" or not cb.has(E.TOOL_AUTH):
            return cfg
        headers, query = dict(cfg.auth_headers), dict(cfg.auth_query_params)
        results = await cb.trigger(
            E.TOOL_AUTH,
            tool_name=None,
            tool_id=None,
            tool_type="mcp",
            card=None,
            method=None,
            server_name=cfg.server_name,
            url=cfg.url,
            config=cfg,
        )
        for result in results:
            if not isinstance(result, Mapping):
                continue
            headers.update({str(k): str(v) for k, v in dict(result.get("headers") or {}).items()})
            for key in ("query", "queries", "params"):
                query.update({str(k): str(v) for k, v in dict(result.get(key) or {}).items()})
        return cfg.model_copy(update={"auth_headers": headers, "auth_query_params": query})

    def _connect_mode(self) -> ConnectMode:
        """``"legacy"`` (the ``initialize`` handshake) or ``"auto"`` (the SDK probes for the
        newest protocol), from `McpServerConfig.protocol` and the transport."""
        cfg = self.config
        # Servers ask (sampling, elicitation, roots) through requests of their own only on
        # handshake-era connections; a 2026-07-28 connection has no back-channel for them,
        # so a client that can answer uses the handshake.
        if cfg.protocol == "handshake":
            return "legacy"
        if self._handshake_refused:
            return "auto"
        if self.hooks.answers_requests:
            return "legacy"
        return "auto" if cfg.protocol == "newest" or cfg.client_type != "stdio" else "legacy"

    async def _open(self) -> _Connection:
        mode = self._connect_mode()
        try:
            return await self._open_in(mode)
        except McpError as e:
            if not (self.config.protocol == "auto" and e.details.get("handshake_refused")):
                raise
            # A server that speaks only the 2026-07-28 protocol refuses the handshake: try
            # again with the SDK's probe (a stdio server is started again), and remember.
            log.info(
                "%s: the server refused the initialize handshake (%s); trying the newer protocol%s",
                self.config.describe(),
                e.message,
                " (its sampling, elicitation and roots requests cannot reach the hooks)"
                if self.hooks.answers_requests
                else "",
            )
            self._handshake_refused = True
            return await self._open_in("auto")

    async def _open_in(self, mode: ConnectMode) -> _Connection:
        config = await self._authorized_config()
        if config is not self.config:
            self.secrets.configure(config)  # what tool_auth added
        conn = _Connection(
            config, self.errlog, self.hooks, self.auth, self.tasks, mode, self.secrets
        )
        conn.task = asyncio.get_running_loop().create_task(conn.own())
        try:
            # `own` bounds the connect with connect_timeout; the extra wait_for only guards
            # against a transport that ignores cancellation.
            await asyncio.wait_for(
                asyncio.shield(conn.ready), self.config.connect_timeout + _CLOSE_TIMEOUT
            )
        except TimeoutError:
            await conn.close()
            raise _connection_error(
                self.config,
                f"could not connect: no answer within {self.config.connect_timeout:g} s",
            ) from None
        except BaseException:
            await conn.close()
            raise
        return conn

    def _current(self) -> _Connection | None:
        """The open connection when the caller is on its loop (no await: the hot path)."""
        conn, home = self._conn, self._home
        if conn is not None and conn.usable and home is not None and home.here():
            return conn
        return None

    async def _do_connection(self) -> _Connection:
        conn = self._current()
        if conn is not None:
            return conn
        home = self._home
        if home is None or not home.here():
            # A coroutine left on a loop the client has moved away from (see `_abandon`).
            raise _connection_error(self.config, "the connection moved to another event loop")
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            if self.closed:
                raise _connection_error(self.config, "the client is closed")
            conn = self._conn
            if conn is not None and conn.usable:
                return conn
            if conn is not None:
                self._conn = None
                await conn.close()
            attempts = max(1, self.config.max_reconnect_attempts) if self._connected_once else 1
            error: McpError | None = None
            for attempt in range(attempts):
                if attempt:
                    await asyncio.sleep(min(2.0, 0.2 * 2 ** (attempt - 1)))
                try:
                    conn = await self._open()
                except McpError as e:
                    error = e
                    log.info(
                        "%s: connect attempt %d failed: %s",
                        self.config.describe(),
                        attempt + 1,
                        e.message,
                    )
                    continue
                self._conn = conn
                self._connected_once = True
                return conn
            assert error is not None
            raise error

    async def _do_close(self) -> None:
        self.closed = True
        conn, self._conn = self._conn, None
        await self.tasks.aclose()
        if conn is not None:
            await conn.close()

    def _lost(self, conn: _Connection, during: str, cause: BaseException | None) -> McpError:
        reason = conn.problem or "the connection was lost"
        if conn.problem is None and isinstance(cause, MCPError) and cause.message:
            reason = f"{reason} ({cause.message[:300]})"  # e.g. an SSE event over the limit
        conn.fail(reason)
        return _connection_error(
            self.config,
            f"{reason} during {during}; it was not retried (the next call reconnects)",
            cause,
        )

    async def _do_list_tools(self) -> list[mcp_types.Tool]:
        # The SDK's list_tools has no timer of its own: connecting is bounded by
        # connect_timeout, and the listing (every page, a reconnect included) by call_timeout.
        timeout = self.config.call_timeout
        await self._do_connection()
        if timeout is None:
            return await self._list_pages()
        try:
            async with asyncio.timeout(timeout):
                return await self._list_pages()
        except McpError:
            raise
        except TimeoutError:
            raise McpTimeoutError(
                f"{self.config.describe()}: tools/list did not finish within {timeout:g} s",
                code=ErrorCode.MCP_TIMEOUT,
            ) from None

    async def _list_pages(self) -> list[mcp_types.Tool]:
        for attempt in range(2):
            conn = await self._do_connection()
            assert conn.client is not None
            client = conn.client
            try:
                tools: list[mcp_types.Tool] = []
                cursor: str | None = None
                seen: set[str] = set()
                for _ in range(_MAX_PAGES):
                    page = await client.list_tools(cursor=cursor)
                    tools.extend(page.tools)
                    cursor = page.next_cursor
                    if not cursor:
                        self.tasks.record(tools, client)
                        return tools
                    if cursor in seen:
                        raise self._paging_error(f"repeated the cursor {cursor[:80]!r}")
                    seen.add(cursor)
                raise self._paging_error(f"still had more after {_MAX_PAGES} pages")
            except MCPError as e:
                if _is_transport_failure(e) and attempt == 0:
                    conn.fail(conn.problem or e.message)
                    continue  # listing is safe to repeat
                raise self._translate(e, conn, "tools/list", None) from e
            except pydantic.ValidationError as e:
                raise McpError(
                    f"{self.config.describe()}: invalid tools/list result: {e}",
                    code=ErrorCode.MCP_EXECUTION_ERROR,
                    cause=e,
                ) from e
        raise AssertionError("unreachable")

    def _paging_error(self, what: str, listing: str = "tools/list") -> McpError:
        return McpError(
            f"{self.config.describe()}: {listing} {what}; the server's paging loops",
            code=ErrorCode.MCP_EXECUTION_ERROR,
            details={"server_name": self.config.server_name},
        )

    async def _do_call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        timeout: float | None,
        progress: ProgressCallback | None = None,
    ) -> mcp_types.CallToolResult:
        loop = asyncio.get_running_loop()
        deadline = None if timeout is None else loop.time() + timeout
        resent = asked = False
        while True:
            conn = self._current() or await self._do_connection()
            assert conn.client is not None
            left = timeout
            if deadline is not None and asked:
                left = deadline - loop.time()
                if left <= 0:
                    raise self._timed_out(f"call to tool {name!r}", timeout)
            try:
                return await self._call_once(conn, name, arguments, left, progress)
            except MCPError as e:
                if is_session_lost(e) and not resent:
                    # The server no longer knows the session, so the call never ran: re-open
                    # and send it again (the MCP spec asks clients to start a new session).
                    resent = True
                    conn.fail(f"the server ended the session ({e.message})")
                    continue
                if e.code == mcp_types.URL_ELICITATION_REQUIRED:
                    refused = await self._urls_required(e, name, asked, deadline)
                    if refused is None:
                        asked = True  # every URL accepted: the call is sent once more
                        continue
                    return refused
                raise self._translate(e, conn, f"call to tool {name!r}", timeout) from e
            except pydantic.ValidationError as e:
                raise McpError(
                    f"{self.config.describe()}: tool {name!r} returned an invalid result: {e}",
                    code=ErrorCode.MCP_EXECUTION_ERROR,
                    tool_name=name,
                    cause=e,
                ) from e
            except RuntimeError as e:  # output-schema validation by the SDK
                raise McpError(
                    f"{self.config.describe()}: {e}",
                    code=ErrorCode.MCP_EXECUTION_ERROR,
                    tool_name=name,
                    cause=e,
                ) from e

    async def _call_once(
        self,
        conn: _Connection,
        name: str,
        arguments: dict[str, Any],
        timeout: float | None,
        progress: ProgressCallback | None,
    ) -> mcp_types.CallToolResult:
        assert conn.client is not None
        if self.tasks.unlisted(conn.client):  # learn which tools take tasks
            await self._list_pages()
        if self.tasks.wanted(name, conn.client):
            return await self.tasks.call(conn.client, name, arguments, timeout, progress)
        if timeout is None or self.auth is not None:
            # The SDK's timer, which pauses while an OAuth flow waits for a person.
            return await conn.client.call_tool(
                name, arguments, read_timeout_seconds=timeout, progress_callback=progress
            )
        return await self._within(
            conn.call_tool(name, arguments, progress), timeout, f"call to tool {name!r}"
        )

    async def _urls_required(
        self, error: MCPError, name: str, asked: bool, deadline: float | None
    ) -> mcp_types.CallToolResult | None:
        """The server answered -32042: the user must open URLs first. The first time, the
        elicitation hook is asked for each (within what is left of the call's time); None
        when all were accepted, else an error result for the model holding the URLs and
        the server's messages (the call did not run)."""
        wanted = _url_elicitations(error)
        if not wanted:
            why = "the server named no URL to open"
        elif asked:
            why = "the server still asks for it after the user accepted; it was not retried again"
        else:
            left = None if deadline is None else deadline - asyncio.get_running_loop().time()
            try:
                async with asyncio.timeout(left):
                    reason = await self.hooks.ask_urls(self.config, wanted)
            except TimeoutError:
                reason = "the user did not answer within the call's timeout"
            if reason is None:
                return None
            why = reason
        log.info("%s: tool %r needs a URL opened; %s", self.config.describe(), name, why)
        lines = [
            f"The tool {name!r} did not run: the MCP server {self.config.server_name!r} first "
            f"needs the user to open a URL ({_clean(error.message, 500)}); {why}."
        ]
        lines += [f"- {_clean(e.message, 500)}: {_clean(e.url, 2000)}" for e in wanted]
        if wanted:
            lines.append("Ask the user to open it, then call the tool again.")
        text = self.mask("\n".join(lines))
        return mcp_types.CallToolResult(
            content=[mcp_types.TextContent(type="text", text=text)], is_error=True
        )

    async def _within(self, call: Awaitable[T], timeout: float, during: str) -> T:
        """`call` within `timeout` seconds, else `McpTimeoutError`. One timer of our own,
        which also covers a write to a wedged transport (the SDK's starts after the write);
        cancelling the SDK's wait sends the server notifications/cancelled. A bare loop
        timer (`CallDeadline`), which keeps cancelling a call past its deadline: a result
        that comes back after it (the cancellation swallowed) is dropped too."""
        deadline = CallDeadline(timeout)
        try:
            result = await call
        except (KeyboardInterrupt, SystemExit):
            deadline.settle()
            raise
        except BaseException:
            if deadline.settle():  # the deadline's cancellation alone
                raise self._timed_out(during, timeout) from None
            raise
        if deadline.settle():
            raise self._timed_out(during, timeout)
        return result

    def _timed_out(
        self, during: str, timeout: float | None, cause: BaseException | None = None
    ) -> McpTimeoutError:
        return McpTimeoutError(
            f"{self.config.describe()}: {during} did not finish within {timeout or 0:g} s; "
            "a cancellation was sent to the server",
            cause=cause,
        )

    def _translate(
        self, e: MCPError, conn: _Connection, during: str, timeout: float | None
    ) -> McpError:
        if _is_transport_failure(e):
            return self._lost(conn, during, e)
        if e.code == mcp_types.REQUEST_TIMEOUT:
            return self._timed_out(during, timeout, e)
        if isinstance(e.data, dict) and e.data.get("error") == "insufficient_scope":
            # a 403 for this request alone (a toolweave server with auth): the token lacks
            # the scopes it needs, which the error names
            return McpAuthError(
                f"{self.config.describe()}: {during} was refused (403 Forbidden): {e.message}",
                cause=e,
                details={
                    "server_name": self.config.server_name,
                    "status": 403,
                    "scope": str(e.data.get("scope", "")),
                },
            )
        return McpError(
            f"{self.config.describe()}: {during} failed with JSON-RPC error {e.code}: {e.message}",
            code=ErrorCode.MCP_EXECUTION_ERROR,
            cause=e,
            details={"jsonrpc_code": e.code},
        )

    # public operations (any loop) -------------------------------------------------------------
    def effective_timeout(self, timeout: float | None) -> float | None:
        if timeout is not None and timeout > 0:
            return float(timeout)
        return self.config.call_timeout

    async def _guarded(self, coro: Coroutine[Any, Any, T], timeout: float | None) -> T:
        """Run on the home loop; a caller-side guard fires only if the SDK's timer cannot
        (for example a write blocked on a wedged transport)."""
        if timeout is None:
            return await self.run(coro)
        try:
            async with asyncio.timeout(timeout + _CALL_GRACE):
                return await self.run(coro)
        except McpError:
            # Our own errors pass unchanged: `McpTimeoutError` is also a `TimeoutError`, and
            # rewriting it here would replace the SDK timer's message (the real timeout, "a
            # cancellation was sent") with the guard's.
            raise
        except TimeoutError:
            raise McpTimeoutError(
                f"{self.config.describe()}: no answer within {timeout:g} s",
                code=ErrorCode.MCP_TIMEOUT,
            ) from None

    async def connect(self) -> None:
        await self.run(self._do_connection())

    async def _do_sdk(self, what: str, call: Callable[[Client], Awaitable[T]]) -> T:
        """One SDK request (or a paging loop of them) within `call_timeout`."""
        conn = await self._do_connection()
        assert conn.client is not None
        timeout = self.config.call_timeout
        try:
            async with asyncio.timeout(timeout):
                return await call(conn.client)
        except TimeoutError:
            raise McpTimeoutError(
                f"{self.config.describe()}: {what} did not finish within {timeout or 0:g} s"
            ) from None
        except MCPError as e:
            raise self._translate(e, conn, what, timeout) from e

    async def request(self, what: str, call: Callable[[Client], Awaitable[T]]) -> T:
        t = self.config.call_timeout
        return await self._guarded(
            self._do_sdk(what, call), None if t is None else t + self.config.connect_timeout
        )

    async def all_pages(self, what: str, method: str, field: str) -> list[Any]:
        """Every item of a paginated listing (``list_resources`` ...), paging loops reported."""

        async def walk(client: Client) -> list[Any]:
            items: list[Any] = []
            cursor: str | None = None
            seen: set[str] = set()
            for _ in range(_MAX_PAGES):
                page = await getattr(client, method)(cursor=cursor)
                items.extend(getattr(page, field))
                cursor = page.next_cursor
                if not cursor:
                    return items
                if cursor in seen:
                    raise self._paging_error(f"repeated the cursor {cursor[:80]!r}", what)
                seen.add(cursor)
            raise self._paging_error(f"still had more after {_MAX_PAGES} pages", what)

        return await self.request(what, walk)

    async def list_tools(self) -> list[mcp_types.Tool]:
        return await self._guarded(
            self._do_list_tools(),
            None
            if self.config.call_timeout is None
            else self.config.connect_timeout + self.config.call_timeout,
        )

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None,
        timeout: float | None,
        *,
        progress: ProgressCallback | None = None,
    ) -> mcp_types.CallToolResult:
        t = self.effective_timeout(timeout)
        call = self._do_call_tool(name, dict(arguments or {}), t, progress)
        home = self._home
        if home is not None and home.here() and self.auth is None:
            try:
                return await call  # the call's own timer covers it all (no other loop to watch)
            except BaseException as e:
                self.secrets.scrub(e)
                raise
        return await self._guarded(call, None if t is None else t + self.config.connect_timeout)

    def call_tool_sync(
        self, name: str, arguments: dict[str, Any] | None, timeout: float | None = None
    ) -> mcp_types.CallToolResult:
        """`call_tool` from sync code (never from a coroutine on the connection's loop)."""
        return self.run_sync(self.call_tool(name, arguments, timeout))

    async def _do_roots_changed(self) -> None:
        conn = await self._do_connection()
        assert conn.client is not None
        await conn.client.send_roots_list_changed()

    def _closing_home(self) -> Home | None:
        """Mark the client closed; return the home to close the connection on, if it can
        run it now (a loop that is not running closes it whenever it runs again)."""
        with self._home_lock:
            self.closed = True
            home = self._home
            if home is None or not home.alive():
                return None
            if home.here() or (home.serving() and not home.blocked()):
                return home
            self._abandon(home, "the client was closed")
            return None

    async def close(self) -> None:
        home = self._closing_home()
        if home is None:
            return
        try:
            await home.run(self._do_close())
        finally:
            if isinstance(home, LoopThread):
                await asyncio.to_thread(home.stop)

    def close_sync(self) -> None:
        home = self._closing_home()
        if home is None:
            return
        try:
            home.run_sync(self._do_close())
        finally:
            home.stop()


def _quietly(method: str, *args: Any) -> Callable[[Client], Awaitable[Any]]:
    """A call of the SDK `Client`'s `method`, without the deprecation warning it gives on
    every call (resource subscriptions are the way until 2025-11-25)."""

    async def call(client: Client) -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return await getattr(client, method)(*args)

    return call


def _announces_tool_changes(client: Client) -> bool:
    """A 2026-07-28 server that says its tool list may change (it has listen streams)."""
    if client.protocol_version not in MODERN_PROTOCOL_VERSIONS:
        return False  # older servers send notifications/tools/list_changed unasked
    tools = client.server_capabilities.tools
    return tools is not None and bool(tools.list_changed)


_MAX_URLS = 5
"""URL elicitations of one -32042 error that are asked about (a server could list many)."""


def _url_elicitations(error: MCPError) -> list[mcp_types.ElicitRequestURLParams]:
    """The URL-mode elicitations of a -32042 error's ``data.elicitations`` (those that are
    not well-formed are skipped)."""
    data = error.data
    listed = data.get("elicitations") if isinstance(data, dict) else None
    out: list[mcp_types.ElicitRequestURLParams] = []
    for item in listed if isinstance(listed, list) else ():
        try:
            out.append(mcp_types.ElicitRequestURLParams.model_validate(item, by_name=False))
        except pydantic.ValidationError:
            continue
        if len(out) == _MAX_URLS:
            break
    return out


def _clean(text: str, limit: int) -> str:
    """Server text for the model: control characters (line breaks included) as spaces,
    at most `limit` characters."""
    flat = "".join(" " if ord(c) < 32 or 127 <= ord(c) < 160 else c for c in text)
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _refuses_handshake(exc: BaseException) -> bool:
    """Whether a failed connect was the server answering ``initialize`` with an error or
    with a protocol version the handshake does not know (not a lost connection)."""
    for e in _leaf_errors(exc):
        if isinstance(e, MCPError):
            return not _is_transport_failure(e) and e.code != mcp_types.REQUEST_TIMEOUT
        if isinstance(e, RuntimeError) and "protocol version" in str(e):
            return True  # the SDK's "Unsupported protocol version from the server: …"
    return False


def _is_transport_failure(e: MCPError) -> bool:
    return e.code == mcp_types.CONNECTION_CLOSED or is_session_lost(e)


def _make_tools(core: _Core, tools: list[mcp_types.Tool], seen: int = 0) -> McpToolList:
    """One tool per remote name (a name listed again is dropped with a warning: calls could
    not tell the two apart); model-facing names are made unique in listing order. Tools
    that require a task-augmented call the client will not make are left out (with a
    warning)."""
    remote: set[str] = set()
    taken: set[str] = set()
    out: list[McpTool] = []
    for t in tools:
        if t.name in remote:
            log.warning(
                "%s: tool %r is listed more than once; the first is used",
                core.config.describe(),
                t.name,
            )
            continue
        remote.add(t.name)
        reason = core.tasks.unusable(t)
        if reason is not None:  # every call would fail
            log.warning("%s: tool %r %s; it is left out", core.config.describe(), t.name, reason)
            continue
        card = McpToolCard.from_mcp(t, core.config, taken=taken)
        taken.add(card.name)
        out.append(McpTool(card, core))
    return McpToolList(out, McpToolSource(core, _make_tools, seen))


class McpClient:
    """An async client for one MCP server.

    ```python
    async with McpClient(McpServerConfig(server_name="fs", params={"command": "uvx", ...})) as c:
        tools = await c.list_tools()          # list[McpTool]
        result = await c.call_tool("read_file", {"path": "a.txt"}, timeout=10)
    ```

    `call_tool` returns the SDK's `CallToolResult` untouched (`isError` included); the
    `McpTool`s from `list_tools` turn results into toolweave values and errors. Over HTTP,
    `tool_auth` fires on `callbacks` (the global framework by default) before each
    connection is opened, reconnects included.
    Capabilities are opt-in (see `toolweave.mcp.hooks`): `sampling` (a `ChatModel` or an
    async callback), `elicitation`, `roots`, `on_log`, `on_tools_changed`. `auth` is an
    ``httpx2.Auth`` for HTTP servers, e.g. the SDK's ``OAuthClientProvider`` (OAuth 2.1:
    authorization code with PKCE, dynamic or pre-registered clients, token storage) or
    ``ClientCredentialsOAuthProvider``; a 401/403 is an `McpAuthError` naming the status.
    `on_list_changed` is called with ``"tools"``, ``"resources"`` or ``"prompts"`` when that
    list changes, `on_resource_updated` with the URI of a subscribed resource that changed.
    """

    def __init__(
        self,
        config: McpServerConfig,
        *,
        errlog: TextIO | None = None,
        callbacks: CallbackFramework | None = None,
        sampling: SamplingHook = None,
        elicitation: ElicitationHook | None = None,
        roots: RootsHook | None = None,
        on_log: LogHook | None = None,
        on_tools_changed: Callable[[], Any] | None = None,
        auth: httpx2.Auth | None = None,
        on_list_changed: Callable[[str], Any] | None = None,
        on_resource_updated: Callable[[str], Any] | None = None,
    ) -> None:
        hooks = McpClientHooks(
            sampling,
            elicitation,
            roots,
            on_log,
            on_tools_changed,
            on_list_changed,
            on_resource_updated,
        )
        self._core = _Core(config, errlog, callbacks, hooks, auth)

    @property
    def config(self) -> McpServerConfig:
        """The server configuration."""
        return self._core.config

    @property
    def closed(self) -> bool:
        """Whether `close` was called."""
        return self._core.closed

    def __repr__(self) -> str:
        return f"McpClient({self._core.config.describe()})"

    async def connect(self) -> McpClient:
        """Start the server (stdio) or open the session (HTTP); raises `McpError` on failure."""
        await self._core.connect()
        return self

    async def __aenter__(self) -> McpClient:
        try:
            return await self.connect()
        except BaseException:
            await self.close()
            raise

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def list_tools(self) -> list[McpTool]:
        """The server's tools as `McpTool`s bound to this client (all pages)."""
        seen = self._core.hooks.tool_changes  # before listing: a change during it counts
        return _make_tools(self._core, await self._core.list_tools(), seen)

    async def list_mcp_tools(self) -> list[mcp_types.Tool]:
        """The server's tools as it lists them (the SDK's `Tool`s, all pages; a gateway
        re-serves them verbatim)."""
        return await self._core.list_tools()

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any] | None = None,
        timeout: float | None = None,
        *,
        progress: ProgressCallback | None = None,
    ) -> mcp_types.CallToolResult:
        """Call a tool by its name on the server; `timeout` defaults to `call_timeout`;
        `progress` (``async (progress, total, message)``) receives the server's progress."""
        return await self._core.call_tool(name, arguments, timeout, progress=progress)

    async def roots_changed(self) -> None:
        """Tell the server the roots changed (``notifications/roots/list_changed``)."""
        await self._core.run(self._core._do_roots_changed())

    async def list_resources(self) -> list[mcp_types.Resource]:
        """The server's resources (all pages)."""
        return await self._core.run(
            self._core.all_pages("resources/list", "list_resources", "resources")
        )

    async def list_resource_templates(self) -> list[mcp_types.ResourceTemplate]:
        """The server's resource templates (all pages)."""
        return await self._core.run(
            self._core.all_pages(
                "resources/templates/list", "list_resource_templates", "resource_templates"
            )
        )

    async def read_resource(
        self, uri: str
    ) -> list[mcp_types.TextResourceContents | mcp_types.BlobResourceContents]:
        """The contents of a resource (text, or a base64 blob)."""
        result = await self._core.run(
            self._core.request("resources/read", lambda c: c.read_resource(uri))
        )
        return list(result.contents)

    async def list_prompts(self) -> list[mcp_types.Prompt]:
        """The server's prompts (all pages)."""
        return await self._core.run(self._core.all_pages("prompts/list", "list_prompts", "prompts"))

    async def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> mcp_types.GetPromptResult:
        """A prompt filled with `arguments`: its messages."""
        return await self._core.run(
            self._core.request("prompts/get", lambda c: c.get_prompt(name, arguments))
        )

    async def subscribe_resource(self, uri: str) -> None:
        """Ask the server for ``notifications/resources/updated`` on `uri`
        (``on_resource_updated`` receives them)."""
        await self._core.run(
            self._core.request("resources/subscribe", _quietly("subscribe_resource", uri))
        )

    async def unsubscribe_resource(self, uri: str) -> None:
        """Stop the server's updates on `uri`."""
        await self._core.run(
            self._core.request("resources/unsubscribe", _quietly("unsubscribe_resource", uri))
        )

    async def complete(
        self,
        ref: mcp_types.PromptReference | mcp_types.ResourceTemplateReference,
        argument: dict[str, str],
        context_arguments: dict[str, str] | None = None,
    ) -> mcp_types.CompleteResult:
        """Completions the server offers for a prompt's or resource template's argument
        (``argument``: ``{"name": ..., "value": ...}``)."""
        return await self._core.run(
            self._core.request(
                "completion/complete", lambda c: c.complete(ref, argument, context_arguments)
            )
        )

    async def close(self) -> None:
        """Disconnect (stdio: close the server's stdin, then terminate it). Idempotent."""
        await self._core.close()

    @classmethod
    def connect_sync(
        cls, config: McpServerConfig, *, errlog: TextIO | None = None
    ) -> SyncMcpClient:
        """Open a `SyncMcpClient` for `config` (connected)."""
        return SyncMcpClient(config, errlog=errlog).connect()


class SyncMcpClient:
    """The blocking face of `McpClient`, for code without an event loop.

    ```python
    with SyncMcpClient(config) as client:
        tools = client.list_tools()
        print(tools[0].invoke({"a": 1}))
    ```

    Capabilities are opt-in (see `toolweave.mcp.hooks`): `sampling` (a `ChatModel` or an
    async callback), `elicitation`, `roots`, `on_log`, `on_tools_changed`. `auth` is an
    ``httpx2.Auth`` for HTTP servers, e.g. the SDK's ``OAuthClientProvider`` (OAuth 2.1:
    authorization code with PKCE, dynamic or pre-registered clients, token storage) or
    ``ClientCredentialsOAuthProvider``; a 401/403 is an `McpAuthError` naming the status.
    """

    def __init__(
        self,
        config: McpServerConfig,
        *,
        errlog: TextIO | None = None,
        callbacks: CallbackFramework | None = None,
        sampling: SamplingHook = None,
        elicitation: ElicitationHook | None = None,
        roots: RootsHook | None = None,
        on_log: LogHook | None = None,
        on_tools_changed: Callable[[], Any] | None = None,
        auth: httpx2.Auth | None = None,
    ) -> None:
        hooks = McpClientHooks(sampling, elicitation, roots, on_log, on_tools_changed)
        self._core = _Core(config, errlog, callbacks, hooks, auth)

    @property
    def config(self) -> McpServerConfig:
        """The server configuration."""
        return self._core.config

    def __repr__(self) -> str:
        return f"SyncMcpClient({self._core.config.describe()})"

    def connect(self) -> SyncMcpClient:
        """Connect now (otherwise the first call connects)."""
        self._core.run_sync(self._core._do_connection())
        return self

    def __enter__(self) -> SyncMcpClient:
        try:
            return self.connect()
        except BaseException:
            self.close()
            raise

    def __exit__(self, *exc: object) -> None:
        self.close()

    def list_tools(self) -> list[McpTool]:
        """The server's tools as `McpTool`s (their `invoke` and `ainvoke` both work)."""
        seen = self._core.hooks.tool_changes  # before listing: a change during it counts
        return _make_tools(self._core, self._core.run_sync(self._core.list_tools()), seen)

    def call_tool(
        self, name: str, arguments: dict[str, Any] | None = None, timeout: float | None = None
    ) -> mcp_types.CallToolResult:
        """Call a tool by its name on the server and wait for the result."""
        return self._core.call_tool_sync(name, arguments, timeout)

    def roots_changed(self) -> None:
        """Tell the server the roots changed (``notifications/roots/list_changed``)."""
        self._core.run_sync(self._core._do_roots_changed())

    def list_resources(self) -> list[mcp_types.Resource]:
        """The server's resources (all pages)."""
        return self._core.run_sync(
            self._core.all_pages("resources/list", "list_resources", "resources")
        )

    def list_resource_templates(self) -> list[mcp_types.ResourceTemplate]:
        """The server's resource templates (all pages)."""
        return self._core.run_sync(
            self._core.all_pages(
                "resources/templates/list", "list_resource_templates", "resource_templates"
            )
        )

    def read_resource(
        self, uri: str
    ) -> list[mcp_types.TextResourceContents | mcp_types.BlobResourceContents]:
        """The contents of a resource (text, or a base64 blob)."""
        result = self._core.run_sync(
            self._core.request("resources/read", lambda c: c.read_resource(uri))
        )
        return list(result.contents)

    def list_prompts(self) -> list[mcp_types.Prompt]:
        """The server's prompts (all pages)."""
        return self._core.run_sync(self._core.all_pages("prompts/list", "list_prompts", "prompts"))

    def get_prompt(
        self, name: str, arguments: dict[str, str] | None = None
    ) -> mcp_types.GetPromptResult:
        """A prompt filled with `arguments`: its messages."""
        return self._core.run_sync(
            self._core.request("prompts/get", lambda c: c.get_prompt(name, arguments))
        )

    def close(self) -> None:
        """Disconnect and stop the loop thread. Idempotent."""
        self._core.close_sync()
