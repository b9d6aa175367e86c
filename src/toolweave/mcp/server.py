"""`serve_mcp`: expose toolweave tools as an MCP server (stdio, streamable HTTP or SSE).

Built on the SDK's low-level `Server`, so each tool's card schema is served verbatim as its
``inputSchema`` (no re-derivation from a Python signature). Calls go through
`DefaultToolExecutor`: arguments are parsed and validated as for any toolweave call, and any
failure — bad arguments, an exception in the tool, a timeout — is returned as an
``isError`` result carrying the error's message (an unknown tool name is a JSON-RPC error,
as the MCP specification asks).

Typed returns (a pydantic model, a dataclass, a TypedDict or ``dict``) publish an
``outputSchema`` and return ``structuredContent`` next to the text. A served tool reaches its
client through `ToolContext` (progress, logs, sampling, elicitation; see `_ServerChannel`).
Resources, resource templates, prompts and completions (`features.py`) are served alongside.
A tool may also return the SDK's content blocks (or a whole ``CallToolResult``), which are
sent as they are.
"""

from __future__ import annotations

import asyncio
import base64
import dataclasses
import json
import logging
import math
import os
import typing
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import anyio
import mcp_types
import pydantic
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from .. import __version__
from ..context import ElicitationResult, Root, ToolContext, use_approval, use_tool_channel
from ..errors import (
    McpError,
    ToolArgumentsError,
    ToolCardError,
    ToolNotSupportedError,
    ToolweaveError,
)
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
from ..service.guardrails import with_card_guardrails
from ..tools.approval import needs_approval, validated_arguments
from ..tools.base import Tool
from ..tools.pause import ToolPause
from ._input_required import current_round, install_request_state, with_input_rounds
from ._stdio_guard import DEFAULT_MAX_MESSAGE_BYTES
from .features import Feature, McpCompletion, McpPrompt, McpResource

if typing.TYPE_CHECKING:
    from .config import McpServerConfig
    from .gateway import McpProxy
    from .middleware import McpMiddleware

if typing.TYPE_CHECKING:
    from .auth import McpAuth

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


def _is_object_type(tp: Any) -> bool:
    origin = typing.get_origin(tp) or tp
    if isinstance(origin, type):
        if issubclass(origin, pydantic.BaseModel) or dataclasses.is_dataclass(origin):
            return True
        if typing.is_typeddict(origin):
            return True
        return issubclass(origin, Mapping)
    return False


class _BrokenOutput(Exception):
    """A served tool's value does not fit the ``outputSchema`` it published."""


def _finite_number(checker: Any, instance: Any) -> bool:
    # NaN and the infinities are `null` on the wire (JSON has no such numbers): as the
    # client will see them, they are not numbers.
    return (
        isinstance(instance, (int, float))
        and not isinstance(instance, bool)
        and math.isfinite(instance)
    )


def _schema_validator(schema: dict[str, Any]) -> Any:
    """A compiled validator for a published ``outputSchema``, as clients check it ($refs
    only within the schema), with the wire's view of NaN and infinities."""
    from jsonschema.validators import extend, validator_for
    from referencing import Registry

    base: Any = validator_for(schema)
    base.check_schema(schema)
    checker = base.TYPE_CHECKER.redefine("number", _finite_number)
    return extend(base, type_checker=checker)(schema, registry=Registry())


class _Output:
    """A tool's published ``outputSchema`` and how to turn its value into structured content
    that fits it (a value that does not is `_BrokenOutput`: every client would refuse the
    whole result, text included)."""

    def __init__(self, tool: Tool) -> None:
        self.schema: dict[str, Any] | None = None
        self._adapter: pydantic.TypeAdapter[Any] | None = None
        self._validator: Any = None
        self._type = ""
        # Only a function's annotation: a re-served McpTool's upstream outputSchema is not
        # published, as its value (text) cannot fill structuredContent.
        func = getattr(tool, "func", None)
        if func is None:
            return
        try:
            ret = typing.get_type_hints(func).get("return")
        except Exception:  # unresolvable annotations: no schema
            return
        if ret is None or not _is_object_type(ret):
            return
        try:
            adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(ret)
            schema = adapter.json_schema(mode="serialization")
            validator = _schema_validator(schema)
        except Exception as e:  # a type pydantic (or JSON Schema) cannot describe
            log.debug("no outputSchema for %s: %s", tool.card.name, e)
            return
        if schema.get("type") == "object":
            self.schema, self._adapter, self._validator = schema, adapter, validator
            self._type = _type_name(ret)

    def structured(self, value: Any, *, serialized: bool = False) -> dict[str, Any] | None:
        """The structured content for the tool's return `value` (`serialized`: already
        JSON data, e.g. a `StructuredText`'s); None when no schema is published."""
        if self.schema is None or self._adapter is None:
            return None
        if serialized:
            out = value
        else:
            # Pydantic only warns about a value of another type (a dict for a model, say);
            # the published schema, which clients check, is the judge.
            try:
                out = self._adapter.dump_python(value, mode="json", warnings=False)
            except Exception as e:
                raise _BrokenOutput(self._broken(_why(e))) from e
        if not self._validator.is_valid(out):
            from jsonschema.exceptions import relevance

            errors = sorted(self._validator.iter_errors(out), key=relevance, reverse=True)[:3]
            why = "; ".join(
                "/".join(map(str, e.absolute_path)) + ": " + e.message
                if e.absolute_path
                else e.message
                for e in errors
            )
            raise _BrokenOutput(self._broken(why or "it does not fit"))
        return typing.cast("dict[str, Any]", out)

    def _broken(self, why: str) -> str:
        return (
            f"broke its declared output type {self._type}: the value it returned does not "
            f"match the outputSchema it published ({why[:300]})"
        )


def _why(error: Exception) -> str:
    lines = [ln.strip() for ln in str(error).splitlines() if ln.strip()]
    return lines[0] if lines else type(error).__name__


def _type_name(tp: Any) -> str:
    return tp.__name__ if isinstance(tp, type) and not typing.get_args(tp) else repr(tp)


def _mcp_tool(tool: Tool, output: _Output) -> mcp_types.Tool:
    card = tool.card
    schema = dict(card.input_params) if card.input_params else {}
    schema.setdefault("type", "object")
    return mcp_types.Tool(
        name=card.name,
        description=card.description or None,
        input_schema=schema,
        output_schema=output.schema,
        annotations=_annotations(tool),
    )


_MCP_BLOCKS = (
    mcp_types.TextContent,
    mcp_types.ImageContent,
    mcp_types.AudioContent,
    mcp_types.ResourceLink,
    mcp_types.EmbeddedResource,
)


def _content(result: ToolExecutionResult) -> list[Any]:
    raw = result.result
    if isinstance(raw, _MCP_BLOCKS):
        return [raw]
    if isinstance(raw, (list, tuple)) and raw and all(isinstance(b, _MCP_BLOCKS) for b in raw):
        return list(raw)
    if not result.contents:
        return [mcp_types.TextContent(type="text", text=result.result_text())]
    out = [block for block in map(_block, result.contents) if block is not None]
    return out or [mcp_types.TextContent(type="text", text="")]


def _block(part: Any) -> Any:
    """One content part (or an SDK block, kept as it is) as an MCP content block, annotations
    kept (None for empty text)."""
    if isinstance(part, _MCP_BLOCKS):
        return part
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


_LEVEL_KEY = "toolweave.log_level"
_REQUIRED_KEY = "required_capabilities"


def _is_modern(ctx: Any) -> bool:
    """Whether this request came over a 2026-07-28 (or later) connection."""
    return getattr(ctx.session, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def _missing_capability(error: BaseException) -> dict[str, Any] | None:
    """The client capabilities a tool's failure needed and the client did not declare
    (`_ServerChannel._require`), found on the error or what it wraps."""
    seen: BaseException | None = error
    for _ in range(8):
        if seen is None:
            return None
        if isinstance(seen, ToolNotSupportedError):
            needed = seen.details.get(_REQUIRED_KEY)
            if isinstance(needed, dict):
                return needed
        seen = getattr(seen, "cause", None) or seen.__cause__
    return None


def _connection_state(ctx: Any) -> dict[str, Any]:
    """The connection's scratch state (the session object is per request; the SDK offers
    the connection's `state` to handlers only through it)."""
    state = getattr(getattr(ctx.session, "_connection", None), "state", None)
    return state if isinstance(state, dict) else {}


_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")


class _ServerChannel:
    """The `ToolChannel` of a tool served over MCP: `ToolContext` calls become progress and
    log notifications and sampling / elicitation requests to the client of this call."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx
        self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        await self.ctx.session.report_progress(progress, total, message)

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        level = level.lower()
        if level not in _LEVELS:
            level = "info"
        threshold = _connection_state(self.ctx).get(_LEVEL_KEY, "debug")
        if _LEVELS.index(level) < _LEVELS.index(threshold):
            return
        with warnings.catch_warnings():  # deprecated for 2026-07-28, still the way for 2025
            warnings.simplefilter("ignore")
            await self.ctx.session.send_log_message(
                level, data, logger, related_request_id=self.ctx.request_id
            )

    def _require(
        self,
        what: str,
        capability: mcp_types.ClientCapabilities,
        required: mcp_types.ClientCapabilities | None = None,
    ) -> None:
        session = self.ctx.session
        if not session.can_send_request and not _is_modern(self.ctx):
            # a stateless server (`stateless=True`, several workers) keeps no session: a
            # 2025 client's answer would have nowhere to land, whatever it declared
            raise ToolNotSupportedError(
                f"{what} is not available: this server is stateless (no sessions), so it "
                f"cannot send requests to a client of protocol {session.protocol_version}; "
                "a 2026-07-28 client can be asked"
            )
        if not session.check_client_capability(capability):
            # `required` (the shape the spec names) travels with the error: a tool that lets
            # it escape gets its 2026-07-28 client a -32021 naming it (see `call_tool`).
            needed = (required or capability).model_dump(
                by_alias=True, mode="json", exclude_none=True
            )
            raise ToolNotSupportedError(
                f"{what} is not available: the MCP client does not offer it",
                details={_REQUIRED_KEY: needed},
            )
        if not session.can_send_request:
            raise ToolNotSupportedError(
                f"{what} is not available: the client connected with protocol "
                f"{session.protocol_version}, which has no server-initiated requests (a "
                "client that connects with the initialize handshake can be asked)"
            )

    async def sample(self, messages: Any, **params: Any) -> str:
        params.setdefault("max_tokens", 1000)
        asking = current_round()
        if asking is not None:  # 2026-07-28: the question goes in an input-required result
            return await asking.sample(
                mcp_types.CreateMessageRequestParams(
                    messages=_sampling_messages(messages), **params
                )
            )
        self._require(
            "sampling", mcp_types.ClientCapabilities(sampling=mcp_types.SamplingCapability())
        )
        try:
            with warnings.catch_warnings():  # deprecated for 2026-07-28, the way for 2025
                warnings.simplefilter("ignore")
                result = await self.ctx.session.create_message(
                    _sampling_messages(messages), related_request_id=self.ctx.request_id, **params
                )
        except MCPError as e:
            raise McpError(f"sampling failed: {e.message}", cause=e) from e
        blocks = result.content if isinstance(result.content, list) else [result.content]
        return "".join(getattr(b, "text", "") for b in blocks)

    async def elicit(self, message: str, schema: dict[str, Any]) -> ElicitationResult:
        asking = current_round()
        if asking is not None:
            return await asking.elicit(message, schema)
        self._require(
            "elicitation",
            mcp_types.ClientCapabilities(elicitation=mcp_types.ElicitationCapability()),
            mcp_types.ClientCapabilities(
                elicitation=mcp_types.ElicitationCapability(
                    form=mcp_types.FormElicitationCapability()
                )
            ),
        )
        try:
            result = await self.ctx.session.elicit_form(
                message, schema, related_request_id=self.ctx.request_id
            )
        except MCPError as e:
            raise McpError(f"elicitation failed: {e.message}", cause=e) from e
        content = dict(result.content) if result.content is not None else None
        return ElicitationResult(action=result.action, content=content)

    async def list_roots(self) -> list[Root]:
        asking = current_round()
        if asking is not None:
            return await asking.list_roots()
        self._require("roots", mcp_types.ClientCapabilities(roots=mcp_types.RootsCapability()))
        try:
            with warnings.catch_warnings():  # deprecated for 2026-07-28, the way for 2025
                warnings.simplefilter("ignore")
                result = await self.ctx.session.list_roots()
        except MCPError as e:
            raise McpError(f"listing the roots failed: {e.message}", cause=e) from e
        return [Root(uri=str(r.uri), name=r.name) for r in result.roots]


_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approve": {
            "type": "boolean",
            "title": "Run this tool call",
            "description": "Yes runs the call; no refuses it.",
            "default": False,
        }
    },
    "required": ["approve"],
}


async def _approval_refused(
    tool: Tool, request: ToolExecutionRequest, channel: _ServerChannel
) -> str | None:
    """For a tool whose card requires approval: ask the client's user through MCP
    elicitation; the error text when the call may not run (declined, or the client cannot
    be asked), else None. The policy, and the person, see the arguments the tool would run
    with (validated, defaults filled in); invalid ones are not asked about: the call fails
    its validation without running."""
    policy = tool.card.requires_approval
    if policy is False:
        return None
    try:
        arguments = await validated_arguments(tool, request)
    except ToolArgumentsError:
        return None  # the call is refused by the tool's own validation; it never runs
    context = ToolContext(tool_name=tool.card.name, request_id=request.id)
    if not await needs_approval(policy, request, context, arguments=arguments):
        return None
    shown = json.dumps(arguments, default=str)  # ensure_ascii: control characters escaped
    question = f"The tool {tool.card.name!r} wants to run with these arguments: {shown}. Allow it?"
    try:
        answer = await channel.elicit(question, _APPROVAL_SCHEMA)
    except ToolNotSupportedError:
        return (
            f"The tool {tool.card.name!r} requires the user's approval, and this MCP client "
            "cannot ask for it (it does not support elicitation); the call was not run."
        )
    except ToolweaveError as e:
        return f"Approval for {tool.card.name!r} could not be asked: {e.message}"
    if answer.action == "accept" and (answer.content or {}).get("approve") is True:
        return None
    return f"The user did not approve this call of {tool.card.name!r}; it was not run."


def _raised_pause(result: Any) -> ToolPause | None:
    """The `NeedsApproval` / `CallDeferred` a served tool raised (its executor made it an
    error result), or None."""
    error = result.error if result.is_error else None
    cause = error if isinstance(error, ToolPause) else getattr(error, "cause", None)
    return cause if isinstance(cause, ToolPause) else None


async def _ask_for_pause(tool: Tool, pause: ToolPause, channel: _ServerChannel) -> Any:
    """For a served tool that raised `NeedsApproval`: ask the client's user through MCP
    elicitation; the decision to run it again with (`Approve()`), or the error text. A
    `CallDeferred` has nobody to answer it here: the error text."""
    name = tool.card.name
    if pause.kind == "deferred":
        return (
            f"The tool {name!r} waits for a result from outside (CallDeferred), which an MCP "
            "client cannot give; the call was not completed."
        )
    why = f" ({json.dumps(pause.message)})" if pause.message else ""
    question = f"The tool {name!r} asks for approval{why}. Allow it to go on?"
    try:
        answer = await channel.elicit(question, _APPROVAL_SCHEMA)
    except ToolNotSupportedError:
        return (
            f"The tool {name!r} asked for the user's approval, and this MCP client cannot ask "
            "for it (it does not support elicitation); the call was not completed."
        )
    except ToolweaveError as e:
        return f"Approval for {name!r} could not be asked: {e.message}"
    if answer.action == "accept" and (answer.content or {}).get("approve") is True:
        from ..service.approvals import Approve

        return Approve()
    return f"The user did not approve this call of {name!r}; it was not completed."


def _role_and_block(message: Any) -> tuple[Any, Any, Any]:
    """(role, content, content block) of a message given as text (a user message) or as a
    `{"role", "content"}` mapping; the block is None when the content is not a part."""
    role, content = (
        ("user", message) if isinstance(message, str) else (message["role"], message["content"])
    )
    block = (
        mcp_types.TextContent(type="text", text=content)
        if isinstance(content, str)
        else _block(content)
    )
    return role, content, block


def _sampling_messages(messages: Any) -> list[mcp_types.SamplingMessage]:
    items = [messages] if isinstance(messages, (str, Mapping)) else list(messages)
    out: list[mcp_types.SamplingMessage] = []
    for m in items:
        if isinstance(m, mcp_types.SamplingMessage):
            out.append(m)
            continue
        role, _, block = _role_and_block(m)
        out.append(mcp_types.SamplingMessage(role=role, content=block))
    return out


# resources and prompts ------------------------------------------------------------------------
def _resource_contents(uri: str, mime: str | None, value: Any) -> list[Any]:
    if isinstance(value, (mcp_types.TextResourceContents, mcp_types.BlobResourceContents)):
        return [value]
    if isinstance(value, (list, tuple)):
        return [c for v in value for c in _resource_contents(uri, mime, v)]
    if isinstance(value, (bytes, bytearray)):
        blob = base64.b64encode(bytes(value)).decode("ascii")
        return [
            mcp_types.BlobResourceContents(
                uri=uri, mime_type=mime or "application/octet-stream", blob=blob
            )
        ]
    if isinstance(value, str):
        return [mcp_types.TextResourceContents(uri=uri, mime_type=mime or "text/plain", text=value)]
    from ..execution.text import result_to_text

    return [
        mcp_types.TextResourceContents(
            uri=uri, mime_type=mime or "application/json", text=result_to_text(value)
        )
    ]


def _prompt_messages(value: Any) -> list[mcp_types.PromptMessage]:
    items = [value] if isinstance(value, (str, Mapping)) else list(value or [])
    out: list[mcp_types.PromptMessage] = []
    for m in items:
        if isinstance(m, mcp_types.PromptMessage):
            out.append(m)
            continue
        role, content, block = _role_and_block(m)
        if block is None:
            raise ToolCardError(f"a prompt message's content {content!r} is not a content part")
        out.append(mcp_types.PromptMessage(role=role, content=block))
    return out


class _Features:
    """The request handlers of resources, prompts and completions."""

    def __init__(self, features: Iterable[Feature]) -> None:
        self.resources: dict[str, McpResource] = {}
        self.templates: list[tuple[UriTemplate, McpResource]] = []
        self.prompts: dict[str, McpPrompt] = {}
        self.completions: dict[tuple[str, str], McpCompletion] = {}
        for f in features:
            if isinstance(f, McpResource):
                if f.is_template:
                    self.templates.append((UriTemplate.parse(f.uri), f))
                else:
                    self.resources[f.uri] = f
            elif isinstance(f, McpPrompt):
                self.prompts[f.name] = f
            elif isinstance(f, McpCompletion):
                self.completions[(f.ref, f.argument)] = f
            else:
                raise TypeError(f"not a resource, prompt or completion: {f!r}")

    async def list_resources(self, ctx: Any, params: Any) -> mcp_types.ListResourcesResult:
        return mcp_types.ListResourcesResult(
            resources=[
                mcp_types.Resource(
                    uri=r.uri,
                    name=r.name,
                    title=r.title,
                    description=r.description,
                    mime_type=r.mime_type,
                )
                for r in self.resources.values()
            ]
        )

    async def list_templates(self, ctx: Any, params: Any) -> mcp_types.ListResourceTemplatesResult:
        return mcp_types.ListResourceTemplatesResult(
            resource_templates=[
                mcp_types.ResourceTemplate(
                    uri_template=r.uri,
                    name=r.name,
                    title=r.title,
                    description=r.description,
                    mime_type=r.mime_type,
                )
                for _, r in self.templates
            ]
        )

    async def read_resource(
        self, ctx: Any, params: mcp_types.ReadResourceRequestParams
    ) -> mcp_types.ReadResourceResult:
        uri = str(params.uri)
        found = self.resources.get(uri)
        variables: dict[str, Any] = {}
        if found is None:
            for template, candidate in self.templates:
                match = template.match(uri)
                if match is None:
                    continue
                refused = candidate.security.validate(match)
                if refused is not None:
                    # The first matching template decides (as in the SDK's server): a later,
                    # looser one must not take a value this one refused.
                    log.info(
                        "resource template %r: the value of %r failed its path checks "
                        "(ResourceSecurity); answered as not found",
                        candidate.uri,
                        refused,
                    )
                    break
                found, variables = candidate, dict(match)
                break
        if found is None:
            # -32002 until 2025-11-25; 2026-07-28 standardised on -32602 (SEP-2164).
            code = mcp_types.INVALID_PARAMS if _is_modern(ctx) else -32002
            raise MCPError(code, f"Resource not found: {uri}", data={"uri": uri})
        value = await found.read(**variables)
        return mcp_types.ReadResourceResult(
            contents=_resource_contents(uri, found.mime_type, value)
        )

    async def subscribe(self, ctx: Any, params: Any) -> mcp_types.EmptyResult:
        return mcp_types.EmptyResult()

    async def list_prompts(self, ctx: Any, params: Any) -> mcp_types.ListPromptsResult:
        return mcp_types.ListPromptsResult(
            prompts=[
                mcp_types.Prompt(
                    name=p.name,
                    title=p.title,
                    description=p.description,
                    arguments=[
                        mcp_types.PromptArgument(name=n, required=req) for n, req in p.arguments
                    ],
                )
                for p in self.prompts.values()
            ]
        )

    async def get_prompt(
        self, ctx: Any, params: mcp_types.GetPromptRequestParams
    ) -> mcp_types.GetPromptResult:
        p = self.prompts.get(params.name)
        if p is None:
            raise MCPError(mcp_types.INVALID_PARAMS, f"Unknown prompt: {params.name}")
        args = dict(params.arguments or {})
        missing = [n for n, req in p.arguments if req and n not in args]
        if missing:
            raise MCPError(mcp_types.INVALID_PARAMS, f"missing prompt arguments: {missing}")
        known = {n for n, _ in p.arguments}
        with use_tool_channel(_ServerChannel(ctx)):  # a prompt's ToolContext asks the client
            value = await p.render({k: v for k, v in args.items() if k in known})
        if isinstance(value, mcp_types.GetPromptResult):
            return value
        return mcp_types.GetPromptResult(
            description=p.description, messages=_prompt_messages(value)
        )

    async def complete(
        self, ctx: Any, params: mcp_types.CompleteRequestParams
    ) -> mcp_types.CompleteResult:
        ref = params.ref
        key = getattr(ref, "name", None) or getattr(ref, "uri", None) or ""
        found = self.completions.get((str(key), params.argument.name))
        values: list[str] = []
        if found is not None:
            context = dict(params.context.arguments or {}) if params.context else {}
            values = await found.complete(params.argument.value, context)
        return mcp_types.CompleteResult(
            completion=mcp_types.Completion(
                values=values[:100], total=len(values), has_more=len(values) > 100
            )
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
    features: Iterable[Feature] = (),
    proxy: Iterable[McpServerConfig | McpProxy] = (),
    middleware: Iterable[McpMiddleware] = (),
) -> Server[Any]:
    """The SDK's low-level `Server` serving `tools` and `features` (resources, prompts,
    completions); run it yourself, or connect to it in-process with ``mcp.Client(server)``.
    `version` defaults to toolweave's. `proxy`: other MCP servers whose tools, resources
    and prompts are served too, under namespaces (see `toolweave.mcp.gateway`).
    `middleware`: a chain around every request (see `toolweave.mcp.middleware`)."""
    by_name: dict[str, Tool] = {}
    for t in tools:
        if not isinstance(t, Tool):
            raise TypeError(f"serve_mcp expects toolweave Tool objects, got {t!r}")
        if t.card.name in by_name:
            raise ToolCardError(
                f"two tools are named {t.card.name!r}; MCP tool names must be unique"
            )
        by_name[t.card.name] = t
    outputs = {n: _Output(t) for n, t in by_name.items()}
    listing = [_mcp_tool(t, outputs[n]) for n, t in by_name.items()]
    executors = {n: with_card_guardrails(t, DefaultToolExecutor(t)) for n, t in by_name.items()}
    served = _Features(features)

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
        channel = _ServerChannel(ctx)
        refused = await _approval_refused(by_name[params.name], request, channel)
        if refused is not None:
            return _error(refused)
        try:
            with use_tool_channel(channel):
                result = await executor.aexecute_with_result(request)
            pause = _raised_pause(result)
            if pause is not None:  # the tool paused itself: ask the client's user, then again
                decided = await _ask_for_pause(by_name[params.name], pause, channel)
                if isinstance(decided, str):
                    return _error(decided)
                with use_tool_channel(channel), use_approval(request.id, decided):
                    result = await executor.aexecute_with_result(request)
                if _raised_pause(result) is not None:
                    return _error(
                        f"The tool {params.name!r} asked for approval again after it was "
                        "approved; the call was not completed."
                    )
        except Exception as e:  # bad arguments, aborted by a callback, not supported
            needed = _missing_capability(e)
            if needed is not None and _is_modern(ctx):
                # 2026-07-28: a request that needs a capability the client did not declare
                # is refused with MissingRequiredClientCapabilityError (HTTP 400).
                raise MCPError(
                    mcp_types.MISSING_REQUIRED_CLIENT_CAPABILITY,
                    f"The tool {params.name!r} needs a client capability this request did "
                    f"not declare: {', '.join(needed)}",
                    data={"requiredCapabilities": needed},
                ) from e
            return _error(error_text(e))
        if isinstance(result.result, mcp_types.CallToolResult):
            return result.result
        if result.is_error:
            return _error(result.result_text())
        output = outputs[params.name]
        try:
            structured = (
                output.structured(result.structured, serialized=True)
                if isinstance(result.structured, dict)
                else output.structured(result.result)
            )
        except _BrokenOutput as e:
            log.warning("tool %r: %s", params.name, e)
            return _error(f"The tool {params.name!r} {e}.")
        if structured is None and isinstance(result.structured, dict):
            structured = result.structured  # no outputSchema: sent as it is
        return mcp_types.CallToolResult(content=_content(result), structured_content=structured)

    async def set_level(ctx: Any, params: mcp_types.SetLevelRequestParams) -> mcp_types.EmptyResult:
        _connection_state(ctx)[_LEVEL_KEY] = params.level
        return mcp_types.EmptyResult()

    def input_schema(tool_name: str) -> Mapping[str, Any] | None:
        t = by_name.get(tool_name)
        return None if t is None else t.card.input_params

    handlers: dict[str, Any] = {}
    if served.resources or served.templates:
        handlers.update(
            on_list_resources=served.list_resources,
            on_list_resource_templates=served.list_templates,
            on_read_resource=served.read_resource,
            on_subscribe_resource=served.subscribe,
            on_unsubscribe_resource=served.subscribe,
        )
    if served.prompts:
        handlers.update(
            on_list_prompts=served.list_prompts,
            on_get_prompt=with_input_rounds(served.get_prompt),
        )
    if served.prompts or served.templates:
        handlers["on_completion"] = served.complete
    with warnings.catch_warnings():  # logging is deprecated for 2026-07-28, needed for 2025
        warnings.simplefilter("ignore")
        server: Server[Any] = Server(
            name,
            version=version or __version__,
            instructions=instructions,
            get_tool_input_schema=input_schema,
            on_list_tools=list_tools,
            on_call_tool=with_input_rounds(call_tool),
            on_set_logging_level=set_level,
            **handlers,
        )
    install_request_state(server, name)  # 2026-07-28 requestState: sealed, verified
    proxies = list(proxy)
    if proxies:
        from .gateway import McpGateway

        McpGateway(proxies, channel=_ServerChannel).attach(server)
    chain = list(middleware)
    if chain:
        from .middleware import apply_middleware

        apply_middleware(server, chain)
    return server


async def serve_mcp_async(
    tools: Iterable[Tool],
    transport: McpTransport = "stdio",
    *,
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str | None = None,
    name: str = "toolweave",
    log_level: str = "warning",
    features: Iterable[Feature] = (),
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    proxy: Iterable[McpServerConfig | McpProxy] = (),
    middleware: Iterable[McpMiddleware] = (),
    auth: McpAuth | None = None,
    stateless: bool = False,
) -> None:
    """Serve `tools` (and `features`: resources, prompts, completions) until cancelled
    (stdio: until stdin closes). `proxy`: other MCP servers whose tools, resources and
    prompts are served too (see `toolweave.mcp.gateway`); `middleware`: a chain around
    every request (`toolweave.mcp.middleware`).

    HTTP transports bind `host`:`port` (loopback by default, with the SDK's DNS-rebinding
    protection); `path` defaults to ``/mcp`` (streamable HTTP) or ``/sse`` (SSE, messages are
    posted to ``/messages/``). A request longer than `max_message_bytes` (4 MiB by default)
    is refused unread: over stdio with a JSON-RPC error -32600 (the session goes on), over
    HTTP with status 413. `auth` (HTTP only) makes the server an OAuth 2.1 resource server:
    every request needs a bearer token it verifies (see `McpAuth`). `stateless`
    (streamable HTTP): no sessions, see `mcp_http_app`.
    """
    if max_message_bytes <= 0:
        raise ValueError("max_message_bytes must be a positive number of bytes")
    if auth is not None and transport == "stdio":
        raise ValueError(
            "auth= is for HTTP transports; over stdio, credentials come from the environment"
        )
    tools, features = list(tools), list(features)
    server = build_mcp_server(
        tools, name=name, features=features, proxy=proxy, middleware=middleware
    )
    if transport == "stdio":
        from ._stdio_guard import checked_stdio_server

        async with checked_stdio_server(max_message_bytes) as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    import uvicorn

    if transport == "streamable-http":
        app: Any = _http_app(server, path or "/mcp", host, max_message_bytes, stateless=stateless)
    elif transport == "sse":
        if stateless:
            raise ValueError("stateless= is for streamable HTTP; SSE always has sessions")
        app = _sse_app(server, path or "/sse", host, max_message_bytes)
    else:
        raise ValueError(f"unknown MCP transport {transport!r}: use stdio, streamable-http or sse")
    if auth is not None:
        from .auth import default_resource

        app = auth.protect(
            app,
            resource=default_resource(
                host, port, path or ("/mcp" if transport == "streamable-http" else "/sse")
            ),
            tools=tools,
            features=features,
            max_message_bytes=max_message_bytes,
            server=server,
            transport=transport,
        )
    if transport == "streamable-http":
        app = _Health(app)
    config = uvicorn.Config(app, host=host, port=port, log_level=log_level, lifespan="on")
    await uvicorn.Server(config).serve()


HEALTH_PATH = "/healthz"
"""Where a streamable-HTTP server answers ``GET`` with 200 ``ok`` (no auth), for a load
balancer's or orchestrator's health check."""


def _http_app(
    server: Server[Any], path: str, host: str, max_message_bytes: int, *, stateless: bool
) -> Any:
    return server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        max_request_body_size=max_message_bytes,
        stateless_http=stateless,
    )


class _Health:
    """`app` with ``GET /healthz`` answered in front of it (before any auth)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["path"] == HEALTH_PATH:
            from starlette.responses import PlainTextResponse

            ok = scope["method"] in ("GET", "HEAD")
            reply = PlainTextResponse("ok" if ok else "method not allowed", 200 if ok else 405)
            await reply(scope, receive, send)
            return
        await self.app(scope, receive, send)


def mcp_http_app(
    tools: Iterable[Tool],
    *,
    path: str = "/mcp",
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str = "toolweave",
    features: Iterable[Feature] = (),
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    proxy: Iterable[McpServerConfig | McpProxy] = (),
    middleware: Iterable[McpMiddleware] = (),
    auth: McpAuth | None = None,
    stateless: bool = True,
) -> Any:
    """An ASGI app serving `tools` over streamable HTTP at `path`, for an ASGI server of
    your own: ``app = mcp_http_app([...])`` in ``myapp.py``, then ``uvicorn myapp:app
    --workers 4`` or ``gunicorn -k uvicorn_worker.UvicornWorker -w 4 myapp:app`` (each
    worker imports the module and builds its own server). ``GET /healthz`` answers ``ok``.

    `stateless` (the default here): no ``Mcp-Session-Id``, so any worker can answer any
    request. 2026-07-28 requests are sessionless anyway; a 2025 client is served too, each
    request on its own: the server cannot send it requests (elicitation, sampling, roots:
    a tool that asks gets an error result) and there is no GET event stream. Whatever the
    workers must share is not kept in the process: rate limits and cached results go in a
    ``store=`` of the middleware (`toolweave.mcp.store.SqliteStore`), and the 2026-07-28
    request state is sealed with the keys in ``TOOLWEAVE_MCP_STATE_KEYS``, which every
    worker must be given (see docs/mcp.md, Deployment). `host` and `port` only make the
    default auth resource URL and the DNS-rebinding protection on loopback."""
    if max_message_bytes <= 0:
        raise ValueError("max_message_bytes must be a positive number of bytes")
    tools, features = list(tools), list(features)
    server = build_mcp_server(
        tools, name=name, features=features, proxy=proxy, middleware=middleware
    )
    app = _http_app(server, path, host, max_message_bytes, stateless=stateless)
    if auth is not None:
        from .auth import default_resource

        app = auth.protect(
            app,
            resource=default_resource(host, port, path),
            tools=tools,
            features=features,
            max_message_bytes=max_message_bytes,
            server=server,
            transport="streamable-http",
        )
    return _Health(app)


_WORKER_ENV = "TOOLWEAVE_MCP_WORKER"
"""What a worker of `serve_mcp_workers` serves: the app's import string, whether it is a
factory, and the supervisor's pid (JSON)."""


def _worker_app() -> Any:
    """The ASGI app of one `serve_mcp_workers` worker, which dies with its supervisor."""
    from uvicorn.importer import import_from_string

    spec = json.loads(os.environ[_WORKER_ENV])
    _die_with(int(spec["parent"]))
    app = import_from_string(spec["app"])
    return app() if spec["factory"] else app


def _die_with(parent: int) -> None:
    """Have SIGTERM sent to this process when `parent` ends (Linux), so a supervisor
    killed outright leaves no worker serving the port."""
    import signal
    import sys

    if sys.platform.startswith("linux"):
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before the line above
        os.kill(os.getpid(), signal.SIGTERM)


STATE_KEYS_ENV = "TOOLWEAVE_MCP_STATE_KEYS"
"""The 2026-07-28 request-state keys (comma-separated secrets, the first one sealing);
every worker of one deployment must have the same."""


def serve_mcp_workers(
    app: str,
    *,
    workers: int,
    host: str = "127.0.0.1",
    port: int = 8000,
    factory: bool = False,
    log_level: str = "warning",
) -> None:
    """Serve the ASGI app `app` names (``"myapp:app"``, built with `mcp_http_app`; with
    `factory`, a function returning it) with `workers` processes under uvicorn's
    supervisor, blocking until SIGINT or SIGTERM, which stop every worker. Each worker
    imports `app` itself. Without ``TOOLWEAVE_MCP_STATE_KEYS`` in the environment, one key
    is made for this run and given to all the workers (set it to share it across runs or
    hosts). A worker whose supervisor is gone (even killed with SIGKILL) stops itself
    (on Linux)."""
    if workers < 1:
        raise ValueError("workers must be at least 1")
    import secrets

    import uvicorn

    if not os.environ.get(STATE_KEYS_ENV):
        # one key for every worker of this run (the workers inherit the environment)
        os.environ[STATE_KEYS_ENV] = secrets.token_urlsafe(32)
    os.environ[_WORKER_ENV] = json.dumps({"app": app, "factory": factory, "parent": os.getpid()})
    uvicorn.run(
        "toolweave.mcp.server:_worker_app",
        factory=True,
        host=host,
        port=port,
        workers=workers,
        log_level=log_level,
        lifespan="on",
    )


def _sse_app(server: Server[Any], sse_path: str, host: str, max_message_bytes: int) -> Any:
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
    sse = SseServerTransport(
        "/messages/", security_settings=security, max_request_body_size=max_message_bytes
    )

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
    features: Iterable[Feature] = (),
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
    proxy: Iterable[McpServerConfig | McpProxy] = (),
    middleware: Iterable[McpMiddleware] = (),
    auth: McpAuth | None = None,
    stateless: bool = False,
) -> None:
    """Serve `tools` as an MCP server, blocking (see `serve_mcp_async`)."""
    tool_list = list(tools)
    feature_list = list(features)
    proxy_list = list(proxy)
    middleware_list = list(middleware)

    async def main() -> None:
        await serve_mcp_async(
            tool_list,
            transport,
            host=host,
            port=port,
            path=path,
            name=name,
            log_level=log_level,
            features=feature_list,
            max_message_bytes=max_message_bytes,
            proxy=proxy_list,
            middleware=middleware_list,
            auth=auth,
            stateless=stateless,
        )

    anyio.run(main)
