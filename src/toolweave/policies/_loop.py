"""The loop's side of the policies (internal): the hooks of one conversation, split by
point, run as chains; its budget, counted and checked before each step.

`Policies.of(hooks, limits)` is what a `ToolService` keeps (None when nothing is set: the
loop then does no policy work at all); `Policies.start(...)` makes the `PolicyRun` of one
conversation (the service's hooks first, then the conversation's; the conversation's
limits replace the service's).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import inspect
import logging
import operator
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Sequence
from typing import Any

from .._utils.threads import to_thread
from ..chat.events import ResponseCompleted, StreamEvent
from ..chat.messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionResultMessage,
    UserMessage,
)
from ..chat.request import ChatRequest, ChatRequestParameters, ToolChoice
from ..chat.response import ChatResponse, TokenUsage
from ..context import ToolContext
from ..errors import ToolweaveError
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecutionResult
from ..toolsets.step import StepContext
from .hooks import Hook, InvalidHistoryError
from .usage import RunUsage, UsageLimitExceeded, UsageLimits

__all__ = ["HookedExecutor", "Policies", "PolicyRun", "check_history"]

logger = logging.getLogger("toolweave.policies")

_POINTS = ("before_model_request", "around_model_call", "around_tool_call", "after_tool_result")
_AROUND = frozenset({"around_model_call", "around_tool_call"})


class _Bound:
    """One hook's function at one point: how to call it and how errors name it."""

    __slots__ = ("func", "label", "sync_around")

    def __init__(self, func: Callable[..., Any], label: str, sync_around: bool) -> None:
        self.func = func
        self.label = label
        self.sync_around = sync_around


def _is_async(func: Any) -> bool:
    return inspect.iscoroutinefunction(func) or inspect.iscoroutinefunction(
        getattr(func, "__call__", None)  # noqa: B004 - an object with an async __call__
    )


def _overrides(hook: Hook, point: str) -> bool:
    if point in getattr(hook, "__dict__", {}):
        return True
    return getattr(type(hook), point) is not getattr(Hook, point)


def _split(hooks: Sequence[Hook]) -> tuple[tuple[_Bound, ...], ...]:
    points: list[list[_Bound]] = [[] for _ in _POINTS]
    for hook in hooks:
        if not isinstance(hook, Hook):
            raise TypeError(
                f"hooks take Hook objects, got {hook!r}: subclass Hook, or wrap a function "
                "with history_processor(f), before_model_request(f), around_model_call(f), "
                "around_tool_call(f) or after_tool_result(f) (toolweave.policies)"
            )
        for i, point in enumerate(_POINTS):
            if _overrides(hook, point):
                func = getattr(hook, point)
                sync_around = point in _AROUND and not _is_async(func)
                points[i].append(_Bound(func, hook.label, sync_around))
    return tuple(tuple(p) for p in points)


async def _maybe(out: Any) -> Any:
    if inspect.isawaitable(out):
        return await out
    return out


async def _around(bound: _Bound, value: Any, call_next: Callable[[Any], Any], ctx: Any) -> Any:
    """Run an around-hook: an async one directly; a sync one in a worker thread, with a
    `call_next` that runs the rest of the chain on this loop and returns its result."""
    if not bound.sync_around:
        return await _maybe(bound.func(value, call_next, ctx))
    loop = asyncio.get_running_loop()
    inner: list[concurrent.futures.Future[Any]] = []

    def blocking_next(given: Any) -> Any:
        future = asyncio.run_coroutine_threadsafe(call_next(given), loop)
        inner.append(future)
        return future.result()

    try:
        out = await to_thread(bound.func, value, blocking_next, ctx)
    except asyncio.CancelledError:
        for future in inner:  # what the hook started stops with it (and frees its thread)
            future.cancel()
        raise
    return await _maybe(out)


def _same(a: Sequence[Any], b: Sequence[Any]) -> bool:
    """Whether `a` and `b` hold the same objects, in the same order."""
    return a is b or (len(a) == len(b) and all(map(operator.is_, a, b)))


_RESULT, _AI, _OTHER = 0, 1, 2
_KINDS: dict[type, int] = {
    ToolExecutionResultMessage: _RESULT,
    AiMessage: _AI,
    SystemMessage: _OTHER,
    UserMessage: _OTHER,
}


def _kind(m: Any, by: str) -> int:
    kind = _KINDS.get(type(m))
    if kind is not None:
        return kind
    for cls, k in _KINDS.items():  # a subclass of a message type
        if isinstance(m, cls):
            return k
    raise TypeError(
        f"a hook{by} put a {type(m).__name__} in the history; messages are "
        "SystemMessage, UserMessage, AiMessage or ToolExecutionResultMessage"
    )


def check_history(messages: Sequence[Any], hook: str | None = None) -> tuple[ChatMessage, ...]:
    """`messages` as a valid conversation, or `InvalidHistoryError`: every tool call of an
    AI message is answered exactly once by the results right after it. A result whose call
    is not among them (its AI message was dropped) is dropped too; a call left without its
    result, or answered twice, is refused, naming the call and `hook`."""
    by = f" by {hook}" if hook else ""
    out: list[ChatMessage] = []
    calls: dict[str, str] = {}  # the open AI turn's calls not answered yet: id -> tool
    answered: set[str] = set()
    dropped: list[str] = []
    kinds = _KINDS
    for m in messages:
        kind = kinds.get(type(m))
        if kind is None:
            kind = _kind(m, by)
        if kind == _RESULT:
            if m.id in calls:
                del calls[m.id]
                answered.add(m.id)
                out.append(m)
            elif m.id in answered:
                raise InvalidHistoryError(
                    f"the history rewritten{by} answers the call {m.id!r} of {m.tool_name!r} twice",
                    hook=hook,
                    call_id=m.id,
                    tool_name=m.tool_name,
                )
            else:
                dropped.append(m.id)
            continue
        if calls:
            _unanswered(calls, by, hook)
        if answered:
            answered = set()
        if kind == _AI and m.tool_execution_requests:
            for c in m.tool_execution_requests:
                if c.id in calls:
                    raise InvalidHistoryError(
                        f"the history rewritten{by} has an AI message calling {c.id!r} twice",
                        hook=hook,
                        call_id=c.id,
                        tool_name=c.name,
                    )
                calls[c.id] = c.name
        out.append(m)
    if calls:
        _unanswered(calls, by, hook)
    if not out:
        raise InvalidHistoryError(f"the history rewritten{by} is empty", hook=hook)
    if dropped:
        logger.debug(
            "dropped %d tool result(s) whose call is no longer in the history%s: %s",
            len(dropped),
            by,
            ", ".join(dropped),
        )
    return tuple(out)


def _unanswered(calls: dict[str, str], by: str, hook: str | None) -> None:
    call_id, tool = next(iter(calls.items()))
    raise InvalidHistoryError(
        f"the history rewritten{by} leaves the call {call_id!r} of {tool!r} without its "
        "result right after the AI message that made it (every tool call needs exactly one "
        "result; replace a result with a short stub instead of dropping it, or drop the AI "
        "message with its results)",
        hook=hook,
        call_id=call_id,
        tool_name=tool,
    )


def _tokens(usage: TokenUsage | None) -> tuple[int | None, int | None, int | None]:
    if usage is None:
        return None, None, None
    total = usage.total_tokens
    if total is None and (usage.input_tokens is not None or usage.output_tokens is not None):
        total = (usage.input_tokens or 0) + (usage.output_tokens or 0)
    return usage.input_tokens, usage.output_tokens, total


class _Failed:
    """The end of a hooked stream: its failure, or None when it completed."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


class Policies:
    """The hooks and limits of a service (or of a conversation), split by point."""

    __slots__ = ("hooks", "limits", "points")

    def __init__(self, hooks: Sequence[Hook], limits: UsageLimits | None) -> None:
        if limits is not None and not isinstance(limits, UsageLimits):
            raise TypeError(f"usage_limits takes a UsageLimits, got {type(limits).__name__}")
        self.hooks = tuple(hooks)
        self.limits = limits
        self.points = _split(self.hooks)

    @classmethod
    def of(cls, hooks: Sequence[Hook] | None, limits: UsageLimits | None) -> Policies | None:
        """The policies of `hooks` and `limits`, or None when there are none."""
        if not hooks and limits is None:
            return None
        return cls(hooks or (), limits)

    @property
    def tool_hooks(self) -> tuple[_Bound, ...]:
        """The around-tool-call hooks, outermost first."""
        return self.points[2]

    @staticmethod
    def start(
        service: Policies | None, hooks: Sequence[Hook] | None, limits: UsageLimits | None
    ) -> PolicyRun | None:
        """The policies of one conversation: `service`'s hooks, then `hooks`; `limits`
        (else the service's). None when there are none."""
        own = Policies.of(hooks, limits)
        if own is None:
            return None if service is None else PolicyRun(service.points, service.limits)
        if service is None:
            return PolicyRun(own.points, own.limits)
        points = tuple(a + b for a, b in zip(service.points, own.points, strict=True))
        return PolicyRun(points, own.limits if own.limits is not None else service.limits)


class PolicyRun:
    """One conversation's hooks and budget, and what it used so far."""

    __slots__ = (
        "answering",
        "final",
        "limits",
        "model_hooks",
        "request_hooks",
        "result_hooks",
        "step",
        "tool_hooks",
        "usage",
    )

    def __init__(self, points: tuple[tuple[_Bound, ...], ...], limits: UsageLimits | None):
        self.request_hooks, self.model_hooks, self.tool_hooks, self.result_hooks = points
        self.limits = limits
        self.usage = RunUsage()
        self.final: str | None = None
        """Why the next request is the conversation's last (a budget spent, answer mode)."""
        self.answering = False
        """The last request was sent: nothing more may be asked for."""
        self.step: StepContext | None = None

    @property
    def eager_ok(self) -> bool:
        """Whether a streamed turn may start tools before the model has finished (not when
        model-call hooks may change the response, nor when tool calls are budgeted)."""
        limits = self.limits
        if self.model_hooks or self.answering:
            return False
        return limits is None or (limits.tool_calls is None and not limits.per_tool)

    # budget -----------------------------------------------------------------------------------
    def _snapshot(self, usage: TokenUsage | None) -> RunUsage:
        snap = self.usage.copy()
        snap.input_tokens, snap.output_tokens, snap.total_tokens = _tokens(usage)
        return snap

    def _exceeded(
        self, message: str, limit: str, allowed: int, used: int, usage: TokenUsage | None, *,
        tool_name: str | None = None,
    ) -> UsageLimitExceeded:  # fmt: skip
        return UsageLimitExceeded(
            message,
            limit=limit,
            allowed=allowed,
            used=used,
            usage=self._snapshot(usage),
            tool_name=tool_name,
        )

    def _request_refusal(self, usage: TokenUsage | None) -> UsageLimitExceeded | None:
        limits = self.limits
        if limits is None:
            return None
        if self.answering:
            return self._exceeded(
                "the model was told its budget is spent and still did not answer; stopping",
                "requests",
                self.usage.requests,
                self.usage.requests,
                usage,
            )
        if limits.requests is not None and self.usage.requests >= limits.requests:
            return self._exceeded(
                f"the conversation has made {self.usage.requests} model requests, the limit "
                f"(UsageLimits.requests={limits.requests}); stopping before the next one",
                "requests",
                limits.requests,
                self.usage.requests,
                usage,
            )
        if limits.counts_tokens:
            for name, used in zip(
                ("input_tokens", "output_tokens", "total_tokens"), _tokens(usage), strict=True
            ):
                allowed = getattr(limits, name)
                if allowed is not None and used is not None and used >= allowed:
                    return self._exceeded(
                        f"the conversation has used {used} {name.replace('_', ' ')}, the limit "
                        f"(UsageLimits.{name}={allowed}) is reached; stopping before the next "
                        "model request",
                        name,
                        allowed,
                        used,
                        usage,
                    )
        return None

    def check_round(
        self, calls: Sequence[ToolExecutionRequest], usage: TokenUsage | None
    ) -> str | None:
        """Count `calls` (a round about to run) against the budget. Over it: raise
        `UsageLimitExceeded`, or in answer mode return why the round is not run (the next
        request is then the last)."""
        limits = self.limits
        refusal: UsageLimitExceeded | None = None
        if self.answering:
            refusal = self._exceeded(
                "the model was told its budget is spent and asked for tools again; stopping",
                "tool_calls",
                self.usage.tool_calls,
                self.usage.tool_calls,
                usage,
            )
        elif limits is not None:
            if (
                limits.tool_calls is not None
                and self.usage.tool_calls + len(calls) > limits.tool_calls
            ):
                refusal = self._exceeded(
                    f"the model asked for {len(calls)} tool call(s) after "
                    f"{self.usage.tool_calls}; UsageLimits.tool_calls={limits.tool_calls} "
                    "allows no more, so none of them ran",
                    "tool_calls",
                    limits.tool_calls,
                    self.usage.tool_calls,
                    usage,
                )
            elif limits.per_tool:
                asked: dict[str, int] = {}
                for c in calls:
                    asked[c.name] = asked.get(c.name, 0) + 1
                for name, n in asked.items():
                    allowed = limits.per_tool.get(name)
                    done = self.usage.per_tool.get(name, 0)
                    if allowed is not None and done + n > allowed:
                        refusal = self._exceeded(
                            f"the model asked for {n} call(s) of {name!r} after {done}; "
                            f"UsageLimits.per_tool[{name!r}]={allowed} allows no more, so "
                            "none of the round's calls ran",
                            "per_tool",
                            allowed,
                            done,
                            usage,
                            tool_name=name,
                        )
                        break
        if refusal is None:
            self.usage.tool_calls += len(calls)
            per_tool = self.usage.per_tool
            for c in calls:
                per_tool[c.name] = per_tool.get(c.name, 0) + 1
            return None
        if self.answering or limits is None or limits.on_exceeded == "raise":
            raise refusal
        self.final = refusal.message
        return refusal.message

    @staticmethod
    def refuse(
        messages: list[ChatMessage], calls: Sequence[ToolExecutionRequest], why: str
    ) -> None:
        """Answer `calls` (not run: the budget is spent) in `messages`."""
        for c in calls:
            messages.append(
                ToolExecutionResultMessage(
                    id=c.id,
                    tool_name=c.name,
                    text=f"The tool call was not run: the conversation's budget is spent ({why}).",
                    is_error=True,
                )
            )

    # before each model request ------------------------------------------------------------------
    async def before_request(
        self, run: Any, parameters: ChatRequestParameters, rounds: int
    ) -> ChatRequestParameters:
        """Check the budget for the request about to be sent (raise, or in answer mode make
        it the last: a note in the history, tool calls off), then run the before-request
        hooks: `run.messages` becomes the history they return; returns the parameters to
        send."""
        if self.limits is not None:
            refusal = self._request_refusal(run.usage)
            if refusal is not None:
                if self.answering or self.limits.on_exceeded == "raise":
                    raise refusal
                self.final = refusal.message
            if self.final is not None:
                run.messages.append(
                    UserMessage(
                        f"The budget of this conversation is spent ({self.final}). Answer now "
                        "with what you have; no tool can be called any more."
                    )
                )
                parameters = parameters.model_copy(update={"tool_choice": ToolChoice.NONE})
                self.answering = True
                self.final = None
            self.usage.requests += 1
        if self.request_hooks or self.model_hooks:
            self.step = StepContext(
                round=rounds,
                messages=tuple(run.messages),
                usage=run.usage,
                memory_id=run.memory_id,
                context=run.context,
            )
        if not self.request_hooks:
            return parameters
        given = tuple(run.messages)
        request = ChatRequest.model_construct(messages=given, parameters=parameters)
        label = None
        for bound in self.request_hooks:
            out = await _maybe(bound.func(request, self.step))
            if out is None or out is request:
                continue
            if not isinstance(out, ChatRequest):
                raise TypeError(
                    f"the before_model_request hook {bound.label} must return a ChatRequest "
                    f"(or None), got {type(out).__name__}"
                )
            if not _same(out.messages, request.messages):
                label = bound.label
            request = out
        if label is not None:
            run.messages[:] = check_history(request.messages, label)
        return request.parameters

    # around the model call ----------------------------------------------------------------------
    async def call_model(
        self, request: ChatRequest, call: Callable[[ChatRequest], Awaitable[ChatResponse]]
    ) -> ChatResponse:
        """`call(request)` through the around-model-call hooks (outermost first)."""
        hooks = self.model_hooks

        async def innermost(given: ChatRequest) -> ChatResponse:
            if not isinstance(given, ChatRequest):
                raise TypeError(f"call_model takes a ChatRequest, got {type(given).__name__}")
            if not _same(given.messages, request.messages):
                checked = check_history(given.messages, hooks[-1].label)
                given = given.model_copy(update={"messages": checked})
            return await call(given)

        chain = _chain(hooks, self.step, innermost, ChatResponse, "around_model_call")
        response: ChatResponse = await chain(request)
        return response

    async def stream_model(
        self,
        request: ChatRequest,
        open_stream: Callable[[ChatRequest], AsyncIterator[StreamEvent]],
    ) -> AsyncGenerator[StreamEvent, None]:
        """A streamed model call through the around-model-call hooks: each stream the hooks
        open (`call_model`) is forwarded as it arrives, without its `ResponseCompleted`;
        one `ResponseCompleted` with the response the hooks return ends it."""
        queue: asyncio.Queue[Any] = asyncio.Queue()

        async def call(given: ChatRequest) -> ChatResponse:
            response: ChatResponse | None = None
            async with contextlib.aclosing(open_stream(given)) as stream:  # type: ignore[type-var]
                async for event in stream:
                    if isinstance(event, ResponseCompleted):
                        response = event.response
                    else:
                        queue.put_nowait(event)
            if response is None:
                raise ToolweaveError("the model stream ended without a final response")
            return response

        async def pump() -> None:
            try:
                response = await self.call_model(request, call)
            except asyncio.CancelledError:
                raise
            except BaseException as e:
                queue.put_nowait(_Failed(e))
            else:
                queue.put_nowait(ResponseCompleted(response))
                queue.put_nowait(_Failed(None))

        task = asyncio.create_task(pump())
        try:
            while True:
                item = await queue.get()
                if isinstance(item, _Failed):
                    if item.error is not None:
                        raise item.error
                    return
                yield item
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task

    # after each tool result ---------------------------------------------------------------------
    async def after_result(
        self, call: ToolExecutionRequest, result: ToolExecutionResult, ctx: ToolContext
    ) -> ToolExecutionResult:
        """`result` through the after-tool-result hooks, in order."""
        for bound in self.result_hooks:
            out = await _maybe(bound.func(call, result, ctx))
            if out is None:
                continue
            if not isinstance(out, ToolExecutionResult):
                raise TypeError(
                    f"the after_tool_result hook {bound.label} must return a "
                    f"ToolExecutionResult (or None), got {type(out).__name__}"
                )
            result = out
        return result


def _chain(
    hooks: Sequence[_Bound],
    ctx: Any,
    innermost: Callable[[Any], Awaitable[Any]],
    returns: type,
    point: str,
) -> Callable[[Any], Awaitable[Any]]:
    """`innermost` inside the around-`hooks` (the first outermost), each hook's answer
    checked to be a `returns`."""
    call = innermost
    for bound in reversed(hooks):

        async def hooked(given: Any, bound: _Bound = bound, inner: Any = call) -> Any:
            out = await _around(bound, given, inner, ctx)
            if not isinstance(out, returns):
                raise TypeError(
                    f"the {point} hook {bound.label} must return a {returns.__name__}, got "
                    f"{type(out).__name__}"
                )
            return out

        call = hooked
    return call


async def run_tool_hooks(
    hooks: Sequence[_Bound],
    call: ToolExecutionRequest,
    ctx: ToolContext,
    execute: Callable[[ToolExecutionRequest], Awaitable[ToolExecutionResult]],
) -> ToolExecutionResult:
    """`execute(call)` through the around-tool-call `hooks` (outermost first)."""

    async def innermost(given: ToolExecutionRequest) -> ToolExecutionResult:
        if not isinstance(given, ToolExecutionRequest):
            raise TypeError(f"call_tool takes a ToolExecutionRequest, got {type(given).__name__}")
        if given.id != call.id or given.name != call.name:
            raise ValueError(
                f"a hook may change a call's arguments, not its id or tool "
                f"({call.id!r} of {call.name!r} became {given.id!r} of {given.name!r})"
            )
        return await execute(given)

    result: ToolExecutionResult = await _chain(
        hooks, ctx, innermost, ToolExecutionResult, "around_tool_call"
    )(call)
    return result


class HookedExecutor:
    """Runs each call of `inner` (an executor) through around-tool-call `hooks`; the loop
    and the durable layer look through it to `inner`."""

    __slots__ = ("ctx", "hooks", "inline", "inner")

    def __init__(
        self, inner: Any, hooks: Sequence[_Bound], ctx: ToolContext, *, inline: bool = False
    ) -> None:
        self.inner = inner
        self.hooks = hooks
        self.ctx = ctx
        self.inline = inline
        """Run `inner` (a plain sync tool) on the loop's own thread (the sync face)."""

    async def aexecute_with_result(
        self, request: ToolExecutionRequest, memory_id: Any = None, **kwargs: Any
    ) -> ToolExecutionResult:
        inner = self.inner

        async def execute(given: ToolExecutionRequest) -> ToolExecutionResult:
            if self.inline:
                done: ToolExecutionResult = inner.execute_with_result(given, memory_id, **kwargs)
                return done
            result: ToolExecutionResult = await inner.aexecute_with_result(
                given, memory_id, **kwargs
            )
            return result

        return await run_tool_hooks(self.hooks, request, self.ctx, execute)
