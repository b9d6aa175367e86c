"""Hooks: functions the loop runs at four points of every step, which may change what goes
through them (docs/policies.md, "Hooks").

| point | hook | receives | returns |
|---|---|---|---|
| before each model request | `before_model_request` | the request, the `StepContext` | the request to send (None: unchanged) |
| around the model call | `around_model_call` | the request, `call_model`, the `StepContext` | the `ChatResponse` |
| around each tool call | `around_tool_call` | the call, `call_tool`, the `ToolContext` | the `ToolExecutionResult` |
| after each tool result | `after_tool_result` | the call, its result, the `ToolContext` | the result to keep (None: unchanged) |

A `HistoryProcessor` — a function of the messages returning the messages to send — is the
simplest kind of before-model-request hook: `history_processor(func)`.

A hook is a `Hook`: subclass it and override the methods you need (the others pass through),
or wrap one function with the decorator named after its point. Each method or function may
be sync or async; a sync `around_*` function is run in a worker thread, where its
`call_next(...)` returns the result directly. Give hooks as
`ToolService(hooks=[...])` and per conversation as `chat(..., hooks=[...])` (the service's
first): before- and after-hooks run in that order, each seeing what the previous returned;
around-hooks nest, the first outermost.
"""

from __future__ import annotations

import operator
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeAlias

from ..errors import ErrorCode, ToolweaveError

if TYPE_CHECKING:
    from ..chat.messages import ChatMessage
    from ..chat.request import ChatRequest
    from ..chat.response import ChatResponse
    from ..context import ToolContext
    from ..execution.requests import ToolExecutionRequest
    from ..execution.results import ToolExecutionResult
    from ..toolsets.step import StepContext

__all__ = [
    "CallModel",
    "CallTool",
    "HistoryProcessor",
    "Hook",
    "InvalidHistoryError",
    "ModelCallHook",
    "ModelRequestHook",
    "ToolCallHook",
    "ToolResultHook",
    "after_tool_result",
    "around_model_call",
    "around_tool_call",
    "before_model_request",
    "history_processor",
]

HistoryProcessor: TypeAlias = Callable[
    ["list[ChatMessage]"], "list[ChatMessage] | Awaitable[list[ChatMessage]]"
]
"""`(messages) -> messages`, sync or async: the conversation so far in, the messages to send
(and continue from) out — trimmed, summarised, old tool results stubbed. It gets a list of
its own (change it or build another). Plug it in with `history_processor(func)`."""

ModelRequestHook: TypeAlias = Callable[
    ["ChatRequest", "StepContext"], "ChatRequest | Awaitable[ChatRequest | None] | None"
]
"""`(request, ctx) -> request | None`, sync or async: before each model request. The request
it returns is sent (None: the one it got); its messages become the conversation's history."""

CallModel: TypeAlias = Callable[["ChatRequest"], "Awaitable[ChatResponse]"]
"""What an `around_model_call` hook awaits to call the model (or the next hook)."""

ModelCallHook: TypeAlias = Callable[
    ["ChatRequest", CallModel, "StepContext"], "ChatResponse | Awaitable[ChatResponse]"
]
"""`(request, call_model, ctx) -> response`: around each model call. Await
`call_model(request)` (the request as given, or a changed one: sent only, not kept in the
history) once, again (a retry), or not at all (a response of your own)."""

CallTool: TypeAlias = Callable[["ToolExecutionRequest"], "Awaitable[ToolExecutionResult]"]
"""What an `around_tool_call` hook awaits to run the call (or the next hook)."""

ToolCallHook: TypeAlias = Callable[
    ["ToolExecutionRequest", CallTool, "ToolContext"],
    "ToolExecutionResult | Awaitable[ToolExecutionResult]",
]
"""`(call, call_tool, ctx) -> result`: around each call of a tool. Await `call_tool(call)`
(with other arguments: `call.model_copy(update={"arguments": ...})`), again (a retry), or
not at all (a result of your own, e.g. `ToolExecutionResult.error_result("refused")`). The
tool's argument errors and failures propagate through `call_tool` as exceptions; what
escapes the hook is handled like the tool's own failure (`execution_error_handler`)."""

ToolResultHook: TypeAlias = Callable[
    ["ToolExecutionRequest", "ToolExecutionResult", "ToolContext"],
    "ToolExecutionResult | Awaitable[ToolExecutionResult | None] | None",
]
"""`(call, result, ctx) -> result | None`: after each call is answered (error results and
unknown-tool answers included), before the result enters the history."""


class Hook:
    """A loop hook: override any of the four methods (each sync or async); those left as
    they are cost nothing. Combine several in `hooks=[...]`."""

    name: str = ""
    """How errors name the hook (default: its class name, or its function's name)."""

    def before_model_request(
        self, request: ChatRequest, ctx: StepContext
    ) -> ChatRequest | Awaitable[ChatRequest | None] | None:
        """The request to send instead of `request` (None: `request`); see
        `ModelRequestHook`."""
        return None

    async def around_model_call(
        self, request: ChatRequest, call_model: CallModel, ctx: StepContext
    ) -> ChatResponse:
        """The model's response to `request`; see `ModelCallHook`."""
        return await call_model(request)

    async def around_tool_call(
        self, call: ToolExecutionRequest, call_tool: CallTool, ctx: ToolContext
    ) -> ToolExecutionResult:
        """The result of `call`; see `ToolCallHook`."""
        return await call_tool(call)

    def after_tool_result(
        self, call: ToolExecutionRequest, result: ToolExecutionResult, ctx: ToolContext
    ) -> ToolExecutionResult | Awaitable[ToolExecutionResult | None] | None:
        """The result to keep instead of `result` (None: `result`); see `ToolResultHook`."""
        return None

    @property
    def label(self) -> str:
        """The hook's name in errors and logs."""
        return self.name or type(self).__name__

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.label}>"


def _named(func: Callable[..., Any]) -> str:
    return str(getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or func)


class _FunctionHook(Hook):
    """A `Hook` made of one function, at the point named by `point`."""

    def __init__(self, point: str, func: Callable[..., Any]) -> None:
        if not callable(func):
            raise TypeError(f"{point}() takes a function, got {type(func).__name__}")
        self.point = point
        self.func = func
        self.name = _named(func)
        setattr(self, point, func)  # the instance's attribute: the loop calls it directly

    def __repr__(self) -> str:
        return f"{self.point}({self.name})"


def before_model_request(func: ModelRequestHook) -> Hook:
    """A hook running `func(request, ctx)` before each model request (`ModelRequestHook`)."""
    return _FunctionHook("before_model_request", func)


def around_model_call(func: ModelCallHook) -> Hook:
    """A hook running `func(request, call_model, ctx)` around each model call
    (`ModelCallHook`)."""
    return _FunctionHook("around_model_call", func)


def around_tool_call(func: ToolCallHook) -> Hook:
    """A hook running `func(call, call_tool, ctx)` around each tool call (`ToolCallHook`)."""
    return _FunctionHook("around_tool_call", func)


def after_tool_result(func: ToolResultHook) -> Hook:
    """A hook running `func(call, result, ctx)` after each tool result (`ToolResultHook`)."""
    return _FunctionHook("after_tool_result", func)


class _HistoryHook(Hook):
    """A `HistoryProcessor` as a before-model-request hook: the request's messages in, the
    request with the messages it returned out."""

    def __init__(self, func: HistoryProcessor) -> None:
        if not callable(func):
            raise TypeError(f"history_processor() takes a function, got {type(func).__name__}")
        self.func = func
        self.name = _named(func)

    async def before_model_request(self, request: ChatRequest, ctx: StepContext) -> ChatRequest:
        out: Any = self.func(list(request.messages))
        if isinstance(out, Awaitable):
            out = await out
        if not isinstance(out, list | tuple):
            raise TypeError(
                f"the history processor {self.name} must return a list of messages, got "
                f"{type(out).__name__}"
            )
        messages = tuple(out)
        given = request.messages
        if len(messages) == len(given) and all(map(operator.is_, messages, given)):
            return request
        return request.model_copy(update={"messages": messages})

    def __repr__(self) -> str:
        return f"history_processor({self.name})"


def history_processor(func: HistoryProcessor) -> Hook:
    """A before-model-request hook sending (and continuing from) the messages
    `func(messages)` returns (`HistoryProcessor`)."""
    return _HistoryHook(func)


class InvalidHistoryError(ToolweaveError, ValueError):
    """A hook rewrote the history so that it is no longer a valid conversation: a tool call
    left without its result, answered twice, or its results not right after it. Raised
    before the request is sent; a result whose call is gone is not an error (it is dropped).
    `hook` names the hook, `call_id` and `tool_name` the call (when one is at fault)."""

    default_code = ErrorCode.HISTORY_INVALID

    def __init__(
        self,
        message: str,
        *,
        hook: str | None = None,
        call_id: str | None = None,
        tool_name: str | None = None,
    ) -> None:
        super().__init__(
            message, details={"hook": hook, "call_id": call_id, "tool_name": tool_name}
        )
        self.hook = hook
        self.call_id = call_id
        self.tool_name = tool_name
