"""``toolweave mcp serve``: what its options describe, in one process or in N workers.

With ``--workers N`` the command is a supervisor (uvicorn's): it binds the port and starts
N worker processes, each of which imports this module and builds the server again from
the options, passed in the environment (``TOOLWEAVE_MCP_SERVE_OPTIONS``, JSON). What the
workers must share is given to all of them: the request-state keys
(``TOOLWEAVE_MCP_STATE_KEYS``: the user's, else one made by the supervisor for this run)
and the store of the rate limit and the cache (``--store``, else a SQLite file in a
temporary directory of this run).
"""

from __future__ import annotations

import dataclasses
import json
import os
import tempfile
from pathlib import Path
from typing import Any

from ._load import CliError, load_object, load_tools, loaded_module

__all__ = [
    "OPTIONS_ENV",
    "ServeOptions",
    "Served",
    "load_served",
    "serve_workers",
    "worker_app",
]

OPTIONS_ENV = "TOOLWEAVE_MCP_SERVE_OPTIONS"


@dataclasses.dataclass
class ServeOptions:
    """The options of ``toolweave mcp serve`` that shape the server (JSON-able)."""

    tools: str | None
    transport: str
    host: str
    port: int
    path: str | None
    name: str
    proxy: list[str]
    log_requests: bool
    mask_errors: bool
    rate_limit: str | None
    cache_ttl: float | None
    middleware: list[str]
    max_message_bytes: int
    store: str | None
    stateless: bool
    auth: str | None
    auth_resource: str | None
    auth_issuer: str | None
    auth_audience: str | None
    auth_jwks_url: str | None
    auth_key_file: str | None
    auth_introspection_url: str | None
    auth_client_id: str | None
    auth_scope: list[str]

    @property
    def wire(self) -> str:
        """The transport as `serve_mcp` names it."""
        return "streamable-http" if self.transport == "http" else self.transport

    @property
    def where(self) -> str:
        """The HTTP path served."""
        return self.path or ("/mcp" if self.transport == "http" else "/sse")


@dataclasses.dataclass
class Served:
    """What `ServeOptions` describe, loaded: the arguments of `serve_mcp`."""

    tools: list[Any]
    features: list[Any]
    proxy: list[Any]
    middleware: list[Any]
    auth: Any


def load_served(options: ServeOptions) -> Served:
    """Load the tools, features, proxies, middleware and auth `options` name."""
    if options.tools is None and not options.proxy:
        raise CliError("name the tools to serve (MODULE[:OBJECT]), or servers to --proxy")
    loaded = load_tools(options.tools) if options.tools is not None else []
    try:
        from ..mcp.features import features_in
        from ..mcp.gateway import proxy_from_spec
        from ..mcp.middleware import cli_middleware
    except ImportError as e:
        raise CliError(str(e)) from None
    try:
        proxies = [proxy_from_spec(spec) for spec in options.proxy]
        chain = cli_middleware(
            log_requests=options.log_requests,
            mask_errors=options.mask_errors,
            rate_limit=options.rate_limit,
            cache_ttl=options.cache_ttl,
            extra=[load_object(target) for target in options.middleware],
            store=options.store,
        )
    except (ValueError, TypeError) as e:
        raise CliError(str(e)) from None
    # resources, prompts and completions defined in the module are served too
    module = loaded_module(options.tools) if options.tools is not None else None
    features = features_in(vars(module).values()) if module is not None else []
    served_auth = None
    if options.auth is not None:
        from ._serve_auth import serve_auth

        served_auth = serve_auth(
            options.auth,
            stdio=options.transport == "stdio",
            resource=options.auth_resource,
            where=(options.host, options.port, options.where),
            issuer=options.auth_issuer,
            audience=options.auth_audience,
            jwks_url=options.auth_jwks_url,
            key_file=options.auth_key_file,
            introspection_url=options.auth_introspection_url,
            client_id=options.auth_client_id,
            scopes=options.auth_scope,
        )
    return Served(loaded, features, proxies, chain, served_auth)


def worker_app() -> Any:
    """The ASGI app of one worker: the server the supervisor's options describe."""
    from ..mcp import mcp_http_app

    raw = os.environ.get(OPTIONS_ENV)
    if not raw:
        raise RuntimeError(f"{OPTIONS_ENV} is not set: this is for `toolweave mcp serve --workers`")
    options = ServeOptions(**json.loads(raw))
    served = load_served(options)
    return mcp_http_app(
        served.tools,
        path=options.where,
        host=options.host,
        port=options.port,
        name=options.name,
        features=served.features,
        max_message_bytes=options.max_message_bytes,
        proxy=served.proxy,
        middleware=served.middleware,
        auth=served.auth,
        stateless=True,
    )


def serve_workers(options: ServeOptions, workers: int, *, log_level: str = "warning") -> None:
    """Serve `options` with `workers` processes under uvicorn's supervisor, until it is
    stopped (SIGINT, SIGTERM: every worker is stopped and waited for)."""
    if options.transport != "http":
        raise CliError("--workers needs --transport http (stdio and SSE are one connection)")
    load_served(options)  # fail here, once, not in every worker
    from ..mcp.server import serve_mcp_workers

    with tempfile.TemporaryDirectory(prefix="toolweave-serve-") as scratch:
        if options.store is None and (options.rate_limit or options.cache_ttl is not None):
            # the workers' counters and cache must be shared: a store for this run
            options = dataclasses.replace(options, store=f"sqlite:{Path(scratch) / 'store.db'}")
        os.environ[OPTIONS_ENV] = json.dumps(dataclasses.asdict(options))
        # without $TOOLWEAVE_MCP_STATE_KEYS, one key for all the workers of this run (a
        # restart makes a new one: pending 2026-07-28 rounds then start over)
        serve_mcp_workers(
            "toolweave.cli._serve_workers:worker_app",
            factory=True,
            workers=workers,
            host=options.host,
            port=options.port,
            log_level=log_level,
        )
