"""`serve_mcp`: expose toolweave tools as an MCP server (stdio, streamable HTTP or SSE).

Built on the SDK's low-level `Server`, so each tool's card schema is served verbatim as its
``inputSchema`` (no re-derivation from a Python signature). Calls go through
`DefaultToolExecutor`: arguments are parsed and validated as for any toolweave call, and any
failure — bad arguments, an exception in the tool, a timeout — is returned as an
``isError`` result carrying the error's message (an unknown tool name is a JSON-RPC error,
as the MCP specification asks).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import anyio
import mcp_types
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError

from .. import __version__
from ..errors import ToolCardError
from ..execution.content import (
    AudioContent,
    EmbeddedResource,
    FileContent,
    ImageContent,
    ResourceLink,
    TextContent,
)
from ..execution.executor import DefaultToolExecutor, error_text
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecutionResult
from ..tools.base import Tool

__all__ = ["McpTransport", "build_mcp_server", "serve_mcp", "serve_mcp_async"]

log = logging.getLogger("toolweave.mcp.server")

McpTransport = Literal["stdio", "streamable-http", "sse"]

_HINT_KEYS: dict[str, tuple[str, ...]] = {
    "read_only_hint": ("readOnlyHint", "read_only_hint", "read_only"),
    "destructive_hint": ("destructiveHint", "destructive_hint", "destructive"),
    "idempotent_hint": ("idempotentHint", "idempotent_hint"),
    "open_world_hint": ("openWorldHint", "open_world_hint", "open_world"),
}


def _annotations(tool: Tool) -> mcp_types.ToolAnnotations | None:
    card = tool.card
    meta: Mapping[str, Any] = card.metadata
    nested = meta.get("annotations")
    sources: list[Mapping[str, Any]] = [meta]
    if isinstance(nested, Mapping):
        sources.insert(0, nested)
    hints: dict[str, Any] = {}
    for attr, keys in _HINT_KEYS.items():
        for source in sources:
            value = next((source[k] for k in keys if k in source), None)
            if isinstance(value, bool):
                hints[attr] = value
                break
    if card.idempotent and "idempotent_hint" not in hints:
        hints["idempotent_hint"] = True
    title = next((s.get("title") for s in sources if isinstance(s.get("title"), str)), None)
    if title:
        hints["title"] = title
    return mcp_types.ToolAnnotations(**hints) if hints else None


def _mcp_tool(tool: Tool) -> mcp_types.Tool:
    card = tool.card
    schema = dict(card.input_params) if card.input_params else {}
    schema.setdefault("type", "object")
    return mcp_types.Tool(
        name=card.name,
        description=card.description or None,
        input_schema=schema,
        annotations=_annotations(tool),
    )


def _content(result: ToolExecutionResult) -> list[Any]:
    if not result.contents:
        return [mcp_types.TextContent(type="text", text=result.result_text())]
    out = [block for block in map(_block, result.contents) if block is not None]
    return out or [mcp_types.TextContent(type="text", text="")]


def _block(part: Any) -> Any:
    """One content part as an MCP content block, annotations kept (None for empty text)."""
    notes = (
        mcp_types.Annotations.model_validate(part.annotations.model_dump(exclude_none=True))
        if part.annotations is not None
        else None
    )
    if isinstance(part, TextContent):
        if not part.text:
            return None
        return mcp_types.TextContent(type="text", text=part.text, annotations=notes)
    if isinstance(part, ResourceLink):
        return mcp_types.ResourceLink(
            type="resource_link",
            uri=part.uri,
            name=part.name or part.uri.rsplit("/", 1)[-1] or "resource",
            title=part.title,
            description=part.description,
            mime_type=part.mime_type,
            size=part.size,
            annotations=notes,
        )
    if isinstance(part, EmbeddedResource):
        resource: Any = (
            mcp_types.TextResourceContents(uri=part.uri, mime_type=part.mime_type, text=part.text)
            if part.text is not None
            else mcp_types.BlobResourceContents(
                uri=part.uri, mime_type=part.mime_type, blob=part.data or ""
            )
        )
        return mcp_types.EmbeddedResource(type="resource", resource=resource, annotations=notes)
    if part.url is not None:
        return mcp_types.ResourceLink(
            type="resource_link",
            uri=part.url,
            name=getattr(part, "name", None) or part.url.rsplit("/", 1)[-1] or "file",
            mime_type=part.mime_type,
            annotations=notes,
        )
    if isinstance(part, ImageContent):
        return mcp_types.ImageContent(
            type="image", data=part.data or "", mime_type=part.mime_type, annotations=notes
        )
    if isinstance(part, AudioContent):
        return mcp_types.AudioContent(
            type="audio", data=part.data or "", mime_type=part.mime_type, annotations=notes
        )
    assert isinstance(part, FileContent)
    return mcp_types.EmbeddedResource(
        type="resource",
        resource=mcp_types.BlobResourceContents(
            uri=f"file:///{part.name or 'file'}", mime_type=part.mime_type, blob=part.data or ""
        ),
        annotations=notes,
    )


def _error(text: str) -> mcp_types.CallToolResult:
    return mcp_types.CallToolResult(
        content=[mcp_types.TextContent(type="text", text=text)], is_error=True
    )


def build_mcp_server(
    tools: Iterable[Tool],
    *,
    name: str = "toolweave",
    version: str | None = None,
    instructions: str | None = None,
) -> Server[Any]:
    """The SDK's low-level `Server` serving `tools` (run it yourself, or connect to it
    in-process with ``mcp.Client(server)``); `version` defaults to toolweave's."""
    by_name: dict[str, Tool] = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise TypeError(f"serve_mcp expects toolweave Tool objects, got {t!r}")
        if t.card.name in by_name:
            raise ToolCardError(
                f"two tools are named {t.card.name!r}; MCP tool names must be unique"
            )
        by_name[t.card.name] = t
    listing = [_mcp_tool(t) for t in by_name.values()]
    executors = {n: DefaultToolExecutor(t) for n, t in by_name.items()}

    async def list_tools(ctx: Any, params: Any) -> mcp_types.ListToolsResult:
        return mcp_types.ListToolsResult(tools=listing)

    async def call_tool(
        ctx: Any, params: mcp_types.CallToolRequestParams
    ) -> mcp_types.CallToolResult:
        executor = executors.get(params.name)
        if executor is None:
            raise MCPError(mcp_types.INVALID_PARAMS, f"Unknown tool: {params.name}")
        request = ToolExecutionRequest(
            name=params.name, arguments=json.dumps(params.arguments or {}, ensure_ascii=False)
        )
        try:
            result = await executor.aexecute_with_result(request)
        except Exception as e:  # bad arguments, aborted by a callback, not supported
            return _error(error_text(e))
        if result.is_error:
            return _error(result.result_text())
        structured = result.structured if isinstance(result.structured, dict) else None
        return mcp_types.CallToolResult(content=_content(result), structured_content=structured)

    def input_schema(tool_name: str) -> Mapping[str, Any] | None:
        t = by_name.get(tool_name)
        return None if t is None else t.card.input_params

    return Server(
        name,
        version=version or __version__,
        instructions=instructions,
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def serve_mcp_async(
    tools: Iterable[Tool],
    transport: McpTransport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str | None = None,
    name: str = "toolweave",
    log_level: str = "warning",
) -> None:
    """Serve `tools` until cancelled (stdio: until stdin closes).

    HTTP transports bind `host`:`port` (loopback by default, with the SDK's DNS-rebinding
    protection); `path` defaults to ``/mcp`` (streamable HTTP) or ``/sse`` (SSE, messages are
    posted to ``/messages/``).
    """
    server = build_mcp_server(tools, name=name)
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    import uvicorn

    if transport == "streamable-http":
        app: Any = server.streamable_http_app(streamable_http_path=path or "/mcp", host=host)
    elif transport == "sse":
        app = _sse_app(server, path or "/sse", host)
    else:
        raise ValueError(f"unknown MCP transport {transport!r}: use stdio, streamable-http or sse")
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")
    await uvicorn.Server(config).serve()


def _sse_app(server: Server[Any], sse_path: str, host: str) -> Any:
    from mcp.server.sse import SseServerTransport
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    security = None
    if host in ("127.0.0.1", "localhost", "::1"):
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=True,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
    sse = SseServerTransport("/messages/", security_settings=security)

    async def endpoint(request: Request) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return Response()

    return Starlette(
        routes=[
            Route(sse_path, endpoint=endpoint, methods=["GET"]),
            Mount("/messages/", app=sse.handle_post_message),
        ]
    )


def serve_mcp(
    tools: Iterable[Tool],
    transport: McpTransport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str | None = None,
    name: str = "toolweave",
    log_level: str = "warning",
) -> None:
    """Serve `tools` as an MCP server, blocking (see `serve_mcp_async`)."""
    tool_list = list(tools)

    async def main() -> None:
        await serve_mcp_async(
            tool_list, transport, host=host, port=port, path=path, name=name, log_level=log_level
        )

    anyio.run(main)
