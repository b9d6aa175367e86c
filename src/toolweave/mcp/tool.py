"""`McpToolCard` and `McpTool`: a tool that lives on an MCP server."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

import mcp_types

from .._utils.sync import run_sync
from ..context import ToolChannel, current_tool_channel
from ..errors import ErrorCode, McpError
from ..execution.content import (
    Annotations,
    AudioContent,
    ContentPart,
    EmbeddedResource,
    ImageContent,
    ResourceLink,
    TextContent,
)
from ..execution.results import StructuredText, ToolExecutionResult
from ..tools.base import Tool
from ..tools.card import ToolCard
from ._session import McpToolSession, ProgressCallback
from .config import McpServerConfig, mcp_model_tool_name, sanitize_tool_name

__all__ = ["McpTool", "McpToolCard", "mcp_result_to_value"]

_HINTS = {
    "read_only_hint": "readOnlyHint",
    "destructive_hint": "destructiveHint",
    "idempotent_hint": "idempotentHint",
    "open_world_hint": "openWorldHint",
}


class McpToolCard(ToolCard):
    """A `ToolCard` for a tool served by an MCP server.

    `name` is the model-facing name (prefixed and/or sanitised); `remote_name` is the name
    the server knows the tool by (defaults to `name`). The server's annotations are kept in
    ``metadata["annotations"]`` (``readOnlyHint``, ``idempotentHint``, ...); they are hints
    from a possibly untrusted server, and only `idempotent` is derived from them.
    """

    server_name: str = ""
    server_id: str = ""
    remote_name: str = ""

    @property
    def tool_name_on_server(self) -> str:
        """The name sent in ``tools/call``."""
        return self.remote_name or self.name

    @classmethod
    def from_mcp(
        cls,
        tool: mcp_types.Tool,
        config: McpServerConfig,
        *,
        taken: set[str] | None = None,
    ) -> McpToolCard:
        """Build a card from a listed tool; `taken` names get a hash suffix instead of a clash."""
        name = (
            mcp_model_tool_name(config.server_name, tool.name)
            if config.prefix_tool_names
            else sanitize_tool_name(tool.name)
        )
        if taken and name in taken:
            # Deterministic: a hash of the server's name, then a counter should that clash too.
            base = sanitize_tool_name(f"{name}_{_short_hash(tool.name)}")
            name, n = base, 1
            while name in taken:
                n += 1
                name = sanitize_tool_name(f"{base}_{n}")
        metadata: dict[str, Any] = {"mcp_tool_name": tool.name}
        idempotent = False
        if tool.annotations is not None:
            hints = {
                wire: getattr(tool.annotations, attr)
                for attr, wire in _HINTS.items()
                if getattr(tool.annotations, attr) is not None
            }
            if tool.annotations.title:
                hints["title"] = tool.annotations.title
            metadata["annotations"] = hints
            metadata.update({k: v for k, v in hints.items() if k != "title"})
            idempotent = bool(hints.get("idempotentHint", False))
        if tool.title:
            metadata["title"] = tool.title
        if tool.output_schema is not None:
            metadata["output_schema"] = tool.output_schema
        if tool.execution is not None and tool.execution.task_support is not None:
            metadata["task_support"] = tool.execution.task_support
        schema = dict(tool.input_schema or {})
        schema.setdefault("type", "object")
        gated = config.requires_approval
        return cls(
            id=f"{config.server_id}.{tool.name}",
            name=name,
            description=tool.description or "",
            input_params=schema,
            idempotent=idempotent,
            requires_approval=gated if isinstance(gated, bool) else tool.name in gated,
            metadata=metadata,
            server_name=config.server_name,
            server_id=config.server_id,
            remote_name=tool.name,
        )


def _short_hash(text: str) -> str:
    import hashlib

    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:8]


def mcp_result_to_value(
    result: mcp_types.CallToolResult,
    tool_name: str = "",
    mask: Callable[[str], str] | None = None,
) -> Any:
    """Turn a ``tools/call`` result into a toolweave value.

    - with `mask` (an `McpTool` passes its client's), the text, text parts and structured
      content are masked first: a server may echo the client's credentials in any answer;
    - ``isError`` → raises `McpError` (182301) whose message is the server's text, so an
      executor produces an error result the model can read;
    - only text blocks → the texts joined with a blank line (``"\\n\\n"``);
    - a block whose ``audience`` leaves out ``"assistant"`` is kept as a part (so the
      result is a list of parts) but not sent to the model;
    - images, audio, resources → a list of content parts in the server's order
      (`TextContent`, `ImageContent`, `AudioContent`, `EmbeddedResource`, `ResourceLink`),
      with their annotations;
    - ``structuredContent`` next to text only → a `StructuredText`: the joined text (a
      `str`) carrying the structured value in `.structured`;
    - ``structuredContent`` next to media → a `ToolExecutionResult` holding the text, the
      parts and the structured value (`structured`, also its `result`);
    - no content → the structured content if any, else ``None``.
    """
    texts: list[str] = []
    parts: list[ContentPart] = []
    media = False
    blocks = result.content
    if all(type(b) is mcp_types.TextContent and b.annotations is None for b in blocks):
        # The common answer, plain text: no parts needed.
        texts = [b.text for b in blocks if isinstance(b, mcp_types.TextContent)]
    else:
        for block in blocks:
            part = _part(block)
            if not part.for_model:  # for the user only: kept as a part, not in the model's text
                media = True
            elif isinstance(part, TextContent):
                texts.append(part.text)
            else:
                media = True
            parts.append(part)
    text = "\n\n".join(texts)
    structured = result.structured_content
    if mask is not None:  # a server may echo the client's credentials in any answer
        text = mask(text)
        if parts:
            parts = [_masked_part(p, mask) for p in parts]
        if structured is not None:
            structured = _masked_value(structured, mask)
    if result.is_error:
        raise McpError(
            text or f"tool {tool_name!r} reported an error without a message",
            code=ErrorCode.MCP_EXECUTION_ERROR,
            tool_name=tool_name or None,
            details={"is_error": True},
        )
    if structured is not None and media:
        return ToolExecutionResult(
            text=text, result=structured, contents=tuple(parts), structured=structured
        )
    if structured is not None and texts:
        return StructuredText(text, structured)
    if media:
        return parts
    if texts:
        return text
    return structured


def _masked_part(part: ContentPart, mask: Callable[[str], str]) -> ContentPart:
    if isinstance(part, TextContent):
        masked = mask(part.text)
        if masked != part.text:
            return part.model_copy(update={"text": masked})
    return part


def _masked_value(value: Any, mask: Callable[[str], str]) -> Any:
    """`value` (structured content: JSON data) with `mask` applied to every string, keys
    included; iterative, so any depth is fine. `value` itself is left as it is."""
    if isinstance(value, str):
        return mask(value)
    if not isinstance(value, (dict, list)):
        return value
    out: Any = {} if isinstance(value, dict) else []
    stack: list[tuple[Any, Any]] = [(value, out)]
    while stack:
        source, target = stack.pop()
        items = source.items() if isinstance(source, dict) else enumerate(source)
        for key, item in items:
            if isinstance(item, str):
                item = mask(item)
            elif isinstance(item, (dict, list)):
                copy: Any = {} if isinstance(item, dict) else []
                stack.append((item, copy))
                item = copy
            if isinstance(target, dict):
                target[mask(key) if isinstance(key, str) else key] = item
            else:
                target.append(item)
    return out


def _annotations(block: Any) -> Annotations | None:
    raw = getattr(block, "annotations", None)
    if raw is None:
        return None
    return Annotations.model_validate(raw.model_dump(exclude_none=True))


def _part(block: Any) -> ContentPart:
    """One MCP content block as a content part (a newer block type as its JSON text)."""
    notes = _annotations(block)
    if isinstance(block, mcp_types.TextContent):
        return TextContent(text=block.text, annotations=notes)
    if isinstance(block, mcp_types.ImageContent):
        return ImageContent(data=block.data, mime_type=block.mime_type, annotations=notes)
    if isinstance(block, mcp_types.AudioContent):
        return AudioContent(data=block.data, mime_type=block.mime_type, annotations=notes)
    if isinstance(block, mcp_types.EmbeddedResource):
        res = block.resource
        if isinstance(res, mcp_types.TextResourceContents):
            return EmbeddedResource(
                uri=str(res.uri), mime_type=res.mime_type, text=res.text, annotations=notes
            )
        return EmbeddedResource(
            uri=str(res.uri), mime_type=res.mime_type, data=res.blob, annotations=notes
        )
    if isinstance(block, mcp_types.ResourceLink):
        return ResourceLink(
            uri=str(block.uri),
            name=block.name,
            title=block.title,
            description=block.description,
            mime_type=block.mime_type,
            size=block.size,
            annotations=notes,
        )
    dump = getattr(block, "model_dump_json", None)  # newer than this code: keep it readable
    return TextContent(text=dump(exclude={"data"}) if callable(dump) else str(block))


class McpTool(Tool):
    """A tool on an MCP server, called through an `McpClient` or `SyncMcpClient`.

    Input preparation: defaults filled and arguments validated against the server's schema
    before anything is sent; `None` values of optional arguments are dropped
    (``skip_none_value`` defaults to True here, as in openJiuwen), ``{}`` stays ``{}``.
    Timeout: the card's `timeout`, or the per-call ``timeout`` / ``operation_timeout`` /
    ``operationTimeout`` keyword, else the client's `call_timeout`; on expiry, and when the
    caller is cancelled, the server receives ``notifications/cancelled``. `stream` is not
    supported (182010).
    """

    def __init__(self, card: McpToolCard, client: object) -> None:
        if isinstance(client, McpToolCard) and not isinstance(card, McpToolCard):
            raise TypeError(
                "McpTool takes the card first: McpTool(card, client) (openJiuwen's MCPTool "
                "takes the client first)"
            )
        if client is None:
            raise McpError(
                f"MCP tool {card.name!r} has no client", code=ErrorCode.MCP_CLIENT_NOT_SUPPORTED
            )
        session = getattr(client, "_core", client)  # an McpClient / SyncMcpClient, or a session
        if not isinstance(session, McpToolSession):
            raise TypeError(f"McpTool needs an McpClient, SyncMcpClient or session, got {client!r}")
        super().__init__(card)
        self._session: McpToolSession = session
        self._mask: Callable[[str], str] | None = getattr(session, "mask", None)
        self._required = frozenset(card.input_params.get("required") or ())

    @property
    def card(self) -> McpToolCard:
        """The tool's card."""
        card = self._card
        assert isinstance(card, McpToolCard)
        return card

    def prepare_inputs(
        self,
        inputs: Mapping[str, Any] | str | bytes | None,
        *,
        skip_none_value: bool = True,
        skip_inputs_validate: bool = False,
    ) -> dict[str, Any]:
        """Validate the arguments; `None` values of optional arguments are dropped."""
        if isinstance(inputs, (str, bytes, bytearray)):
            from ..schema.arguments import parse_arguments

            inputs = parse_arguments(
                bytes(inputs) if isinstance(inputs, bytearray) else inputs, tool_name=self.name
            )
        data = dict(inputs) if inputs is not None else {}
        if skip_none_value:
            data = self._drop_optional_none(data)
        args = super().prepare_inputs(data, skip_inputs_validate=skip_inputs_validate)
        return self._drop_optional_none(args) if skip_none_value else args

    def _drop_optional_none(self, data: dict[str, Any]) -> dict[str, Any]:
        if not any(v is None for v in data.values()):
            return data
        required = self._required
        return {k: v for k, v in data.items() if v is not None or k in required}

    def invoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        # From plain sync code one blocking hop to the connection's loop, rather than a
        # private loop that would then hop there too; anything else takes the async path.
        call_sync = getattr(self._session, "call_tool_sync", None)
        if (
            call_sync is None
            or current_tool_channel() is not None
            or asyncio._get_running_loop() is not None
        ):
            return run_sync(self.ainvoke_internal(inputs, **kwargs))
        card = self.card
        return mcp_result_to_value(
            call_sync(card.tool_name_on_server, inputs), card.name, self._mask
        )

    def _async_first(self) -> bool:
        return True  # a deadline on `invoke` cancels the async call (the server is told)

    async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        card = self.card
        # The base class already applied the card / per-call timeout around this call;
        # the client's call_timeout is the ceiling when neither is set.
        channel = current_tool_channel()
        progress = _forward_progress(channel) if channel is not None else None
        result = await self._session.call_tool(
            card.tool_name_on_server, inputs, None, progress=progress
        )
        return mcp_result_to_value(result, card.name, self._mask)


def _forward_progress(channel: ToolChannel) -> ProgressCallback:
    """The server's progress on this call, passed on to the caller's channel (e.g. the
    client of a `serve_mcp` proxy). Runs on the connection's loop: the report is handed
    to the channel's loop without waiting for it."""
    loop = channel.loop

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        if loop is None or loop is asyncio.get_running_loop():
            await channel.progress(progress, total, message)
        elif not loop.is_closed():
            asyncio.run_coroutine_threadsafe(channel.progress(progress, total, message), loop)

    return forward
