"""Server middleware: a chain around every request a served MCP server answers.

``serve_mcp(tools, middleware=[...])`` (and `build_mcp_server`, `serve_mcp_async`) wraps the
handler of each request kind — ``tools/call``, ``resources/read``, ``prompts/get``,
``completion/complete`` and the listings (``tools/list``, ``resources/list``,
``resources/templates/list``, ``prompts/list``) — in the middleware given, the first one
outermost. A middleware is ``async (request: McpRequest, call_next) -> result``: it may look
at or replace the request (``dataclasses.replace(request, params=...)``), answer it itself
(a cached result), raise the SDK's ``MCPError`` (a JSON-RPC error to the client), or change
the result. Proxied servers (``proxy=``) go through the same chain.

Built in:

- `LoggingMiddleware`: one log line per request (method, name, client, milliseconds,
  outcome), never the arguments;
- `RateLimitMiddleware`: a token bucket per client (or per verified token subject);
- `CachingMiddleware`: results of idempotent tools (``idempotentHint``), per client unless
  shared, for `ttl` seconds;
- `ErrorMaskingMiddleware`: internal failure text stays in the server's log; the client
  gets a generic message with a reference to it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Collection, Iterable, Sequence
from typing import Any, Literal, Protocol

import mcp_types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from ..identity import Identity, current_identity
from .store import McpStore, open_store

__all__ = [
    "RATE_LIMITED",
    "CachingMiddleware",
    "ErrorMaskingMiddleware",
    "LoggingMiddleware",
    "McpMiddleware",
    "McpRequest",
    "RateLimitMiddleware",
    "apply_middleware",
    "cli_middleware",
    "parse_rate",
]

log = logging.getLogger("toolweave.mcp.middleware")

METHODS = (
    "tools/call",
    "tools/list",
    "resources/read",
    "resources/list",
    "resources/templates/list",
    "prompts/get",
    "prompts/list",
    "completion/complete",
)
"""The request kinds middleware wraps."""

RATE_LIMITED = -32029
"""The JSON-RPC error code of a request refused by `RateLimitMiddleware` (one of the
implementation-defined server errors JSON-RPC leaves free, -32000 to -32099, and one MCP
does not use: -32000 is what the SDK's client reads as a closed connection);
``data.retryAfterSeconds`` says when to retry."""


@dataclasses.dataclass(frozen=True)
class McpRequest:
    """One request on its way through the middleware chain."""

    method: str
    """``tools/call``, ``resources/read``, ``prompts/get``, ``tools/list`` ..."""
    params: Any
    """The request's parameters (the SDK's model, e.g. ``CallToolRequestParams``)."""
    ctx: Any
    """The SDK's request context (its ``session`` reaches the client)."""
    list_tools: Callable[[], Awaitable[list[mcp_types.Tool]]] | None = dataclasses.field(
        repr=False, compare=False, default=None
    )
    """The server's tool listing (without the middleware), e.g. to read annotations."""

    @property
    def name(self) -> str | None:
        """The tool or prompt name, or the resource URI; None for a listing."""
        params = self.params
        if self.method == "resources/read":
            return str(params.uri)
        if self.method == "completion/complete":
            ref = params.ref
            return str(getattr(ref, "name", None) or getattr(ref, "uri", ""))
        name = getattr(params, "name", None)
        return name if isinstance(name, str) else None

    @property
    def arguments(self) -> dict[str, Any]:
        """A tool call's or prompt's arguments ({} otherwise)."""
        return dict(getattr(self.params, "arguments", None) or {})

    @property
    def identity(self) -> Identity | None:
        """The verified caller, when the server authenticates (``serve_mcp(auth=...)``)."""
        return current_identity()

    @property
    def session_key(self) -> str:
        """This client connection: its ``Mcp-Session-Id`` over HTTP; the client's address
        for sessionless HTTP (2026-07-28, where every request is a connection of its own);
        else the connection (stdio, in process)."""
        http = getattr(self.ctx, "request", None)
        headers = getattr(http, "headers", None)
        session = headers.get("mcp-session-id") if headers is not None else None
        if session:
            return f"session:{session}"
        peer = getattr(http, "client", None)
        host = getattr(peer, "host", None)
        if isinstance(host, str) and host:
            return f"address:{host}"
        conn = getattr(self.ctx.session, "_connection", None)
        return f"connection:{id(conn if conn is not None else self.ctx.session)}"

    @property
    def client_key(self) -> str:
        """Who is asking: the verified token's principal (issuer and subject, or client id)
        when there is one, else the connection or address (`session_key`)."""
        who = self.identity
        if who is not None and (who.subject or who.client_id):
            return f"token:{who.issuer or ''}|{who.subject or ''}|{who.client_id or ''}"
        return self.session_key


CallNext = Callable[[McpRequest], Awaitable[Any]]


class McpMiddleware(Protocol):
    """``async (request, call_next) -> result``; call ``await call_next(request)`` to go on."""

    async def __call__(self, request: McpRequest, call_next: CallNext) -> Any:
        """Handle `request`."""
        ...


def apply_middleware(server: Server[Any], middleware: Iterable[McpMiddleware]) -> Server[Any]:
    """Wrap `server`'s handlers of every kind in `METHODS` in `middleware` (the first one
    outermost); handlers registered later are not wrapped."""
    chain = list(middleware)
    if not chain:
        return server
    listing = server.get_request_handler("tools/list")

    async def list_tools(ctx: Any) -> list[mcp_types.Tool]:
        if listing is None:
            return []
        result: Any = await listing.handler(ctx, mcp_types.PaginatedRequestParams())
        return list(result.tools)

    for method in METHODS:
        entry = server.get_request_handler(method)
        if entry is None:
            continue
        server.add_request_handler(
            method, entry.params_type, _wrapped(method, entry.handler, chain, list_tools)
        )
    return server


def _wrapped(
    method: str,
    handler: Callable[[Any, Any], Awaitable[Any]],
    chain: Sequence[McpMiddleware],
    list_tools: Callable[[Any], Awaitable[list[mcp_types.Tool]]],
) -> Callable[[Any, Any], Awaitable[Any]]:
    async def innermost(request: McpRequest) -> Any:
        return await handler(request.ctx, request.params)

    call: CallNext = innermost
    for m in reversed(chain):
        call = _link(m, call)

    async def wrapped(ctx: Any, params: Any) -> Any:
        return await call(McpRequest(method, params, ctx, lambda: list_tools(ctx)))

    return wrapped


def _link(middleware: McpMiddleware, call_next: CallNext) -> CallNext:
    async def step(request: McpRequest) -> Any:
        return await middleware(request, call_next)

    return step


# logging and timing ---------------------------------------------------------------------------
class LoggingMiddleware:
    """Logs each request when it is answered: method, name, client, duration in
    milliseconds and outcome (``ok``, ``tool error`` for an ``isError`` result, ``JSON-RPC
    error <code>``, ``failed <exception>``). Arguments are never logged (they may hold
    secrets). `methods` limits it to some request kinds."""

    def __init__(
        self,
        logger: logging.Logger | None = None,
        *,
        level: int = logging.INFO,
        methods: Collection[str] | None = None,
    ) -> None:
        self.logger = logger or log
        self.level = level
        self.methods = methods

    async def __call__(self, request: McpRequest, call_next: CallNext) -> Any:
        """Time the request and log how it ended."""
        if self.methods is not None and request.method not in self.methods:
            return await call_next(request)
        start = time.perf_counter()
        outcome = "ok"
        try:
            result = await call_next(request)
            if getattr(result, "is_error", False):
                outcome = "tool error"
            return result
        except MCPError as e:
            outcome = f"JSON-RPC error {e.code}"
            raise
        except BaseException as e:
            outcome = f"failed {type(e).__name__}"
            raise
        finally:
            ms = (time.perf_counter() - start) * 1000
            name = request.name
            self.logger.log(
                self.level,
                "%s%s client=%s %.1f ms %s",
                request.method,
                f" {name!r}" if name is not None else "",
                request.client_key,
                ms,
                outcome,
            )


# rate limits ------------------------------------------------------------------------------------
class RateLimitMiddleware:
    """At most `rate` requests per `per` seconds for each client (a token bucket holding up
    to `burst`, by default `rate`); a request over it is refused with JSON-RPC error
    `RATE_LIMITED` (``data.retryAfterSeconds``) and is not run.

    `by`: ``"client"`` (the verified token's principal, else the connection; the default),
    ``"token"`` (only authenticated requests are limited, per principal), ``"session"``
    (each connection), or ``(request) -> key | None`` (None: not limited). `methods`: the
    request kinds counted (tool calls by default). The counters live in this process unless
    `store` is given: with several worker processes, pass one they all share (a
    `toolweave.mcp.store.SqliteStore`) and the limit holds across them.
    """

    def __init__(
        self,
        rate: float,
        per: float = 60.0,
        *,
        burst: float | None = None,
        by: Literal["client", "token", "session"] | Callable[[McpRequest], str | None] = "client",
        methods: Collection[str] = ("tools/call",),
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
        store: McpStore | None = None,
    ) -> None:
        if rate <= 0 or per <= 0:
            raise ValueError("a rate limit needs a positive rate and period")
        self.rate = rate
        self.per = per
        self.burst = float(burst if burst is not None else rate)
        if self.burst < 1:
            raise ValueError("burst must allow at least one request")
        self.by = by
        self.methods = methods
        self.max_clients = max_clients
        self.clock = clock
        self.store = store
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def key(self, request: McpRequest) -> str | None:
        """Whose bucket `request` counts against (None: not limited)."""
        if callable(self.by):
            return self.by(request)
        if self.by == "session":
            return request.session_key
        if self.by == "token":
            return request.client_key if request.identity is not None else None
        return request.client_key

    async def __call__(self, request: McpRequest, call_next: CallNext) -> Any:
        """Count the request against its client's bucket; refuse it when empty."""
        if request.method not in self.methods:
            return await call_next(request)
        key = self.key(request)
        if key is None:
            return await call_next(request)
        if self.store is not None:
            wait = await self.store.take(
                f"rate:{key}", rate=self.rate, per=self.per, burst=self.burst
            )
        else:
            now = self.clock()
            tokens, last = self._buckets.pop(key, (self.burst, now))
            tokens = min(self.burst, tokens + (now - last) * self.rate / self.per)
            if tokens >= 1:
                self._remember(key, tokens - 1, now)
                return await call_next(request)
            self._remember(key, tokens, now)
            wait = (1 - tokens) * self.per / self.rate
        if wait > 0:
            raise MCPError(
                RATE_LIMITED,
                f"Rate limit exceeded: at most {self.rate:g} requests per {self.per:g} s; "
                f"retry in {wait:.1f} s",
                data={"retryAfterSeconds": round(wait, 3)},
            )
        return await call_next(request)

    def _remember(self, key: str, tokens: float, now: float) -> None:
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.max_clients:
            self._buckets.popitem(last=False)  # the longest idle client starts afresh


# caching ------------------------------------------------------------------------------------------
class CachingMiddleware:
    """Answers a repeated call of an idempotent tool from a cache: same tool, same
    arguments, within `ttl` seconds. A tool is cached when its listing says
    ``idempotentHint`` (``@tool(idempotent=True)``, or an upstream's annotation through a
    gateway), or when `tools` names it. Error results are not cached.

    Entries are per client (`McpRequest.client_key`) unless `shared` (one client's results
    could hold what only it may see). At most `max_entries` are kept (the oldest go first);
    `hits` and `misses` count lookups (in this process). With `store` (shared by several
    worker processes), results are kept there, as JSON, instead.
    """

    def __init__(
        self,
        ttl: float = 300.0,
        *,
        max_entries: int = 1024,
        shared: bool = False,
        tools: Collection[str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        store: McpStore | None = None,
    ) -> None:
        if ttl <= 0:
            raise ValueError("ttl must be positive")
        self.ttl = ttl
        self.max_entries = max_entries
        self.shared = shared
        self.tools = set(tools) if tools is not None else None
        self.clock = clock
        self.store = store
        self.hits = 0
        self.misses = 0
        self._entries: OrderedDict[tuple[str, str, str], tuple[float, Any]] = OrderedDict()
        self._idempotent: set[str] = set()
        self._known: set[str] = set()
        self._listed_at: float | None = None

    async def _cacheable(self, request: McpRequest) -> bool:
        name = request.name or ""
        if self.tools is not None and name in self.tools:
            return True
        now = self.clock()
        stale = self._listed_at is None or now - self._listed_at > self.ttl
        if (stale or name not in self._known) and request.list_tools is not None:
            listed = await request.list_tools()
            self._listed_at = now
            self._known = {t.name for t in listed}
            self._idempotent = {
                t.name for t in listed if t.annotations and t.annotations.idempotent_hint
            }
        return name in self._idempotent

    async def __call__(self, request: McpRequest, call_next: CallNext) -> Any:
        """Answer from the cache, or call and remember a successful result."""
        if request.method != "tools/call" or not await self._cacheable(request):
            return await call_next(request)
        arguments = json.dumps(request.arguments, sort_keys=True, default=str)
        key = (request.name or "", arguments, "" if self.shared else request.client_key)
        if self.store is not None:
            return await self._stored(request, call_next, key)
        now = self.clock()
        found = self._entries.get(key)
        if found is not None and found[0] > now:
            self.hits += 1
            self._entries.move_to_end(key)
            return found[1].model_copy(deep=True)
        self.misses += 1
        result = await call_next(request)
        if isinstance(result, mcp_types.CallToolResult) and not result.is_error:
            self._entries[key] = (now + self.ttl, result.model_copy(deep=True))
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return result

    async def _stored(
        self, request: McpRequest, call_next: CallNext, key: tuple[str, str, str]
    ) -> Any:
        assert self.store is not None
        digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()
        found = await self.store.get(f"cache:{digest}")
        if found is not None:
            self.hits += 1
            return mcp_types.CallToolResult.model_validate_json(found)
        self.misses += 1
        result = await call_next(request)
        if isinstance(result, mcp_types.CallToolResult) and not result.is_error:
            text = result.model_dump_json(by_alias=True, exclude_none=True)
            await self.store.put(f"cache:{digest}", text, self.ttl)
        return result

    def clear(self) -> None:
        """Forget every cached result (of this process; a store's entries expire)."""
        self._entries.clear()


# error masking ----------------------------------------------------------------------------------
class ErrorMaskingMiddleware:
    """Keeps internal failure text out of the client's view: it goes to the log (with a
    reference) and the client gets a generic message holding only that reference.

    Masked: an exception that escapes a handler (a JSON-RPC -32603 "Internal error"), and,
    when `tool_errors` (the default), the text of a tool's ``isError`` result (argument
    errors included: set ``tool_errors=False`` to let a model see why its call was
    refused). The SDK's ``MCPError`` raised on purpose (unknown tool, resource not found,
    rate limits, scopes) passes unchanged.
    """

    def __init__(self, *, tool_errors: bool = True, logger: logging.Logger | None = None) -> None:
        self.tool_errors = tool_errors
        self.logger = logger or log

    async def __call__(self, request: McpRequest, call_next: CallNext) -> Any:
        """Run the request; mask what fails."""
        try:
            result = await call_next(request)
        except MCPError:
            raise
        except Exception as e:
            ref = secrets.token_hex(4)
            self.logger.error(
                "%s %r failed (reference %s): %s: %s",
                request.method,
                request.name,
                ref,
                type(e).__name__,
                e,
            )
            raise MCPError(
                mcp_types.INTERNAL_ERROR,
                f"Internal error (reference {ref}); the details are in the server's log",
            ) from e
        if self.tool_errors and isinstance(result, mcp_types.CallToolResult) and result.is_error:
            ref = secrets.token_hex(4)
            shown = "".join(getattr(b, "text", "") for b in result.content)
            self.logger.warning(
                "tool %r failed (reference %s): %s", request.name, ref, shown[:2000]
            )
            return mcp_types.CallToolResult(
                content=[
                    mcp_types.TextContent(
                        type="text",
                        text=f"The tool {request.name!r} failed (error reference {ref}).",
                    )
                ],
                is_error=True,
            )
        return result


# the command line -------------------------------------------------------------------------------
_PERIODS = {"s": 1.0, "sec": 1.0, "second": 1.0, "m": 60.0, "min": 60.0, "minute": 60.0}
_PERIODS.update({"h": 3600.0, "hour": 3600.0, "d": 86400.0, "day": 86400.0})


def parse_rate(spec: str) -> tuple[float, float]:
    """``N/PERIOD`` (``60/min``, ``5/s``, ``1000/h``, ``10/30`` seconds) as (rate, per)."""
    count, _, period = spec.strip().partition("/")
    try:
        rate = float(count)
        per = _PERIODS.get(period.strip().lower()) if period else 60.0
        if per is None:
            per = float(period)
    except ValueError:
        raise ValueError(
            f"a rate is N/PERIOD (e.g. 60/min, 5/s, 10/30 for 30 seconds), not {spec!r}"
        ) from None
    if rate <= 0 or per <= 0:
        raise ValueError(f"a rate needs a positive count and period, not {spec!r}")
    return rate, per


def cli_middleware(
    *,
    log_requests: bool = False,
    mask_errors: bool = False,
    rate_limit: str | None = None,
    cache_ttl: float | None = None,
    extra: Iterable[Any] = (),
    store: str | None = None,
) -> list[Any]:
    """The chain ``toolweave mcp serve`` builds from its options (logging outermost, then
    error masking, the rate limit, the cache, and `extra`: middleware or lists of them);
    `store` (``sqlite:PATH``, see `toolweave.mcp.store.open_store`) holds the rate limit's
    counters and the cache's results."""
    shared = open_store(store) if store is not None else None
    chain: list[Any] = []
    if log_requests:
        chain.append(LoggingMiddleware())
        if not log.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
            log.addHandler(handler)
        log.setLevel(logging.INFO)
    if mask_errors:
        chain.append(ErrorMaskingMiddleware())
    if rate_limit is not None:
        rate, per = parse_rate(rate_limit)
        chain.append(RateLimitMiddleware(rate, per, store=shared))
    if cache_ttl is not None:
        chain.append(CachingMiddleware(ttl=cache_ttl, store=shared))
    for item in extra:
        items = list(item) if isinstance(item, (list, tuple)) else [item]
        for m in items:
            if not callable(m):
                raise TypeError(f"not a middleware (async (request, call_next)): {m!r}")
            chain.append(m)
    return chain
