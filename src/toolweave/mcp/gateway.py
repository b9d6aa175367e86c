"""The MCP gateway: serve other MCP servers' tools, resources and prompts next to your own.

``serve_mcp(tools, proxy=[McpServerConfig(...), McpProxy(config, namespace="x"), ...])`` (or
``toolweave mcp serve --proxy NAME=CMD|URL``) connects one `McpClient` per upstream server
and serves what each one offers:

- tools and prompts under a namespace: ``<namespace>_<name>`` (the namespace is the
  config's ``server_name`` unless `McpProxy.namespace` says otherwise; ``""`` for none);
  their schemas, annotations and results pass through verbatim;
- resources and resource templates keep their URIs (a resource link in a proxied tool's
  result stays readable through the gateway); a read goes to the upstream that listed the
  URI (or whose template matches it), else to each upstream in turn;
- each upstream's ``list_changed`` (tools, resources, prompts) is followed: the cached
  listing is dropped and every client of the gateway is sent the same notification;
- during a proxied call the upstream's progress and log messages go to the client that
  made the call, its sampling and elicitation requests are asked of that client, and a
  client's cancellation reaches the upstream as ``notifications/cancelled``. A request an
  upstream makes outside any call of its own (or, over stdio, while several calls of it
  are running at once and it cannot be told which one asks) is refused; such log
  messages go to the ``toolweave.mcp.server_log`` logger, never to another client;
- an upstream that fails makes the call an ``isError`` result naming it; the gateway goes
  on, and the next call reconnects.

Credentials: the gateway never passes a client's token on (the MCP specification forbids
token passthrough). An upstream sees only the gateway's own credentials, those of its
`McpServerConfig` (``auth_headers``, ``tool_auth`` callbacks).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import re
import shlex
import urllib.parse
import warnings
import weakref
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import httpx2
import mcp_types
from mcp.server.lowlevel import NotificationOptions, Server
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    ListenHandler,
    PromptsListChanged,
    ResourcesListChanged,
    ResourceUpdated,
    ToolsListChanged,
)
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.shared.uri_template import UriTemplate

from ..context import ElicitationResult
from ..errors import McpError
from .client import McpClient
from .config import McpServerConfig
from .hooks import ElicitationRequest, SamplingDeclined

__all__ = ["McpGateway", "McpProxy", "proxy_from_spec"]

log = logging.getLogger("toolweave.mcp.gateway")
server_log = logging.getLogger("toolweave.mcp.server_log")

_NOT_FOUND = (-32002, mcp_types.INVALID_PARAMS)
_SETTLE_TIMEOUT = 5.0
"""How long a finished call waits for its upstream's last progress and log messages."""


@dataclass(frozen=True)
class McpProxy:
    """One upstream server of a gateway: how to reach it (`config`, with the gateway's own
    credentials: its ``auth_headers``, or `auth`, an ``httpx2.Auth`` such as the SDK's
    ``ClientCredentialsOAuthProvider``) and the `namespace` its tools and prompts are served
    under (``<namespace><separator><name>``; `config.server_name` by default, ``""`` for
    none)."""

    config: McpServerConfig
    namespace: str | None = None
    separator: str = "_"
    auth: httpx2.Auth | None = field(default=None, compare=False, repr=False)

    @property
    def prefix(self) -> str:
        """What the upstream's tool and prompt names are prefixed with."""
        ns = self.config.server_name if self.namespace is None else self.namespace
        return f"{ns}{self.separator}" if ns else ""


def proxy_from_spec(spec: str) -> McpProxy:
    """``[NAME=]COMMAND|URL`` (``toolweave mcp serve --proxy``) as an `McpProxy`: a URL is
    streamable HTTP (SSE when its path ends in ``/sse``), anything else a command line
    started over stdio. NAME (the namespace) defaults to the URL's host or the script's
    (else the command's) name."""
    spec = spec.strip()
    name: str | None = None
    named = re.match(r"([A-Za-z0-9_-]+)=(.*)$", spec, re.DOTALL)
    if named and not re.match(r"https?://", spec, re.IGNORECASE):
        name, spec = named.group(1), named.group(2).strip()
    if re.match(r"https?://", spec, re.IGNORECASE):
        url = urllib.parse.urlsplit(spec)
        kind = "sse" if url.path.rstrip("/").endswith("/sse") else "streamable-http"
        params: dict[str, Any] = {"url": spec}
        default = url.hostname or "mcp"
    else:
        try:
            argv = shlex.split(spec)
        except ValueError as e:
            raise ValueError(f"--proxy {spec!r}: {e}") from None
        if not argv:
            raise ValueError("--proxy needs the command line that starts a server, or its URL")
        kind, params = "stdio", {"command": argv[0], "args": argv[1:]}
        scripts = [a for a in argv[1:] if re.search(r"\.(py|js|mjs|cjs|ts)$", a)]
        default = Path(scripts[0] if scripts else argv[0]).stem
    namespace = name or re.sub(r"[^A-Za-z0-9_]+", "_", default).strip("_") or "mcp"
    config = McpServerConfig(server_name=namespace, client_type=kind, params=params)  # type: ignore[arg-type]
    return McpProxy(config)


class _Call:
    """One client request the gateway is serving through an upstream."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.busy = 0
        self.idle = asyncio.Event()
        self.idle.set()

    @contextlib.asynccontextmanager
    async def forwarding(self) -> AsyncIterator[None]:
        """Marks a progress or log message of the upstream on its way to the client."""
        self.busy += 1
        self.idle.clear()
        try:
            yield
        finally:
            self.busy -= 1
            if not self.busy:
                self.idle.set()

    async def settle(self) -> None:
        """Wait (briefly) for the messages still being forwarded: they must reach the
        client before the result ends the request."""
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_SETTLE_TIMEOUT):
                await self.idle.wait()

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        async with self.forwarding():
            await self.ctx.session.report_progress(progress, total, message)


_CALL: contextvars.ContextVar[_Call | None] = contextvars.ContextVar(
    "toolweave_gateway_call", default=None
)


class _Upstream:
    """One proxied server: its client, its cached listings and its calls in flight."""

    def __init__(self, proxy: McpProxy, gateway: McpGateway) -> None:
        self.proxy = proxy
        self.name = proxy.config.server_name
        self.gateway = gateway
        self.client = self.new_client()
        self.calls: set[_Call] = set()
        self.tools: dict[str, tuple[str, mcp_types.Tool]] | None = None
        """Served name -> (name upstream, the served `Tool`); None: list again."""
        self.prompts: dict[str, tuple[str, mcp_types.Prompt]] | None = None
        self.resources: list[mcp_types.Resource] | None = None
        self.templates: list[mcp_types.ResourceTemplate] | None = None

    # the connection ----------------------------------------------------------------------
    def new_client(self) -> McpClient:
        """A client of the upstream whose hooks forward to the gateway's clients."""
        return McpClient(
            self.proxy.config,
            sampling=_Sampler(self),
            elicitation=self._elicit,
            roots=self._roots,
            on_log=self._log,
            on_list_changed=self._changed,
            on_resource_updated=self._updated,
            auth=self.proxy.auth,
        )

    async def ensure(self) -> None:
        """Connect (or reconnect) outside any client request: the connection's tasks must
        not inherit a call's context (its server's requests would be routed to it)."""
        ctx = contextvars.copy_context()
        ctx.run(_CALL.set, None)
        await asyncio.get_running_loop().create_task(self.client.connect(), context=ctx)

    def call_for(self) -> _Call | None:
        """The client request an upstream request or notification belongs to: the call
        whose context it came in (HTTP carries it), else the only call in flight."""
        call = _CALL.get()
        if call is not None and call in self.calls:
            return call
        if len(self.calls) == 1:
            return next(iter(self.calls))
        return None

    # listings ----------------------------------------------------------------------------
    async def list_tools(self) -> dict[str, tuple[str, mcp_types.Tool]]:
        if self.tools is None:
            await self.ensure()
            listed = await self.client.list_mcp_tools()
            self.tools = {}
            for t in listed:
                served = self.proxy.prefix + t.name
                self.tools[served] = (t.name, t.model_copy(update={"name": served}))
        return self.tools

    async def list_prompts(self) -> dict[str, tuple[str, mcp_types.Prompt]]:
        if self.prompts is None:
            await self.ensure()
            listed = await self.client.list_prompts() if self._offers("prompts") else []
            self.prompts = {
                self.proxy.prefix + p.name: (
                    p.name,
                    p.model_copy(update={"name": self.proxy.prefix + p.name}),
                )
                for p in listed
            }
        return self.prompts

    async def list_resources(self) -> list[mcp_types.Resource]:
        if self.resources is None:
            await self.ensure()
            self.resources = await self.client.list_resources() if self._offers() else []
        return self.resources

    async def list_templates(self) -> list[mcp_types.ResourceTemplate]:
        if self.templates is None:
            await self.ensure()
            listed = await self.client.list_resource_templates() if self._offers() else []
            self.templates = listed
        return self.templates

    def _offers(self, what: str = "resources") -> bool:
        client = self.client._core._conn.client if self.client._core._conn else None
        caps = client.server_capabilities if client is not None else None
        return caps is None or getattr(caps, what, None) is not None

    async def matches(self, uri: str) -> bool:
        """Whether `uri` is one this upstream listed, or fits one of its templates."""
        with contextlib.suppress(McpError):
            if any(str(r.uri) == uri for r in await self.list_resources()):
                return True
            for t in await self.list_templates():
                try:
                    if UriTemplate.parse(t.uri_template).match(uri) is not None:
                        return True
                except Exception:  # a template this SDK cannot parse
                    continue
        return False

    # what the upstream sends -------------------------------------------------------------
    async def _changed(self, kind: str) -> None:
        if kind == "tools":
            self.tools = None
        elif kind == "prompts":
            self.prompts = None
        else:
            self.resources = self.templates = None
        log.info("gateway: %s's %s changed", self.name, kind)
        await self.gateway.announce(kind)

    async def _updated(self, uri: str) -> None:
        await self.gateway.updated(uri)

    async def _log(
        self, server_name: str, params: mcp_types.LoggingMessageNotificationParams
    ) -> None:
        call = self.call_for()
        make_channel = self.gateway.channel
        if call is None or make_channel is None:
            server_log.info("%s: %s", server_name, params.data)
            return
        async with call.forwarding():
            channel = make_channel(call.ctx)
            logger = params.logger or server_name
            await channel.log(params.level, params.data, logger)

    async def sample(self, params: mcp_types.CreateMessageRequestParams) -> Any:
        """Ask the calling client's model (tools included when that client takes them)."""
        call = self._asking("sampling")
        session = call.ctx.session
        tools = bool(params.tools) or params.tool_choice is not None
        wanted = mcp_types.SamplingCapability(
            tools=mcp_types.SamplingToolsCapability() if tools else None
        )
        if not session.check_client_capability(mcp_types.ClientCapabilities(sampling=wanted)):
            raise RuntimeError(
                "the gateway's client does not offer sampling"
                + (" with tools (sampling.tools)" if tools else "")
            )
        kind: Any = (
            mcp_types.CreateMessageResultWithTools if tools else mcp_types.CreateMessageResult
        )
        try:
            with warnings.catch_warnings():  # sampling is deprecated on 2026-07-28
                warnings.simplefilter("ignore")
                result: Any = await session.send_request(
                    mcp_types.CreateMessageRequest(params=params),
                    kind,
                    metadata=ServerMessageMetadata(related_request_id=call.ctx.request_id),
                )
        except MCPError as e:
            if e.code == -1:
                raise SamplingDeclined(e.message) from e
            raise
        return result

    async def _elicit(self, request: ElicitationRequest) -> ElicitationResult:
        call = self._asking("elicitation")
        session, rid = call.ctx.session, call.ctx.request_id
        if request.mode == "url":
            wanted = mcp_types.ElicitationCapability(url=mcp_types.UrlElicitationCapability())
        else:
            wanted = mcp_types.ElicitationCapability()
        if not session.check_client_capability(mcp_types.ClientCapabilities(elicitation=wanted)):
            raise RuntimeError("the gateway's client does not offer elicitation")
        if request.mode == "url":
            answer = await session.elicit_url(
                request.message,
                request.url or "",
                request.elicitation_id or "",
                related_request_id=rid,
            )
        else:
            answer = await session.elicit_form(
                request.message, request.schema or {}, related_request_id=rid
            )
        content = dict(answer.content) if answer.content is not None else None
        return ElicitationResult(action=answer.action, content=content)

    async def _roots(self) -> list[str]:
        call = self._asking("roots/list")
        session = call.ctx.session
        if not session.check_client_capability(
            mcp_types.ClientCapabilities(roots=mcp_types.RootsCapability())
        ):
            raise RuntimeError("the gateway's client does not offer roots")
        with warnings.catch_warnings():  # roots are deprecated on 2026-07-28
            warnings.simplefilter("ignore")
            listed: mcp_types.ListRootsResult = await session.send_request(
                mcp_types.ListRootsRequest(),
                mcp_types.ListRootsResult,
                metadata=ServerMessageMetadata(related_request_id=call.ctx.request_id),
            )
        return [str(r.uri) for r in listed.roots]

    def _asking(self, what: str) -> _Call:
        call = self.call_for()
        if call is None:
            raise RuntimeError(
                f"{what} outside a call the gateway can attribute to one of its clients"
            )
        return call

    async def aclose(self) -> None:
        await self.client.close()


class _Sampler:
    """An upstream's sampling hook: it takes requests with tools (the gateway's client,
    when it declares ``sampling.tools``, answers them)."""

    handles_tools = True

    def __init__(self, upstream: _Upstream) -> None:
        self.upstream = upstream

    async def __call__(self, params: mcp_types.CreateMessageRequestParams) -> Any:
        return await self.upstream.sample(params)


class McpGateway:
    """Serves upstream MCP servers' tools, resources and prompts through a `Server` (see
    the module docstring). `attach` it to the `Server` that `build_mcp_server` built (which
    ``build_mcp_server(..., proxy=...)`` does): the upstreams connect when the server starts
    and close when it stops."""

    def __init__(
        self,
        proxies: Iterable[McpServerConfig | McpProxy],
        *,
        channel: Callable[[Any], Any] | None = None,
    ) -> None:
        self.channel = channel
        """Makes the `ToolChannel` of a client request (its ``ctx``), which an upstream's log
        messages during a call are sent through; None: they go to ``server_log``.
        `build_mcp_server` passes the server's own."""
        self.upstreams: list[_Upstream] = []
        prefixes: dict[str, str] = {}
        for p in proxies:
            proxy = p if isinstance(p, McpProxy) else McpProxy(p)
            if not isinstance(proxy.config, McpServerConfig):
                raise TypeError(f"proxy= expects McpServerConfig or McpProxy, got {p!r}")
            other = prefixes.get(proxy.prefix)
            if other is not None:
                raise ValueError(
                    f"the proxied servers {other!r} and {proxy.config.server_name!r} share the "
                    f"namespace {proxy.prefix!r}: give one McpProxy(namespace=...)"
                )
            prefixes[proxy.prefix] = proxy.config.server_name
            self.upstreams.append(_Upstream(proxy, self))
        self._clients: weakref.WeakSet[Any] = weakref.WeakSet()
        self._bus: InMemorySubscriptionBus | None = None
        self.subscribers: dict[str, weakref.WeakSet[Any]] = {}
        """Resource URI -> the client connections subscribed to it."""
        """The events of 2026-07-28 clients' ``subscriptions/listen`` streams."""
        self._users = 0

    # lifecycle ---------------------------------------------------------------------------
    async def start(self) -> None:
        """Connect every upstream; one that fails is logged (its listing is empty until a
        later request reaches it)."""
        for up in self.upstreams:
            try:
                await up.ensure()
            except McpError as e:
                log.warning("gateway: %s is not reachable yet: %s", up.name, e.message)

    async def aclose(self) -> None:
        """Close every upstream connection (stdio servers are stopped)."""
        for up in self.upstreams:
            with contextlib.suppress(Exception):
                await up.aclose()

    async def __aenter__(self) -> McpGateway:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def attach(self, server: Server[Any]) -> Server[Any]:
        """Serve the upstreams through `server`, next to what it serves already (its own
        names win), announcing ``listChanged`` for tools, resources and prompts."""
        local = {
            method: server.get_request_handler(method)
            for method in (
                "tools/list",
                "tools/call",
                "resources/list",
                "resources/templates/list",
                "resources/read",
                "prompts/list",
                "prompts/get",
                "completion/complete",
                "resources/subscribe",
                "resources/unsubscribe",
            )
        }

        def handler(method: str) -> Any:
            entry = local[method]
            return entry.handler if entry is not None else None

        router = _Router(self, handler)
        server.add_request_handler(
            "tools/list", mcp_types.PaginatedRequestParams, router.list_tools
        )
        server.add_request_handler("tools/call", mcp_types.CallToolRequestParams, router.call_tool)
        server.add_request_handler(
            "resources/list", mcp_types.PaginatedRequestParams, router.list_resources
        )
        server.add_request_handler(
            "resources/templates/list", mcp_types.PaginatedRequestParams, router.list_templates
        )
        server.add_request_handler(
            "resources/read", mcp_types.ReadResourceRequestParams, router.read_resource
        )
        server.add_request_handler(
            "prompts/list", mcp_types.PaginatedRequestParams, router.list_prompts
        )
        server.add_request_handler(
            "prompts/get", mcp_types.GetPromptRequestParams, router.get_prompt
        )
        server.add_request_handler(
            "completion/complete", mcp_types.CompleteRequestParams, router.complete
        )
        server.add_request_handler(
            "resources/subscribe", mcp_types.SubscribeRequestParams, router.subscribe
        )
        server.add_request_handler(
            "resources/unsubscribe", mcp_types.UnsubscribeRequestParams, router.unsubscribe
        )

        if server.get_request_handler("subscriptions/listen") is None:
            # 2026-07-28 clients hear of changes only on the streams they open
            self._bus = InMemorySubscriptionBus()
            server.add_request_handler(
                "subscriptions/listen",
                mcp_types.SubscriptionsListenRequestParams,
                ListenHandler(self._bus),
            )
        original_options = server.create_initialization_options

        def options(
            notification_options: NotificationOptions | None = None, *a: Any, **kw: Any
        ) -> Any:
            changes = notification_options or NotificationOptions(
                prompts_changed=True, resources_changed=True, tools_changed=True
            )
            return original_options(changes, *a, **kw)

        server.create_initialization_options = options  # type: ignore[method-assign]
        original_lifespan = server.lifespan

        @contextlib.asynccontextmanager
        async def lifespan(app: Server[Any]) -> AsyncIterator[Any]:
            # Entered once per server run (per connection for SSE): the first starts the
            # upstreams, the last to leave closes them.
            async with original_lifespan(app) as state:
                self._users += 1
                if self._users == 1:
                    await self.start()
                try:
                    yield state
                finally:
                    self._users -= 1
                    if not self._users:
                        # Fresh clients first (a closed one cannot reconnect, and the next
                        # run starts them), then the old ones closed: shielded, since an
                        # SSE connection's run ends cancelled.
                        old = [up.client for up in self.upstreams]
                        for up in self.upstreams:
                            up.client = up.new_client()
                            up.tools = up.prompts = up.resources = up.templates = None
                        with anyio.CancelScope(shield=True), anyio.move_on_after(30):
                            for client in old:
                                with contextlib.suppress(Exception):
                                    await client.close()

        server.lifespan = lifespan
        return server

    # clients of the gateway --------------------------------------------------------------
    def seen(self, ctx: Any) -> None:
        """Remember the connection of a client request (it is told of list changes)."""
        conn = getattr(ctx.session, "_connection", None)
        if conn is not None:
            self._clients.add(conn)

    async def updated(self, uri: str) -> None:
        """An upstream's resource `uri` changed: tell the clients subscribed to it."""
        if self._bus is not None:
            await self._bus.publish(ResourceUpdated(uri=uri))
        for conn in list(self.subscribers.get(uri, ())):
            try:
                await conn.send_resource_updated(uri)
            except Exception as e:  # best effort: a client that went away
                log.debug("gateway: a resources/updated was not delivered: %s", e)

    async def announce(self, kind: str) -> None:
        """Tell every client of the gateway that the `kind` list changed."""
        if self._bus is not None:
            event: ToolsListChanged | PromptsListChanged | ResourcesListChanged = (
                ToolsListChanged()
                if kind == "tools"
                else PromptsListChanged()
                if kind == "prompts"
                else ResourcesListChanged()
            )
            await self._bus.publish(event)
        for conn in list(self._clients):
            send = {
                "tools": conn.send_tool_list_changed,
                "prompts": conn.send_prompt_list_changed,
            }.get(kind, conn.send_resource_list_changed)
            try:
                await send()
            except Exception as e:  # best effort: a client that went away
                log.debug("gateway: a list_changed was not delivered: %s", e)


def _text_error(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], is_error=True
    )


class _Router:
    """The gateway's request handlers: the server's own first, then the upstreams'."""

    def __init__(self, gateway: McpGateway, local: Any) -> None:
        self.gateway = gateway
        self.local = local

    @property
    def upstreams(self) -> Sequence[_Upstream]:
        return self.gateway.upstreams

    async def _local(self, method: str, ctx: Any, params: Any) -> Any:
        handler = self.local(method)
        return None if handler is None else await handler(ctx, params)

    async def _each(self, what: str, up: _Upstream, listing: Any) -> Any:
        """One upstream's listing; an upstream that cannot answer is left out (logged)."""
        try:
            return await listing
        except McpError as e:
            log.warning("gateway: %s is left out of %s: %s", up.name, what, e.message)
            return None

    # tools -------------------------------------------------------------------------------
    async def list_tools(self, ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        self.gateway.seen(ctx)
        own = await self._local("tools/list", ctx, params)
        tools = list(own.tools) if own is not None else []
        taken = {t.name for t in tools}
        for up in self.upstreams:
            listed = await self._each("tools/list", up, up.list_tools())
            for served, (_, tool) in (listed or {}).items():
                if served in taken:
                    log.warning("gateway: %s's tool %r is hidden by another", up.name, served)
                    continue
                taken.add(served)
                tools.append(tool)
        return mcp_types.ListToolsResult(tools=tools)

    async def _route(self, name: str) -> tuple[_Upstream, str] | None:
        for relist in (False, True):
            for up in self.upstreams:
                if relist:
                    up.tools = None
                elif up.tools is None:
                    continue
                listed = await self._each("tools/list", up, up.list_tools())
                if listed and name in listed:
                    return up, listed[name][0]
        return None

    async def call_tool(
        self, ctx: Any, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        self.gateway.seen(ctx)
        own = self.local("tools/list")
        if own is not None:
            mine = await own(ctx, mcp_types.PaginatedRequestParams())
            if any(t.name == params.name for t in mine.tools):
                result: mcp_types.CallToolResult = await self._local("tools/call", ctx, params)
                return result
        route = await self._route(params.name)
        if route is None:
            raise MCPError(mcp_types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        up, name = route
        call = _Call(ctx)
        token = _CALL.set(call)
        up.calls.add(call)
        try:
            await up.ensure()
            # (the client's session drops progress when the client did not ask for it)
            result = await up.client.call_tool(name, params.arguments, progress=call.progress)
            await call.settle()
            return result
        except McpError as e:
            log.warning("gateway: %s's tool %r failed: %s", up.name, name, e.message)
            return _text_error(
                f"The MCP server {up.name!r} behind this gateway could not run its tool "
                f"{name!r}: {e.message}"
            )
        finally:
            up.calls.discard(call)
            _CALL.reset(token)

    # prompts -----------------------------------------------------------------------------
    async def list_prompts(self, ctx: Any, params: Any) -> mcp_types.ListPromptsResult:
        self.gateway.seen(ctx)
        own = await self._local("prompts/list", ctx, params)
        prompts = list(own.prompts) if own is not None else []
        taken = {p.name for p in prompts}
        for up in self.upstreams:
            listed = await self._each("prompts/list", up, up.list_prompts())
            for served, (_, prompt) in (listed or {}).items():
                if served not in taken:
                    taken.add(served)
                    prompts.append(prompt)
        return mcp_types.ListPromptsResult(prompts=prompts)

    async def get_prompt(
        self, ctx: Any, params: mcp_types.GetPromptRequestParams
    ) -> mcp_types.GetPromptResult:
        self.gateway.seen(ctx)
        own = self.local("prompts/list")
        if own is not None:
            mine = await own(ctx, mcp_types.PaginatedRequestParams())
            if any(p.name == params.name for p in mine.prompts):
                result: mcp_types.GetPromptResult = await self._local("prompts/get", ctx, params)
                return result
        for relist in (False, True):
            for up in self.upstreams:
                if relist:
                    up.prompts = None
                listed = await self._each("prompts/list", up, up.list_prompts())
                if listed and params.name in listed:
                    await up.ensure()
                    got: mcp_types.GetPromptResult = await self._upstream(
                        up,
                        "prompts/get",
                        up.client.get_prompt(listed[params.name][0], dict(params.arguments or {})),
                    )
                    return got
        raise MCPError(mcp_types.INVALID_PARAMS, f"Unknown prompt: {params.name}")

    async def _upstream(self, up: _Upstream, what: str, request: Any) -> Any:
        """An upstream's answer; its failure is a JSON-RPC error naming it (its own JSON-RPC
        error keeps its code)."""
        try:
            return await request
        except McpError as e:
            cause = e.cause if isinstance(e.cause, MCPError) else e.__cause__
            if isinstance(cause, MCPError):
                raise MCPError(cause.code, cause.message, data=cause.error.data) from e
            raise MCPError(
                mcp_types.INTERNAL_ERROR,
                f"the MCP server {up.name!r} behind this gateway failed {what}: {e.message}",
            ) from e

    # resources ---------------------------------------------------------------------------
    async def list_resources(self, ctx: Any, params: Any) -> mcp_types.ListResourcesResult:
        self.gateway.seen(ctx)
        own = await self._local("resources/list", ctx, params)
        resources = list(own.resources) if own is not None else []
        seen = {str(r.uri) for r in resources}
        for up in self.upstreams:
            for r in await self._each("resources/list", up, up.list_resources()) or []:
                if str(r.uri) not in seen:
                    seen.add(str(r.uri))
                    resources.append(r)
        return mcp_types.ListResourcesResult(resources=resources)

    async def list_templates(self, ctx: Any, params: Any) -> mcp_types.ListResourceTemplatesResult:
        self.gateway.seen(ctx)
        own = await self._local("resources/templates/list", ctx, params)
        templates = list(own.resource_templates) if own is not None else []
        for up in self.upstreams:
            templates.extend(
                await self._each("resources/templates/list", up, up.list_templates()) or []
            )
        return mcp_types.ListResourceTemplatesResult(resource_templates=templates)

    async def read_resource(
        self, ctx: Any, params: mcp_types.ReadResourceRequestParams
    ) -> mcp_types.ReadResourceResult:
        self.gateway.seen(ctx)
        uri = str(params.uri)
        missing: MCPError | None = None
        try:
            own = await self._local("resources/read", ctx, params)
        except MCPError as e:
            if e.code not in _NOT_FOUND:
                raise
            missing, own = e, None
        if own is not None:
            result: mcp_types.ReadResourceResult = own
            return result
        listed = [up for up in self.upstreams if await up.matches(uri)]
        for up in listed + [up for up in self.upstreams if up not in listed]:
            try:
                await up.ensure()
                contents = await up.client.read_resource(uri)
            except McpError as e:
                if up in listed:
                    await self._upstream(up, "resources/read", _raise(e))
                continue
            return mcp_types.ReadResourceResult(contents=contents)
        if missing is not None:
            raise missing
        raise MCPError(-32002, f"Resource not found: {uri}", data={"uri": uri})

    async def subscribe(
        self, ctx: Any, params: mcp_types.SubscribeRequestParams
    ) -> mcp_types.EmptyResult:
        """Remember the client's subscription; the first one to an upstream's URI is
        passed on to it (an upstream that refuses is logged: no updates come)."""
        self.gateway.seen(ctx)
        await self._local("resources/subscribe", ctx, params)
        uri = str(params.uri)
        conn = getattr(ctx.session, "_connection", None)
        subscribed = self.gateway.subscribers.setdefault(uri, weakref.WeakSet())
        first = not subscribed
        if conn is not None:
            subscribed.add(conn)
        if first:
            for up in self.upstreams:
                if await up.matches(uri):
                    try:
                        await up.ensure()
                        await up.client.subscribe_resource(uri)
                    except McpError as e:
                        log.info("gateway: %s did not subscribe to %s: %s", up.name, uri, e)
        return mcp_types.EmptyResult()

    async def unsubscribe(
        self, ctx: Any, params: mcp_types.UnsubscribeRequestParams
    ) -> mcp_types.EmptyResult:
        """Forget the client's subscription; the last one's is passed on upstream."""
        await self._local("resources/unsubscribe", ctx, params)
        uri = str(params.uri)
        subscribed = self.gateway.subscribers.get(uri)
        conn = getattr(ctx.session, "_connection", None)
        if subscribed is not None and conn is not None:
            subscribed.discard(conn)
        if subscribed is not None and not subscribed:
            del self.gateway.subscribers[uri]
            for up in self.upstreams:
                if await up.matches(uri):
                    with contextlib.suppress(McpError):
                        await up.client.unsubscribe_resource(uri)
        return mcp_types.EmptyResult()

    # completions -------------------------------------------------------------------------
    async def complete(
        self, ctx: Any, params: mcp_types.CompleteRequestParams
    ) -> mcp_types.CompleteResult:
        """A prompt's argument completes at the upstream serving it (under its own name), a
        template's at the upstream that lists it; anything else at the server itself."""
        self.gateway.seen(ctx)
        ref = params.ref
        argument = {"name": params.argument.name, "value": params.argument.value}
        context = dict(params.context.arguments or {}) if params.context else None
        route: tuple[_Upstream, Any] | None = None
        if isinstance(ref, mcp_types.PromptReference):
            for up in self.upstreams:
                listed = await self._each("prompts/list", up, up.list_prompts())
                if listed and ref.name in listed:
                    route = up, ref.model_copy(update={"name": listed[ref.name][0]})
                    break
        else:
            for up in self.upstreams:
                templates = await self._each("resources/templates/list", up, up.list_templates())
                if any(t.uri_template == ref.uri for t in templates or []):
                    route = up, ref
                    break
        if route is None:
            own = await self._local("completion/complete", ctx, params)
            if own is not None:
                result: mcp_types.CompleteResult = own
                return result
            return mcp_types.CompleteResult(completion=mcp_types.Completion(values=[]))
        up, upstream_ref = route
        await up.ensure()
        done: mcp_types.CompleteResult = await self._upstream(
            up, "completion/complete", up.client.complete(upstream_ref, argument, context)
        )
        return done


async def _raise(error: BaseException) -> Any:
    raise error
