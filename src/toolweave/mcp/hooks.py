"""Client capabilities: how an `McpClient` answers what a server asks of it.

Each is opt-in (a server sees a capability only when its hook is given):

- ``sampling``: a `ChatModel` (any toolweave provider) or an async callback answers
  ``sampling/createMessage``; `McpServerConfig.sampling_max_tokens` caps what the server may
  ask for, `sampling_max_input_bytes` how much it may send and `sampling_max_per_minute`
  how often, so a server cannot spend your budget unboundedly (over a limit the server
  gets an error and the model is not called); with a `ChatModel` the client
  declares ``sampling.tools``: the server's tools reach the model as tool specifications
  and its tool calls go back as ``tool_use`` content (the server runs them); a callback
  with ``handles_tools = True`` gets such requests as they are;
- ``elicitation``: an async callback gets an `ElicitationRequest` (form mode: a message and a
  flat JSON schema; URL mode: a message and a URL to open) and returns an
  `ElicitationResult`; for an accepted form the schema's defaults fill omitted fields. A
  tool call the server answers with JSON-RPC -32042 (URL elicitation required) asks it in
  URL mode for each URL the error lists; when all are accepted (return ``"accept"`` once
  the user is done with the page) the call is sent once more, otherwise the model gets an
  error result holding the URLs and the server's messages;
- ``roots``: a list of paths / ``file://`` URIs, or an async callback returning one; call
  `McpClient.roots_changed()` after it changes;
- ``on_log``: server log messages (``notifications/message``); without it they go to the
  ``toolweave.mcp.server_log`` logger;
- ``on_tools_changed``: called on ``notifications/tools/list_changed`` (a `ToolService`
  holding the client's listing also re-lists the tools before its next request);
- ``on_list_changed``: called with ``"tools"``, ``"resources"`` or ``"prompts"`` on that
  list's ``list_changed`` notification (a gateway follows all three);
- ``on_resource_updated``: called with the URI of a ``notifications/resources/updated``
  (for resources subscribed to with `McpClient.subscribe_resource`).

A client with a sampling, elicitation or roots hook connects with the initialize handshake
(protocol 2025-11-25): on a 2026-07-28 connection a server has no way to send requests of
its own.

A hook that raises answers the server with a generic JSON-RPC error (code -32603, "… failed
on the client"): its exception text, which may hold a credential, goes only to the
``toolweave.mcp`` log, masked.
"""

from __future__ import annotations

import collections
import inspect
import json
import logging
import threading
import time
import weakref
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, cast

import mcp_types

from ..chat.model import ChatModel
from ..context import ElicitationResult
from ._secrets import masked_reason
from .config import McpServerConfig

__all__ = [
    "ElicitationHook",
    "ElicitationRequest",
    "LogHook",
    "McpClientHooks",
    "RootsHook",
    "SamplingCallback",
    "SamplingDeclined",
    "SamplingHook",
]

log = logging.getLogger("toolweave.mcp")
server_log = logging.getLogger("toolweave.mcp.server_log")


@dataclass(frozen=True)
class ElicitationRequest:
    """What a server asks the user: in ``"form"`` mode fill `schema`; in ``"url"`` mode open
    `url` (the answer's content is ignored)."""

    server_name: str
    message: str
    mode: Literal["form", "url"] = "form"
    schema: dict[str, Any] | None = None
    url: str | None = None
    elicitation_id: str | None = None


class SamplingDeclined(Exception):
    """Raised by a sampling hook when the user said no: the server is told the request was
    declined (JSON-RPC code -1, as the MCP spec suggests), not that the client failed."""


SamplingCallback = Callable[
    [mcp_types.CreateMessageRequestParams], Awaitable[str | mcp_types.CreateMessageResult]
]
SamplingHook = ChatModel | SamplingCallback | None
"""A `ChatModel`, or ``async (CreateMessageRequestParams) -> str | CreateMessageResult``."""
ElicitationHook = Callable[[ElicitationRequest], Awaitable[ElicitationResult]]
RootsHook = Sequence[str | Path] | Callable[[], Awaitable[Sequence[str | Path]]]
LogHook = Callable[[str, mcp_types.LoggingMessageNotificationParams], Any]
"""``(server_name, params)``; may be sync or async."""

_LOG_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def _root_uri(root: str | Path) -> str:
    if isinstance(root, Path) or "://" not in root:
        return Path(root).resolve().as_uri()
    return root


def _text_of(content: Any) -> str:
    blocks = content if isinstance(content, list) else [content]
    return "".join(getattr(b, "text", "") or "" for b in blocks)


@dataclass
class McpClientHooks:
    """The hooks of one client (see the module docstring); all optional."""

    sampling: SamplingHook = None
    elicitation: ElicitationHook | None = None
    roots: RootsHook | None = None
    on_log: LogHook | None = None
    on_tools_changed: Callable[[], Any] | None = None
    on_list_changed: Callable[[str], Any] | None = None
    on_resource_updated: Callable[[str], Any] | None = None

    def __post_init__(self) -> None:
        self._sampled: collections.deque[float] = collections.deque()
        self._watchers: tuple[Callable[[], Callable[[], None] | None], ...] = ()
        self._watch_lock = threading.Lock()
        self.tool_changes = 0
        """How many ``tools/list_changed`` the server sent (listings compare it)."""

    def watch_tools(self, on_change: Callable[[], None]) -> None:
        """Call `on_change` on ``tools/list_changed`` too (a bound method is held weakly)."""
        ref: Callable[[], Callable[[], None] | None] = (
            weakref.WeakMethod(on_change) if inspect.ismethod(on_change) else lambda: on_change
        )
        with self._watch_lock:  # the notification side only reads the tuple
            self._watchers = (*(w for w in self._watchers if w() is not None), ref)

    async def tools_changed(self) -> None:
        """The server said its tool list changed: tell the watchers, then the user's hook."""
        self.tool_changes += 1
        for ref in self._watchers:
            watcher = ref()
            if watcher is not None:
                try:
                    watcher()
                except Exception:  # one watcher's failure must not silence the others
                    log.exception("a tools/list_changed watcher failed")
        if self.on_tools_changed is not None:
            out = self.on_tools_changed()
            if inspect.isawaitable(out):
                await out
        await self.list_changed("tools")

    async def resource_updated(self, uri: str) -> None:
        """The server said the resource `uri` (one subscribed to) changed."""
        if self.on_resource_updated is not None:
            out = self.on_resource_updated(uri)
            if inspect.isawaitable(out):
                await out

    async def list_changed(self, kind: str) -> None:
        """The server said its `kind` list (tools, resources, prompts) changed."""
        if self.on_list_changed is not None:
            out = self.on_list_changed(kind)
            if inspect.isawaitable(out):
                await out

    @property
    def answers_requests(self) -> bool:
        """Whether the server may send requests (sampling, elicitation, roots)."""
        return any(h is not None for h in (self.sampling, self.elicitation, self.roots))

    async def ask_urls(
        self, config: McpServerConfig, elicitations: Sequence[mcp_types.ElicitRequestURLParams]
    ) -> str | None:
        """A call answered JSON-RPC -32042 (URL elicitation required): ask the elicitation
        hook, in ``"url"`` mode, to have the user open each URL, in order. None when every
        one was accepted (the call may be retried); else why not (no hook, the user
        declined or cancelled one, or the hook failed), and the rest are not asked."""
        if self.elicitation is None:
            return "this client has no elicitation hook to show it to the user"
        for e in elicitations:
            request = ElicitationRequest(
                server_name=config.server_name,
                message=e.message,
                mode="url",
                url=e.url,
                elicitation_id=e.elicitation_id,
            )
            try:
                answer = await self.elicitation(request)
            except Exception as error:  # its text may hold a credential: the log, masked
                log.warning(
                    "%s: the elicitation hook failed on a URL: %s",
                    config.describe(),
                    masked_reason(error),
                )
                return "the elicitation hook failed"
            if answer.action != "accept":
                verb = "declined" if answer.action == "decline" else "cancelled"
                return f"the user {verb} it"
        return None

    # SDK callbacks -------------------------------------------------------------------------
    def sdk_callbacks(self, config: McpServerConfig) -> dict[str, Any]:
        """Keyword arguments for the SDK's `Client` (only the capabilities given)."""
        out: dict[str, Any] = {"logging_callback": self._logging(config)}
        if self.on_log is not None:  # 2026-07-28 servers send logs only to who opts in
            out["log_level"] = "debug"
        if self.sampling is not None:
            out["sampling_callback"] = self._sampling(config)
            if _handles_tools(self.sampling):
                out["sampling_capabilities"] = mcp_types.SamplingCapability(
                    tools=mcp_types.SamplingToolsCapability()
                )
        if self.elicitation is not None:
            out["elicitation_callback"] = self._elicitation(config)
        if self.roots is not None:
            out["list_roots_callback"] = self._roots(config)
        return out

    def _logging(self, config: McpServerConfig) -> Any:
        async def on_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
            if self.on_log is None:
                server_log.log(
                    _LOG_LEVELS.get(params.level, logging.INFO),
                    "%s%s: %s",
                    config.server_name,
                    f" ({params.logger})" if params.logger else "",
                    params.data,
                )
                return
            out = self.on_log(config.server_name, params)
            if inspect.isawaitable(out):
                await out

        return on_log

    def _sampling(self, config: McpServerConfig) -> Any:
        async def sample(ctx: Any, params: mcp_types.CreateMessageRequestParams) -> Any:
            model = callable(getattr(self.sampling, "achat", None))
            if not _handles_tools(self.sampling) and (
                params.tools or params.tool_choice is not None
            ):
                # the spec: without the sampling.tools capability, tools are an error
                return mcp_types.ErrorData(
                    code=mcp_types.INVALID_PARAMS,
                    message="this client does not support tools in sampling "
                    "(it did not declare sampling.tools)",
                )
            cap = config.sampling_max_input_bytes
            if cap is not None:
                size = len(params.model_dump_json(by_alias=True, exclude_none=True).encode())
                if size > cap:
                    log.warning(
                        "%s: a sampling request of %d bytes was refused (cap %d)",
                        config.describe(),
                        size,
                        cap,
                    )
                    return mcp_types.ErrorData(
                        code=mcp_types.INVALID_PARAMS,
                        message=f"sampling request too large ({size} bytes; this client "
                        f"accepts at most {cap}, McpServerConfig.sampling_max_input_bytes)",
                    )
            now = time.monotonic()
            window = self._sampled
            while window and now - window[0] > 60.0:
                window.popleft()
            limit = config.sampling_max_per_minute
            if limit is not None and len(window) >= limit:
                return mcp_types.ErrorData(
                    code=mcp_types.INVALID_REQUEST,
                    message=f"sampling limit reached ({limit} requests per minute)",
                )
            window.append(now)
            if config.sampling_max_tokens is not None:
                params = params.model_copy(
                    update={"max_tokens": min(params.max_tokens, config.sampling_max_tokens)}
                )
            try:
                hook = self.sampling
                if hook is None:
                    raise RuntimeError("no sampling hook")
                if model:
                    return await _sample_with_model(hook, params)
                answer = await cast(SamplingCallback, hook)(params)
            except SamplingDeclined:
                return mcp_types.ErrorData(
                    code=-1, message="the user declined the sampling request"
                )
            except Exception as e:  # the server gets an error, the connection lives on
                return _hook_failed(config, "sampling", e)
            if isinstance(answer, str):
                return mcp_types.CreateMessageResult(
                    role="assistant",
                    content=mcp_types.TextContent(type="text", text=answer),
                    model="toolweave",
                    stop_reason="endTurn",
                )
            return answer

        return sample

    def _elicitation(self, config: McpServerConfig) -> Any:
        async def elicit(ctx: Any, params: Any) -> Any:
            assert self.elicitation is not None
            if isinstance(params, mcp_types.ElicitRequestURLParams):
                request = ElicitationRequest(
                    server_name=config.server_name,
                    message=params.message,
                    mode="url",
                    url=params.url,
                    elicitation_id=params.elicitation_id,
                )
            else:
                request = ElicitationRequest(
                    server_name=config.server_name,
                    message=params.message,
                    schema=dict(params.requested_schema),
                )
            try:
                answer = await self.elicitation(request)
            except Exception as e:
                return _hook_failed(config, "elicitation", e)
            content = None
            if answer.action == "accept" and request.mode == "form":
                content = _with_defaults(answer.content or {}, request.schema or {})
            return mcp_types.ElicitResult(action=answer.action, content=content)  # type: ignore[arg-type]

        return elicit

    def _roots(self, config: McpServerConfig) -> Any:
        async def list_roots(ctx: Any) -> mcp_types.ListRootsResult | mcp_types.ErrorData:
            roots = self.roots
            try:
                listed = await roots() if callable(roots) else roots
                return mcp_types.ListRootsResult(
                    roots=[
                        mcp_types.Root(
                            uri=_root_uri(r), name=Path(r).name if "://" not in str(r) else None
                        )
                        for r in listed or ()
                    ]
                )
            except Exception as e:  # else the SDK answers code 0 with the exception's text
                return _hook_failed(config, "listing the roots", e)

        return list_roots


def _handles_tools(hook: Any) -> bool:
    """Whether a sampling hook takes requests with tools: a `ChatModel`, or a callback
    whose ``handles_tools`` attribute is true (it answers with ``tool_use`` content itself,
    e.g. a gateway asking its own client)."""
    return callable(getattr(hook, "achat", None)) or getattr(hook, "handles_tools", False) is True


def _hook_failed(config: McpServerConfig, what: str, error: Exception) -> mcp_types.ErrorData:
    """The server's answer when a hook raised: a generic error. The exception's text (it may
    hold a credential) goes only to the log, masked."""
    log.warning("%s: %s failed: %s", config.describe(), what, masked_reason(error))
    return mcp_types.ErrorData(
        code=mcp_types.INTERNAL_ERROR, message=f"{what} failed on the client"
    )


def _with_defaults(content: dict[str, Any], schema: dict[str, Any]) -> dict[str, Any]:
    """SEP-1034: a field the user left out takes the schema's default."""
    out = dict(content)
    for name, prop in (schema.get("properties") or {}).items():
        if name not in out and isinstance(prop, dict) and "default" in prop:
            out[name] = prop["default"]
    return out


async def _sample_with_model(model: Any, params: mcp_types.CreateMessageRequestParams) -> Any:
    """Answer ``sampling/createMessage`` with a `ChatModel`. The server's `tools` become the
    request's tool specifications (the server runs them, not toolweave); the model's tool
    calls go back as ``tool_use`` content with stop reason ``toolUse``, and the server's
    ``tool_result`` content comes in as tool result messages."""
    from ..chat.request import ChatRequest, ChatRequestParameters, ToolChoice
    from ..chat.response import FinishReason

    names = _ToolNames(params.tools or ())
    messages = _sampling_conversation(params, names)
    parameters = ChatRequestParameters(
        max_tokens=params.max_tokens,
        temperature=params.temperature,
        stop=tuple(params.stop_sequences) if params.stop_sequences else None,
        tools=names.cards() or None,
        tool_choice=(
            ToolChoice.parse(params.tool_choice.mode)
            if params.tools and params.tool_choice is not None and params.tool_choice.mode
            else None
        ),
    )
    response = await model.achat(ChatRequest(messages, parameters))
    ai = response.ai_message
    model_name = response.model or str(getattr(model, "model_name", None) or "toolweave")
    if not ai.tool_execution_requests:
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text=ai.text or ""),
            model=model_name,
            stop_reason="maxTokens" if response.finish_reason == FinishReason.LENGTH else "endTurn",
        )
    content: list[Any] = []
    if ai.text:
        content.append(mcp_types.TextContent(type="text", text=ai.text))
    for call in ai.tool_execution_requests:
        content.append(
            mcp_types.ToolUseContent(
                type="tool_use",
                id=call.id,
                name=names.on_server(call.name),
                input=_call_input(call.arguments),
            )
        )
    return mcp_types.CreateMessageResultWithTools(
        role="assistant", content=content, model=model_name, stop_reason="toolUse"
    )


class _ToolNames:
    """The server's sampling tools as cards, with names a provider accepts (sanitised like
    listed tools) and the way back to the server's names."""

    def __init__(self, tools: Sequence[mcp_types.Tool]) -> None:
        from .config import sanitize_tool_name

        self.tools = list(tools)
        self.to_model: dict[str, str] = {}
        self.to_server: dict[str, str] = {}
        for t in self.tools:
            name = sanitize_tool_name(t.name)
            n = 1
            while name in self.to_server:
                n += 1
                name = sanitize_tool_name(f"{t.name}_{n}")
            self.to_model[t.name] = name
            self.to_server[name] = t.name

    def cards(self) -> tuple[Any, ...]:
        from ..tools.card import ToolCard

        out = []
        for t in self.tools:
            schema = dict(t.input_schema or {})
            schema.setdefault("type", "object")
            out.append(
                ToolCard(
                    name=self.to_model[t.name], description=t.description or "", input_params=schema
                )
            )
        return tuple(out)

    def on_model(self, name: str) -> str:
        return self.to_model.get(name, name)

    def on_server(self, name: str) -> str:
        return self.to_server.get(name, name)


def _call_input(arguments: str) -> dict[str, Any]:
    """A model's tool call arguments as the ``input`` object of ``tool_use`` content."""
    from ..schema.arguments import parse_arguments

    try:
        parsed = parse_arguments(arguments or "{}")
    except Exception:  # the server validates input against the tool's schema and says so
        return {"arguments": arguments}
    return parsed if isinstance(parsed, dict) else {"value": parsed}


def _sampling_conversation(
    params: mcp_types.CreateMessageRequestParams, names: _ToolNames
) -> list[Any]:
    """The server's system prompt and messages as toolweave messages: ``tool_use`` blocks
    become the assistant's tool calls, ``tool_result`` blocks tool result messages."""
    from ..chat.messages import AiMessage, SystemMessage, ToolExecutionResultMessage, UserMessage
    from ..execution.requests import ToolExecutionRequest
    from .tool import _part

    out: list[Any] = []
    if params.system_prompt:
        out.append(SystemMessage(text=params.system_prompt))
    called: dict[str, str] = {}
    for m in params.messages:
        blocks = m.content if isinstance(m.content, list) else [m.content]
        uses = [b for b in blocks if isinstance(b, mcp_types.ToolUseContent)]
        results = [b for b in blocks if isinstance(b, mcp_types.ToolResultContent)]
        text = _text_of([b for b in blocks if isinstance(b, mcp_types.TextContent)])
        if m.role == "assistant":
            calls = []
            for u in uses:
                called[u.id] = names.on_model(u.name)
                calls.append(
                    ToolExecutionRequest(
                        id=u.id,
                        name=called[u.id],
                        arguments=json.dumps(u.input, ensure_ascii=False),
                    )
                )
            out.append(AiMessage(text=text or None, tool_execution_requests=calls))
            continue
        for r in results:
            parts = [_part(b) for b in r.content]
            out.append(
                ToolExecutionResultMessage(
                    id=r.tool_use_id,
                    tool_name=called.get(r.tool_use_id, ""),
                    text=_text_of(r.content),
                    is_error=bool(r.is_error),
                    contents=tuple(parts) if any(p.type != "text" for p in parts) else None,
                    structured=r.structured_content,
                )
            )
        media = tuple(
            _part(b)
            for b in blocks
            if isinstance(b, (mcp_types.ImageContent, mcp_types.AudioContent))
        )
        if text or media or not results:
            out.append(UserMessage(text=text or (None if media else ""), contents=media))
    return out
