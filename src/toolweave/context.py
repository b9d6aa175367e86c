"""The per-call context a tool can ask for by declaring a `ToolContext` parameter.

Besides describing the call, a `ToolContext` is the tool's way back to whoever called it:
progress reports, log messages, and (when the caller can) sampling, elicitation and the
caller's roots. These go to the `ToolChannel` in force for the call — set by `serve_mcp` for a
tool served over MCP (progress and log notifications, ``sampling/createMessage``,
``elicitation/create``, ``roots/list``; on 2026-07-28 connections the questions travel in
input-required results, and the tool runs again with the answers), by `ToolService` for a
streamed call — and are no-ops (progress, logs) or a `ToolNotSupportedError` (sampling,
elicitation, roots) when there is none.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections.abc import Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from .identity import Identity, current_identity

__all__ = [
    "ElicitationResult",
    "Root",
    "ToolChannel",
    "ToolContext",
    "current_approval",
    "current_tool_channel",
    "use_approval",
    "use_tool_channel",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ElicitationResult:
    """The user's answer to an elicitation: `action` is ``"accept"`` (with `content`),
    ``"decline"`` or ``"cancel"``."""

    action: str
    content: dict[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Root:
    """One of the caller's roots (MCP ``roots/list``): a ``file://`` URI and its name."""

    uri: str
    name: str | None = None


_INPUT_KEY: contextvars.ContextVar[str | None] = contextvars.ContextVar(
    "toolweave_input_key", default=None
)


def current_input_key() -> str | None:
    """The `key=` the question being asked was given (`ToolContext.aelicit` ...), if any:
    its name in a 2026-07-28 input-required result."""
    return _INPUT_KEY.get()


class ToolChannel(Protocol):
    """Where a running tool's progress, logs and questions go (see the module docstring)."""

    loop: asyncio.AbstractEventLoop | None
    """The loop the channel's coroutines run on (for the sync faces of `ToolContext`)."""

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Report progress."""
        ...

    async def log(self, level: str, data: Any, logger: str | None) -> None:
        """Send a log message (syslog levels: debug, info, notice, warning, error, ...)."""
        ...

    async def sample(self, messages: Any, **params: Any) -> str:
        """Ask the caller's model; the answer's text."""
        ...

    async def elicit(self, message: str, schema: dict[str, Any]) -> ElicitationResult:
        """Ask the caller's user to fill `schema` (a flat JSON object schema)."""
        ...


_CHANNEL: contextvars.ContextVar[ToolChannel | None] = contextvars.ContextVar(
    "toolweave_tool_channel", default=None
)


def current_tool_channel() -> ToolChannel | None:
    """The channel in force here, if any."""
    return _CHANNEL.get()


class use_tool_channel:  # used as a function: `with use_tool_channel(c):`
    """Make `channel` the one tools called inside this block report to."""

    # a class, not a @contextmanager generator: entered once per tool call of the loop
    __slots__ = ("_channel", "_token")

    def __init__(self, channel: ToolChannel | None) -> None:
        self._channel = channel

    def __enter__(self) -> None:
        self._token = _CHANNEL.set(self._channel)

    def __exit__(self, *exc: object) -> None:
        _CHANNEL.reset(self._token)


_APPROVAL: contextvars.ContextVar[tuple[str | None, Any] | None] = contextvars.ContextVar(
    "toolweave_approval", default=None
)


def current_approval() -> Any:
    """The decision a paused call of the running tool got (`Approve`, `DeferredResult`),
    when it runs again after a pause it raised (`NeedsApproval`, `CallDeferred`); None on a
    first run. For code without a `ToolContext` (an argument validator); tools read
    `ctx.approval`."""
    found = _APPROVAL.get()
    return None if found is None else found[1]


@contextlib.contextmanager
def use_approval(call_id: str | None, decision: Any) -> Iterator[None]:
    """Run the call `call_id` with `decision` as its `ToolContext.approval` (None: none)."""
    token = _APPROVAL.set(None if decision is None else (call_id, decision))
    try:
        yield
    finally:
        _APPROVAL.reset(token)


def _not_supported(what: str) -> Exception:
    from .errors import ToolNotSupportedError

    return ToolNotSupportedError(
        f"{what} is not available: the tool was not called by a client that offers it"
    )


@dataclass(frozen=True, slots=True, init=False)
class ToolContext:
    """What a tool knows about the call it is serving, and its way back to the caller.

    A tool parameter annotated with `ToolContext` is hidden from the model's schema and
    filled in at call time.
    """

    tool_name: str
    request_id: str | None = None
    """The tool call id the model gave (`ToolExecutionRequest.id`)."""
    memory_id: Any = None
    """The conversation (memory) id the caller passed, if any."""
    context: Any = None
    """The object the caller passed as `context=` to `ToolService.chat` or `invoke`."""
    callbacks: Any = None
    """The callback framework in force for this call."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Anything else the caller attached."""
    approval: Any = None
    """The decision this call got after it paused itself (`NeedsApproval` → `Approve`,
    `CallDeferred` → `DeferredResult`), when it runs again; None on a first run."""

    def __init__(
        self,
        tool_name: str,
        request_id: str | None = None,
        memory_id: Any = None,
        context: Any = None,
        callbacks: Any = None,
        extra: dict[str, Any] | None = None,
        approval: Any = None,
    ) -> None:
        # the slots' own setters: faster than the generated frozen __init__ (one per call)
        _set_tool_name(self, tool_name)
        _set_request_id(self, request_id)
        _set_memory_id(self, memory_id)
        _set_context(self, context)
        _set_callbacks(self, callbacks)
        _set_extra(self, {} if extra is None else extra)
        if approval is None:
            found = _APPROVAL.get()
            if found is not None and found[0] == request_id:
                approval = found[1]
        _set_approval(self, approval)

    # the way back -------------------------------------------------------------------------------
    @property
    def channel(self) -> ToolChannel | None:
        """The channel in force for this call, if any."""
        return _CHANNEL.get()

    @property
    def identity(self) -> Identity | None:
        """The verified caller (with `serve_mcp(auth=...)`: the bearer token's subject,
        client, scopes and claims); None when the request was not authenticated."""
        return current_identity()

    async def areport_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """Report progress (``progress`` of ``total``); a no-op without a channel."""
        channel = _CHANNEL.get()
        if channel is not None:
            await channel.progress(progress, total, message)

    async def alog(self, level: str, data: Any, logger: str | None = None) -> None:
        """Send a log message to the caller; a no-op without a channel."""
        channel = _CHANNEL.get()
        if channel is not None:
            await channel.log(level, data, logger)

    async def asample(self, messages: Any, *, key: str | None = None, **params: Any) -> str:
        """Ask the caller's model (MCP sampling): `messages` is a text or a list of texts /
        ``{"role", "content"}`` dicts; `params` are ``max_tokens`` (default 1000),
        ``system_prompt``, ``temperature`` ...; returns the answer's text. `key` names the
        question in a 2026-07-28 input-required result (default: by its order)."""
        channel = _CHANNEL.get()
        if channel is None:
            raise _not_supported("sampling")
        token = _INPUT_KEY.set(key)
        try:
            return await channel.sample(messages, **params)
        finally:
            _INPUT_KEY.reset(token)

    async def aelicit(
        self, message: str, schema: dict[str, Any], *, key: str | None = None
    ) -> ElicitationResult:
        """Ask the caller's user to fill a form (MCP elicitation); `key` as in `asample`."""
        channel = _CHANNEL.get()
        if channel is None:
            raise _not_supported("elicitation")
        token = _INPUT_KEY.set(key)
        try:
            return await channel.elicit(message, schema)
        finally:
            _INPUT_KEY.reset(token)

    async def alist_roots(self, *, key: str | None = None) -> list[Root]:
        """The caller's roots (MCP ``roots/list``): the directories it lets the tool work
        in; `key` as in `asample`."""
        channel = _CHANNEL.get()
        list_roots = getattr(channel, "list_roots", None)
        if list_roots is None:
            raise _not_supported("roots")
        token = _INPUT_KEY.set(key)
        try:
            roots: list[Root] = await list_roots()
            return roots
        finally:
            _INPUT_KEY.reset(token)

    # sync faces, for sync tools (which run on a worker thread) ---------------------------------
    def _run(self, coro: Coroutine[Any, Any, T], *, wait: bool) -> T | None:
        channel = _CHANNEL.get()
        loop = channel.loop if channel is not None else None
        if loop is None or loop.is_closed():
            if not wait:
                coro.close()
                return None
            return _run_here(coro)
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # on the channel's own loop: cannot block it
            if wait:
                coro.close()
                raise RuntimeError("on the event loop, use the async method (asample, aelicit)")
            loop.create_task(coro)
            return None
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def report_progress(
        self, progress: float, total: float | None = None, message: str | None = None
    ) -> None:
        """`areport_progress` for sync tools."""
        self._run(self.areport_progress(progress, total, message), wait=False)

    def log(self, level: str, data: Any, logger: str | None = None) -> None:
        """`alog` for sync tools."""
        self._run(self.alog(level, data, logger), wait=False)

    def sample(self, messages: Any, *, key: str | None = None, **params: Any) -> str:
        """`asample` for sync tools."""
        out = self._run(self.asample(messages, key=key, **params), wait=True)
        assert out is not None
        return out

    def elicit(
        self, message: str, schema: dict[str, Any], *, key: str | None = None
    ) -> ElicitationResult:
        """`aelicit` for sync tools."""
        out = self._run(self.aelicit(message, schema, key=key), wait=True)
        assert out is not None
        return out

    def list_roots(self, *, key: str | None = None) -> list[Root]:
        """`alist_roots` for sync tools."""
        out = self._run(self.alist_roots(key=key), wait=True)
        assert out is not None
        return out


(
    _set_tool_name,
    _set_request_id,
    _set_memory_id,
    _set_context,
    _set_callbacks,
    _set_extra,
    _set_approval,
) = (
    getattr(ToolContext, name).__set__
    for name in (
        "tool_name",
        "request_id",
        "memory_id",
        "context",
        "callbacks",
        "extra",
        "approval",
    )
)


def _run_here(coro: Coroutine[Any, Any, T]) -> T:
    """Drive a coroutine that needs no loop (it fails at once: there is no channel)."""
    try:
        coro.send(None)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
    coro.close()
    raise RuntimeError("a channel without a loop cannot be used from a sync tool")
