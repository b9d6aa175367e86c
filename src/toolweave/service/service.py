"""`ToolService`: tool registration and the reason–act loop.

One async engine serves every face: `achat` consumes it, `chat` runs `achat` on a private
loop, `achat_stream`/`chat_stream` yield its events. The rules (docs/loop.md):

- registered tools are merged into the request parameters (the caller's other parameters
  win; tools the caller passes are kept and come first);
- toolsets (`ToolService(toolsets=[...])`, `.toolsets(...)`) are asked before every model
  request for the step's tools and instructions; their tools follow the service's own, a
  name offered twice in a step is a `ToolNameConflictError`, and the request is rebuilt
  only when a set answered with other tools (docs/toolsets.md);
- `max_tool_calling_round_trips` counts tool rounds: the model may ask for tools that many
  times; asking once more raises `ToolLoopLimitError` (same rule for every face);
- the calls of one round run concurrently, with no cap by default; bounds are opt-in: per
  tool (`max_concurrency` on the card or the registration) and per service
  (`ToolService(max_concurrency=...)`), both shared by every conversation of the service;
  calls of tools bound to one instance (methods of one object) run one at a time, in
  request order, unless the card or the registration says `parallel_safe=True`; a tool
  with `parallel_safe=False` is a barrier: calls before it finish first, it runs alone,
  calls after it start afterwards; results are appended in request order; one failure never
  discards its siblings' results;
- argument errors go to `arguments_error_handler`, tool errors to
  `execution_error_handler`, unknown tool names to `hallucinated_tool_strategy`; the
  defaults feed the problem back to the model, argument and unknown-tool errors within a
  per-tool budget of consecutive failures (`max_argument_retries`, default 2);
- `ReturnBehavior`: return at once when the last call is `IMMEDIATE_IF_LAST` or every call
  is `IMMEDIATE`/`IMMEDIATE_IF_LAST`, unless a call of the round failed;
- after a tool round, a `tool_choice` that forces tools (`REQUIRED` or a specific tool) is
  relaxed to `AUTO`, so the model can answer (`reset_tool_choice=False` keeps it);
- whatever happens, every tool call id in the history gets exactly one result message; an
  escaping exception carries the valid history as `error.partial_result`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import json
import logging
import types
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Coroutine,
    Generator,
    Iterator,
    Mapping,
    Sequence,
)
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel

from .._utils.limit import Limit
from .._utils.sync import iterate_sync, run_sync
from ..callbacks.events import ToolCallEvents as E
from ..callbacks.framework import CallbackFramework, callback_framework
from ..callbacks.otel import current
from ..chat.events import CompleteToolCall, ResponseCompleted, StreamEvent, TextDelta
from ..chat.messages import AiMessage, ChatMessage, ToolExecutionResultMessage, UserMessage
from ..chat.model import ChatModel
from ..chat.request import ChatRequest, ChatRequestParameters, ToolChoice
from ..chat.response import PAUSED_TURN, ChatResponse, TokenUsage
from ..chat.telemetry import (
    end_agent_span,
    end_model_span,
    loop_owned,
    model_parent,
    start_agent_span,
    start_model_span,
)
from ..context import (
    ElicitationResult,
    ToolContext,
    current_approval,
    use_approval,
    use_tool_channel,
)
from ..errors import (
    HallucinatedToolError,
    StructuredOutputError,
    ToolArgumentsError,
    ToolCardError,
    ToolExecutionError,
    ToolLoopLimitError,
    ToolNotSupportedError,
    ToolweaveError,
)
from ..execution.executor import DefaultToolExecutor, _CallableExecutor, error_text
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecution, ToolExecutionResult
from ..policies._loop import HookedExecutor, Policies, PolicyRun
from ..policies.hooks import Hook
from ..policies.usage import UsageLimits
from ..schema.arguments import parse_arguments
from ..schema.output import OutputSchema, OutputValidationError, PartialJsonStream
from ..schema.validation import JsonSchemaArgumentsValidator
from ..tools.approval import needs_approval, validated_arguments
from ..tools.base import Tool
from ..tools.card import ReturnBehavior, ToolCard
from ..tools.guardrails import Guardrail, check_guardrails
from ..tools.local_function import LocalFunction
from ..tools.pause import ToolPause
from ..tools.retry import ModelRetry, Retry
from ..tools.source import ToolSource
from ..toolsets.abstract import UNKNOWN, Toolset, ToolsetTool
from ..toolsets.choosing import merge_choices
from ..toolsets.function import FunctionToolset, Options
from ..toolsets.offering import Offering, with_instructions
from ..toolsets.searchable import is_search_tool
from ..toolsets.step import StepContext
from .approvals import (
    ApprovalRequired,
    Approve,
    CallAlreadyDecidedError,
    ChatStatus,
    ConversationState,
    Decision,
    DeferredResult,
    Deny,
    PendingCall,
    StandingDecision,
    already_decided,
    check_decisions,
    check_given_standing,
    claim_key,
    decision_kind,
    repeat_allowed,
    sign_standing,
    standing_from,
    verify_standing,
)
from .guardrails import HALT_ATTRIBUTE, GuardedExecutor, halted_error, run_guarded
from .handlers import (
    HallucinatedToolStrategy,
    HallucinatedToolStrategyFunction,
    ToolErrorContext,
    ToolErrorHandler,
    ToolErrorHandlerResult,
    answer_hallucinated,
    default_arguments_error_handler,
    default_execution_error_handler,
)
from .output_limits import (
    READ_RESULT_CARD,
    READ_RESULT_TOOL,
    Cap,
    ResultStore,
    TokenCounter,
    as_store,
    check_cap,
    cut,
    page_text,
    stored_ids,
)
from .result import (
    ChatCompleted,
    PartialOutput,
    ToolChatResult,
    ToolExecutionFinished,
    ToolExecutionStarted,
    ToolProgress,
)
from .rules import ApprovalRule, Verdict, evaluate
from .search import (
    FOUND_TOOLS_ATTRIBUTE,
    NativeToolSearch,
    ToolSearchStrategy,
    found_result,
    native_tool_search,
)
from .subagent import (
    ConversationTool,
    NestedEvent,
    Prompt,
    child_state,
    nested_pending,
    route_decisions,
    route_pending,
    subconversation_spent,
)

__all__ = ["ServiceEvent", "ToolService"]

logger = logging.getLogger("toolweave.service")
_DECIDED_KEPT = 100_000
"""How many decided calls a service remembers (to refuse running one twice, or deciding one
differently later)."""

ServiceEvent = (
    StreamEvent
    | ToolExecutionStarted
    | ToolProgress
    | ToolExecutionFinished
    | PartialOutput
    | ApprovalRequired
    | ChatCompleted
    | NestedEvent
)


_UNKNOWN: Any = UNKNOWN


class _ServiceChannel:
    """The `ToolChannel` of a call run by `ToolService`: progress fires `tool_progress` (and
    becomes a `ToolProgress` event when streaming), logs fire `tool_log` and go to the service
    logger; there is no one to sample or elicit from."""

    def __init__(
        self,
        service: ToolService,
        call: ToolExecutionRequest,
        queue: asyncio.Queue[ServiceEvent] | None,
        run: _Run | None = None,
    ) -> None:
        self.service = service
        self.call = call
        self.queue = queue
        self.run = run
        """The conversation of the call (a conversation run as a tool reads its budget)."""
        self.loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        if self.queue is not None:
            self.queue.put_nowait(ToolProgress(self.call, progress, total, message))
        await self.service._fire(
            E.TOOL_PROGRESS,
            tool_name=self.call.name,
            request=self.call,
            progress=progress,
            total=total,
            message=message,
        )

    async def log(self, level: str, data: Any, logger_name: str | None) -> None:
        logger.info("tool %s (%s): %s", self.call.name, level, data)
        await self.service._fire(
            E.TOOL_LOG,
            tool_name=self.call.name,
            request=self.call,
            level=level,
            data=data,
            logger=logger_name,
        )

    async def sample(self, messages: Any, **params: Any) -> str:
        raise ToolNotSupportedError("sampling is not available inside ToolService")

    async def elicit(self, message: str, schema: dict[str, Any]) -> ElicitationResult:
        raise ToolNotSupportedError("elicitation is not available inside ToolService")


_Entry = ToolsetTool
"""A tool the loop can run: its card, executor and registration options (a registered
`Tool` without options stays as it is in the registry until its first call)."""


@dataclass(slots=True, eq=False, weakref_slot=True)
class _Source:
    """Tools registered from a `ToolSource`, kept in step with it: `changes` counts its
    change notices (bumped from the source's thread), `applied` the notices listed since."""

    source: ToolSource
    cards: dict[str, ToolCard]
    """The registered tools' own cards, by name."""
    options: tuple[int | None, bool | None, Any]
    excluded: set[str] = field(default_factory=set)
    """Names removed with `ToolService.remove`: a refresh does not bring them back."""
    changes: int = 0
    applied: int = 0

    def changed(self) -> None:
        self.changes += 1


@dataclass(slots=True)
class _Run:
    messages: list[ChatMessage]
    parameters: ChatRequestParameters
    memory_id: Any
    context: Any
    injected: dict[str, Any] | None
    executions: list[ToolExecution] = field(default_factory=list)
    intermediate: list[ChatResponse] = field(default_factory=list)
    usage: TokenUsage | None = None
    failures: dict[str, int] = field(default_factory=dict)
    found: list[str] = field(default_factory=list)
    locks: dict[int, asyncio.Lock] = field(default_factory=dict)
    """One lock per object whose methods are tools called in this conversation."""
    output: OutputSchema | None = None
    output_failures: int = 0
    output_value: Any = None
    inline_sync: bool = False
    """Run a round's single sync tool on the engine's own thread (the sync `chat` face)."""
    rounds: int = 0
    """Tool rounds used before this run (a resumed conversation's)."""
    resume: ConversationState | None = None
    decisions: dict[str, Decision] = field(default_factory=dict)
    claimed: list[tuple[str, str]] = field(default_factory=list)
    """The (pause id, call id) decisions this resume recorded first in the service."""
    gates: dict[str, PendingCall | None] = field(default_factory=dict)
    """Per call id of the current model turn: why the call waits (None: it runs), decided
    once per call (cleared at every model turn: a model may reuse an id in a later turn)."""
    span: Any = None
    """The conversation's `invoke_agent` span (None when tracing is off)."""
    entries: dict[str, _Entry | Tool] | None = None
    """The tools of the current round: the service's as the round's request was built (a
    refresh from a `ToolSource` replaces the service's dict, never this one), or the
    step's offering's when the service asks toolsets per step."""
    offering: Offering | None = None
    """The union of the toolsets' tools for the current step (None: the service's own
    tools, no per-step asking)."""
    stored: list[str] = field(default_factory=list)
    """The ids of this conversation's results kept in the service's result store."""
    reader_offered: bool = False
    """Whether the current request offers `read_result`."""
    native_search: bool = False
    """The model searches the hidden tools itself: all are sent, marked deferred."""
    policy: PolicyRun | None = None
    """The conversation's hooks and budget (None: neither; the loop does no policy work)."""
    standing: list[StandingDecision] = field(default_factory=list)
    """The conversation's standing decisions (from its state, and made while resuming)."""
    approvals: dict[str, Decision] = field(default_factory=dict)
    """Per call id: the decision a call that paused itself runs again with."""
    explicit: set[str] = field(default_factory=set)
    """Call ids a person decided one by one in this run (standing decisions do not apply)."""
    refused: dict[str, str] = field(default_factory=dict)
    """Per call id: why a rule or a standing decision denied it (it never runs)."""
    verdicts: dict[tuple[str, str, bool], Verdict | None] = field(default_factory=dict)

    def result(
        self,
        final: ChatResponse | None,
        *,
        immediate: bool = False,
        state: ConversationState | None = None,
    ) -> ToolChatResult:
        return ToolChatResult(
            final_response=final,
            tool_executions=self.executions,
            intermediate_responses=self.intermediate,
            token_usage=self.usage,
            messages=self.messages,
            immediate=immediate,
            output=self.output_value,
            status=ChatStatus.PENDING if state is not None else ChatStatus.COMPLETED,
            pending=nested_pending(state.pending) if state is not None else (),
            state=state,
            standing_decisions=tuple(self.standing),
        )


@dataclass(slots=True)
class _Turn:
    """One model turn of a streamed conversation: its event queue, the tools it started
    early, the response and the round's outcomes."""

    queue: asyncio.Queue[Any] | None = None
    started: dict[str, asyncio.Task[_Outcome]] = field(default_factory=dict)
    response: ChatResponse | None = None
    outcomes: list[_Outcome] = field(default_factory=list)
    finished: bool = False
    """The conversation ended in this turn (a resumed round paused again or returned)."""
    round: asyncio.Task[list[_Outcome]] | None = None
    """The streamed round running (its generator is not closed with the conversation's:
    the conversation cancels it when it ends, so its tools stop at once)."""


@dataclass(frozen=True, slots=True)
class _FromModel:
    """An item of an eager turn's queue coming from the model's stream: one event, its end
    (`event` None), or its failure."""

    event: StreamEvent | None = None
    error: BaseException | None = None


async def _interleaved(
    pump: Coroutine[Any, Any, None], queue: asyncio.Queue[Any]
) -> AsyncGenerator[Any, None]:
    """Run `pump` (which moves a model stream into `queue`) in a task of its own and yield
    what reaches `queue` (model events and the progress of tools started eagerly) in the
    order it arrives; closing this generator cancels the pump."""
    task = asyncio.create_task(pump)
    try:
        while True:
            item = await queue.get()
            if not isinstance(item, _FromModel):
                yield item
            elif item.error is not None:
                raise item.error
            elif item.event is None:
                return
            else:
                yield item.event
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


def _renamed(event: StreamEvent, ids: _UniqueIds) -> StreamEvent:
    """`event` with its call ids made unique (see `_UniqueIds`)."""
    if isinstance(event, CompleteToolCall):
        unique = ids(event.request)
        if unique is not event.request:
            return CompleteToolCall(event.index, unique)
    elif isinstance(event, ResponseCompleted):
        return ResponseCompleted(_unique_call_ids(event.response))
    return event


class _UniqueIds:
    """Makes the tool call ids of one response unique: a repeated id gets a suffix (`id_2`,
    `id_3`, ...) so each call runs once and gets its own result, and the history stays valid.
    Applied in order to the calls of a stream's `CompleteToolCall` events and, afresh, to
    the final response's calls, it renames both alike."""

    __slots__ = ("_seen",)

    def __init__(self) -> None:
        self._seen: set[str] = set()

    def __call__(self, call: ToolExecutionRequest) -> ToolExecutionRequest:
        if call.id not in self._seen:
            self._seen.add(call.id)
            return call
        n = 2
        while f"{call.id}_{n}" in self._seen:
            n += 1
        unique = f"{call.id}_{n}"
        self._seen.add(unique)
        logger.warning("the model sent tool call id %r more than once; renamed %r", call.id, unique)
        return call.model_copy(update={"id": unique})


def _request(messages: tuple[ChatMessage, ...], parameters: ChatRequestParameters) -> ChatRequest:
    """`ChatRequest.model_construct(messages=messages, parameters=parameters)` (trusted
    values, once per round) without its generic per-field loop: what it builds for a model
    of two fields, both given, no private attributes, no extra."""
    request = _new(ChatRequest)
    _setattr(request, "__dict__", {"messages": messages, "parameters": parameters})
    _setattr(request, "__pydantic_fields_set__", {"messages", "parameters"})
    _setattr(request, "__pydantic_extra__", None)
    _setattr(request, "__pydantic_private__", None)
    return request


_new = object.__new__
_setattr = object.__setattr__


def _unique_call_ids(response: ChatResponse) -> ChatResponse:
    """`response` with its tool call ids made unique (itself when they already are)."""
    calls = response.ai_message.tool_execution_requests
    if len(calls) < 2 or len({c.id for c in calls}) == len(calls):
        return response
    ids = _UniqueIds()
    message = response.ai_message.model_copy(
        update={"tool_execution_requests": [ids(c) for c in calls]}
    )
    return response.model_copy(update={"ai_message": message})


def _propagates(error: BaseException) -> bool:
    """Whether an exception from a tool ends the conversation instead of becoming the call's
    error result: the caller's cancellation (the current task is being cancelled), and
    KeyboardInterrupt, SystemExit, GeneratorExit. A CancelledError the tool raised itself
    while nobody cancelled us, or a library's own BaseException, is the tool's failure."""
    if isinstance(error, asyncio.CancelledError):
        task = asyncio.current_task()
        return task is None or task.cancelling() > 0
    return isinstance(error, KeyboardInterrupt | SystemExit | GeneratorExit)


@dataclass(slots=True)
class _Outcome:
    """One call's result, plus the exception a handler raised (re-raised after the round)."""

    execution: ToolExecution
    abort: BaseException | None = None
    paused: ToolPause | None = None
    """The tool paused itself (`NeedsApproval`, `CallDeferred`): the call has no result."""


class ToolService:
    """Holds tools and runs the loop in which a model calls them (see the module docstring)."""

    def __init__(
        self,
        *,
        max_tool_calling_round_trips: int = 100,
        max_concurrency: int | None = None,
        max_argument_retries: int = 2,
        arguments_error_handler: ToolErrorHandler | None = None,
        execution_error_handler: ToolErrorHandler | None = None,
        hallucinated_tool_strategy: HallucinatedToolStrategyFunction = (
            HallucinatedToolStrategy.FEEDBACK
        ),
        tool_search: ToolSearchStrategy | Literal["native"] | None = None,
        reset_tool_choice: bool = True,
        callbacks: CallbackFramework | None = None,
        toolsets: Sequence[Toolset] = (),
        max_result_chars: int | None = None,
        max_result_tokens: int | None = None,
        result_token_counter: TokenCounter | None = None,
        result_store: ResultStore | bool | None = None,
        guardrails: Sequence[Guardrail] = (),
        hooks: Sequence[Hook] = (),
        usage_limits: UsageLimits | None = None,
    ) -> None:
        if max_tool_calling_round_trips < 0:
            raise ValueError("max_tool_calling_round_trips must not be negative")
        check_cap(max_result_chars, max_result_tokens, result_token_counter)
        if max_result_tokens is not None and result_token_counter is None:
            raise ToolCardError("max_result_tokens needs a result_token_counter to count with")
        self.max_result_chars = max_result_chars
        self.max_result_tokens = max_result_tokens
        self.result_token_counter = result_token_counter
        self.result_store = as_store(result_store)
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1 (or None: no bound)")
        self.max_tool_calling_round_trips = max_tool_calling_round_trips
        self.max_concurrency = max_concurrency
        self._limit = Limit(max_concurrency) if max_concurrency is not None else None
        self.max_argument_retries = max_argument_retries
        self.arguments_error_handler = arguments_error_handler or default_arguments_error_handler
        self.execution_error_handler = execution_error_handler or default_execution_error_handler
        self.hallucinated_tool_strategy = hallucinated_tool_strategy
        if isinstance(tool_search, str) and tool_search != "native":
            raise ValueError(
                f"tool_search={tool_search!r}: use 'native', a ToolSearchStrategy, or None"
            )
        self.tool_search = NativeToolSearch() if tool_search == "native" else tool_search
        """Hides tools until a search finds them; a `NativeToolSearch` lets a provider that
        searches itself do it (docs/loop.md, Native tool search)."""
        self.reset_tool_choice = reset_tool_choice
        self._callbacks = callbacks
        self._functions = FunctionToolset(label="ToolService")
        """The tools registered with `tools`, `tool` and `deferred`."""
        self._functions.wrap = self._wrap
        self._functions.reserved = self._reserved
        self._functions.on_source = self._add_source
        self._toolsets: list[Toolset] = []
        # (pause id, call id) -> the first decision's kind ("approve", "deny", "result"),
        # oldest first
        self._decided: dict[tuple[str, str], str] = {}
        self._rules: list[ApprovalRule] = []
        self._sources: list[_Source] = []
        self._version = 0
        """Bumped when a refresh changes the tools (a running loop rebuilds its request)."""
        self.toolsets(*toolsets)
        self._policies = Policies.of(hooks, usage_limits)
        """The service's hooks and usage limits (docs/policies.md); None: neither."""
        self.guardrails = check_guardrails(guardrails)
        """Run around every tool call, before the toolsets' and the tools' own guardrails."""

    # registration ---------------------------------------------------------------------------
    @property
    def callbacks(self) -> CallbackFramework:
        """The callback framework for loop events (the global one by default)."""
        return self._callbacks if self._callbacks is not None else callback_framework

    @property
    def _entries(self) -> dict[str, _Entry | Tool]:
        """The registry of the service's own tools, by name (a bare `Tool` until its first
        call)."""
        return self._functions._entries

    @_entries.setter
    def _entries(self, entries: dict[str, _Entry | Tool]) -> None:
        self._functions._entries = entries
        self._functions.changed()

    def _reserved(self) -> str | None:
        return self.tool_search.card.name if self.tool_search is not None else None

    def _check_new(self, name: str) -> None:
        self._functions.check_new(name)

    def _wrap(self, executor: Any) -> Any:
        """The executor the loop calls for a registered one (a hook for subclasses)."""
        return executor

    def _entry(self, name: str, run: _Run | None = None) -> _Entry | None:
        """The entry registered under `name` (made from a bare `Tool` on first use), among
        the tools of `run`'s current round when given."""
        entries = None if run is None else run.entries
        entry: _Entry | None = self._functions.entry(name, entries)
        return entry

    def tools(
        self,
        *objects: Any,
        max_concurrency: int | None = None,
        parallel_safe: bool | None = None,
        requires_approval: Any = None,
    ) -> ToolService:
        """Register tools: `Tool`s, plain functions, objects (or classes) with `@tool`
        methods, `{card_or_name: executor}` mappings, or iterables of these.

        `max_concurrency` bounds the calls of each of these tools running at once (across
        every conversation of the service); `parallel_safe` overrides the cards' (True lets
        methods of one object run concurrently, False makes each tool a barrier);
        `requires_approval` overrides the cards' (True, False, or a function of the
        arguments and the `ToolContext`; see docs/approvals.md)."""
        self._functions.tools(
            *objects,
            max_concurrency=max_concurrency,
            parallel_safe=parallel_safe,
            requires_approval=requires_approval,
        )
        return self

    def _add_source(self, tools: list[Any], source: ToolSource, options: Options) -> None:
        """Register a source's listing (all or nothing) and follow the source's changes."""
        if not all(isinstance(t, Tool) for t in tools):
            raise ToolCardError(f"the listing of {source!r} holds something that is not a Tool")
        names = [t.card.name for t in tools]
        for name in names:
            self._check_new(name)
        if len(set(names)) != len(names):
            raise ToolCardError(f"the listing of {source!r} repeats a tool name")
        state = _Source(source, {t.card.name: t.card for t in tools}, options)
        for t in tools:
            self._entries[t.card.name] = self._functions.made(t, options)
        self._functions.changed()
        self._sources.append(state)
        source.watch(state.changed)

    async def _refresh(self) -> None:
        """List the sources that changed again and apply what changed to the tools: added
        tools appear, removed ones go, changed ones are replaced. The service's dict is
        replaced, never changed in place, so a round in progress keeps its tools."""
        for state in self._sources:
            seen = state.changes
            if seen == state.applied:
                continue
            try:
                tools = await state.source.alist()
            except Exception as e:  # the old tools stay; calls to a dead server fail anyway
                logger.warning("could not list the tools of %r again: %s", state.source, e)
                state.applied = max(state.applied, seen)
                continue
            if seen < state.applied:
                continue  # a concurrent refresh applied a newer listing
            state.applied = seen
            self._apply(state, tools)

    def _apply(self, state: _Source, tools: Sequence[Tool]) -> None:
        entries = dict(self._entries)
        listed: set[str] = set()
        changed = False
        search = self.tool_search.card.name if self.tool_search is not None else None
        for t in tools:
            name = t.card.name
            if name in state.excluded or name in listed:
                continue
            if name in state.cards:
                listed.add(name)
                if state.cards[name] == t.card:
                    continue
            elif name in entries or name == search:
                logger.warning(
                    "tool %r of %r is not registered: a tool with this name already is",
                    name,
                    state.source,
                )
                continue
            listed.add(name)
            entries[name] = self._functions.made(t, state.options)
            state.cards[name] = t.card
            changed = True
        for name in [n for n in state.cards if n not in listed]:
            del state.cards[name]
            entries.pop(name, None)
            changed = True
        if changed:
            self._entries = entries
            self._version += 1

    def tool(
        self,
        obj: Any,
        method_or_executor: Any,
        *,
        max_concurrency: int | None = None,
        parallel_safe: bool | None = None,
        requires_approval: Any = None,
    ) -> ToolService:
        """Register one tool: `tool(obj, "method_name")`, or `tool(spec, executor)` where
        `spec` is a `ToolCard`, a `ToolInfo`, a function descriptor (`{"name", "description",
        "parameters"}`, or OpenAI's `{"type": "function", "function": {...}}`) or a name.
        `max_concurrency`, `parallel_safe` and `requires_approval` as for `tools`."""
        self._functions.tool(
            obj,
            method_or_executor,
            max_concurrency=max_concurrency,
            parallel_safe=parallel_safe,
            requires_approval=requires_approval,
        )
        return self

    def deferred(self, *specs: Any) -> ToolService:
        """Register deferred tools: the model sees them like any tool, but toolweave never
        runs their calls; the loop stops with them pending (`ToolChatResult.pending`) and
        the caller resumes it with a `DeferredResult` per call (e.g. a tool the browser
        runs). `specs` are as for `tool(spec, executor)`: cards, `ToolInfo`s, function
        descriptors or names."""
        self._functions.deferred(*specs)
        return self

    def allow(self, *tools: str, when: Any = None) -> ToolService:
        """Let calls of these tools (names or shell-style globs) run without asking, those
        whose arguments match `when` if given (an `ArgumentPattern`, or a function of the
        validated arguments returning True). A deny rule or standing denial that matches
        wins (docs/approvals.md)."""
        self._rules.append(ApprovalRule.make("allow", tools, when, None))
        return self

    def deny(self, *tools: str, when: Any = None, message: str | None = None) -> ToolService:
        """Never run calls of these tools (names or globs) whose arguments match `when` (any
        arguments if not given): the model gets `message` as the call's error result, and
        nobody is asked. Deny wins over every allow and approval (docs/approvals.md)."""
        self._rules.append(ApprovalRule.make("deny", tools, when, message))
        return self

    def remove(self, name: str) -> None:
        """Unregister the tool called `name` (a refresh of its `ToolSource` does not bring
        it back)."""
        self._functions.remove(name)
        for state in self._sources:
            if state.cards.pop(name, None) is not None:
                state.excluded.add(name)

    @property
    def tool_cards(self) -> tuple[ToolCard, ...]:
        """The cards of every registered tool, in registration order."""
        return self._functions.tool_cards

    def toolsets(self, *toolsets: Toolset) -> ToolService:
        """Add toolsets: each is asked, before every model request, for the tools to offer
        (after the service's own, in the order added) and for instructions to add to the
        system text (docs/toolsets.md)."""
        for toolset in toolsets:
            if not isinstance(toolset, Toolset):
                raise TypeError(
                    f"{toolset!r} is not a Toolset (register tools with .tools(...), or wrap "
                    "them: FunctionToolset(...))"
                )
            self._toolsets.append(toolset)
        return self

    def as_tool(
        self,
        model: ChatModel,
        *,
        name: str,
        description: str,
        input: type[BaseModel] | None = None,
        output_type: Any = None,
        instructions: str | None = None,
        prompt: Prompt | None = None,
        parameters: ChatRequestParameters | None = None,
        timeout: float | None = None,
        requires_approval: Any = False,
    ) -> ConversationTool:
        """A conversation of this service with `model`, offered to another service as one
        tool (register it like any tool, or put it in a toolset): each call runs the
        conversation with its arguments (`input`, a pydantic model; default one `task`
        string) and answers with its final answer, or its structured output with
        `output_type` (docs/approvals.md, "A conversation as a tool")."""
        return ConversationTool(
            self,
            model,
            name=name,
            description=description,
            input=input,
            output_type=output_type,
            instructions=instructions,
            prompt=prompt,
            parameters=parameters,
            timeout=timeout,
            requires_approval=requires_approval,
        )

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    @staticmethod
    def sign_standing(
        decisions: Sequence[StandingDecision], *, key: str | bytes, memory_id: Any
    ) -> str:
        """Standing decisions (`result.standing_decisions`) as text signed with `key` and
        bound to the conversation `memory_id`, for a client to hold between turns."""
        return sign_standing(decisions, key=key, memory_id=memory_id)

    @staticmethod
    def verify_standing(
        text: str | bytes, *, key: str | bytes, memory_id: Any
    ) -> tuple[StandingDecision, ...]:
        """The standing decisions in `text` (`sign_standing`) for the conversation
        `memory_id`; an `InvalidStandingDecisionsError` for anything else."""
        return verify_standing(text, key=key, memory_id=memory_id)

    # public faces ---------------------------------------------------------------------------
    def chat(
        self,
        model: ChatModel,
        parameters: ChatRequestParameters | None = None,
        messages: Sequence[ChatMessage] | str | ConversationState | None = None,
        *,
        memory_id: Any = None,
        context: Any = None,
        injected: Mapping[str, Any] | None = None,
        output_type: Any = None,
        decisions: Mapping[str, Decision] | None = None,
        hooks: Sequence[Hook] | None = None,
        usage_limits: UsageLimits | None = None,
        standing_decisions: Sequence[StandingDecision] | None = None,
    ) -> ToolChatResult:
        """Run the loop to the model's final answer (synchronously).

        The same engine as `achat`; a round's single sync tool runs on the calling thread.
        """
        run = self._start(
            parameters,
            messages,
            memory_id,
            context,
            injected,
            output_type,
            decisions,
            hooks=hooks,
            usage_limits=usage_limits,
            standing_decisions=standing_decisions,
        )
        run.inline_sync = True
        return run_sync(self._complete(model, run))

    async def _complete(self, model: ChatModel, run: _Run) -> ToolChatResult:
        result: ToolChatResult | None = None
        async for event in self._loop(model, run, streaming=False, eager=False):
            if isinstance(event, ChatCompleted):
                result = event.result
        assert result is not None
        return result

    async def achat(
        self,
        model: ChatModel,
        parameters: ChatRequestParameters | None = None,
        messages: Sequence[ChatMessage] | str | ConversationState | None = None,
        *,
        memory_id: Any = None,
        context: Any = None,
        injected: Mapping[str, Any] | None = None,
        output_type: Any = None,
        decisions: Mapping[str, Decision] | None = None,
        hooks: Sequence[Hook] | None = None,
        usage_limits: UsageLimits | None = None,
        standing_decisions: Sequence[StandingDecision] | None = None,
    ) -> ToolChatResult:
        """Run the loop to the model's final answer.

        `messages` is the conversation so far (a str is one user message). `memory_id`
        and `context` reach tools through `ToolContext`; `injected` supplies values for
        parameters declared `Injected`. With `output_type` (a pydantic model, dataclass,
        TypedDict or JSON schema dict) the final answer must be JSON of that shape: it is
        requested through `response_format`, validated, corrected by the model within the
        retry budget, and returned parsed as `result.output`.

        When calls wait for approval or are deferred, the loop runs the others and stops:
        `result.status` is `PENDING` and `result.state` resumes it — pass the state as
        `messages` with `decisions={call_id: Approve() | Deny(...) | DeferredResult(...)}`
        (docs/approvals.md).

        `hooks` run after the service's; `usage_limits` replaces the service's
        (docs/policies.md). `standing_decisions` (a previous turn's
        `result.standing_decisions`) carry "always" answers into this turn of the same
        conversation (docs/approvals.md, "Across turns").
        """
        run = self._start(
            parameters,
            messages,
            memory_id,
            context,
            injected,
            output_type,
            decisions,
            hooks=hooks,
            usage_limits=usage_limits,
            standing_decisions=standing_decisions,
        )
        return await self._complete(model, run)

    async def achat_stream(
        self,
        model: ChatModel,
        parameters: ChatRequestParameters | None = None,
        messages: Sequence[ChatMessage] | str | ConversationState | None = None,
        *,
        eager: bool = False,
        memory_id: Any = None,
        context: Any = None,
        injected: Mapping[str, Any] | None = None,
        output_type: Any = None,
        decisions: Mapping[str, Decision] | None = None,
        hooks: Sequence[Hook] | None = None,
        usage_limits: UsageLimits | None = None,
        standing_decisions: Sequence[StandingDecision] | None = None,
    ) -> AsyncIterator[ServiceEvent]:
        """Run the loop, streaming: yields the model's events (text deltas, partial and
        complete tool calls, completed responses), `ToolExecutionStarted`/`Finished`, and a
        final `ChatCompleted`. With `eager=True` a tool starts as soon as its call is complete
        in the stream, before the model has finished. With `output_type`, `PartialOutput`
        events carry the answer parsed so far as the JSON grows."""
        run = self._start(
            parameters,
            messages,
            memory_id,
            context,
            injected,
            output_type,
            decisions,
            hooks=hooks,
            usage_limits=usage_limits,
            standing_decisions=standing_decisions,
        )
        # closed at once when the caller stops reading, so tools it started stop with it
        async with contextlib.aclosing(self._loop(model, run, streaming=True, eager=eager)) as loop:
            async for event in loop:
                yield event

    def chat_stream(
        self,
        model: ChatModel,
        parameters: ChatRequestParameters | None = None,
        messages: Sequence[ChatMessage] | str | ConversationState | None = None,
        *,
        eager: bool = False,
        memory_id: Any = None,
        context: Any = None,
        injected: Mapping[str, Any] | None = None,
        output_type: Any = None,
        decisions: Mapping[str, Decision] | None = None,
        hooks: Sequence[Hook] | None = None,
        usage_limits: UsageLimits | None = None,
        standing_decisions: Sequence[StandingDecision] | None = None,
    ) -> Iterator[ServiceEvent]:
        """Synchronous `achat_stream`."""
        return iterate_sync(
            self.achat_stream(
                model,
                parameters,
                messages,
                eager=eager,
                memory_id=memory_id,
                context=context,
                injected=injected,
                output_type=output_type,
                decisions=decisions,
                hooks=hooks,
                usage_limits=usage_limits,
                standing_decisions=standing_decisions,
            )
        )

    # the engine -----------------------------------------------------------------------------
    def _start(
        self,
        parameters: ChatRequestParameters | None,
        messages: Sequence[ChatMessage] | str | ConversationState | None,
        memory_id: Any,
        context: Any,
        injected: Mapping[str, Any] | None,
        output_type: Any = None,
        decisions: Mapping[str, Decision] | None = None,
        *,
        hooks: Sequence[Hook] | None = None,
        usage_limits: UsageLimits | None = None,
        standing_decisions: Sequence[StandingDecision] | None = None,
    ) -> _Run:
        if messages is None:
            raise ValueError("messages must not be empty: pass the conversation so far")
        state: ConversationState | None = None
        if isinstance(messages, ConversationState):
            state = messages
            state.check()
            decisions = route_decisions(state, decisions)  # to calls in sub-conversations
            check_decisions(state, decisions or {})
            history: list[ChatMessage] = list(state.messages)
        elif decisions:
            raise ValueError("decisions need the ConversationState of a paused conversation")
        else:
            history = [UserMessage(messages)] if isinstance(messages, str) else list(messages)
        if not history:
            raise ValueError("messages must not be empty: pass the conversation so far")
        run = _Run(
            messages=history,
            parameters=parameters or ChatRequestParameters(),
            memory_id=memory_id,
            context=context,
            injected=dict(injected) if injected else None,
        )
        if state is not None:
            run.resume = state
            run.rounds = state.rounds
            run.decisions = dict(decisions or {})
            run.standing = list(state.standing_decisions)
        if standing_decisions is not None:
            given = check_given_standing(standing_decisions)
            if state is not None:
                raise ValueError(
                    "a ConversationState carries its conversation's standing decisions: "
                    "do not pass standing_decisions with it"
                )
            run.standing = given
        if output_type is not None:
            run.output = OutputSchema.of(output_type)
            if run.parameters.response_format is None:
                run.parameters = run.parameters.model_copy(update={"response_format": output_type})
        if self.tool_search is not None:
            for m in history:
                if isinstance(m, ToolExecutionResultMessage):
                    for name in m.attributes.get(FOUND_TOOLS_ATTRIBUTE, ()):
                        if name not in run.found:
                            run.found.append(name)
        run.policy = Policies.start(self._policies, hooks, usage_limits)
        if self.result_store is not None:
            run.stored = stored_ids(history)
        if state is not None:  # last: nothing after this may fail and strand the claim
            run.claimed = self._claim_decisions(state, decisions or {})
        return run

    def _visible_cards(self, run: _Run) -> tuple[ToolCard, ...]:
        offering = run.offering
        if self.tool_search is None or run.native_search:
            return self.tool_cards if offering is None else offering.cards
        entries = self._entries if offering is None else offering.tools
        visible = [
            e.card
            for name, e in entries.items()
            if name in self.tool_search.always_visible or name in run.found
        ]
        return (*visible, self.tool_search.card)

    async def _step(self, run: _Run, rounds: int) -> bool:
        """Ask the toolsets for the step about to be sent; whether its tools changed."""
        assert run.offering is not None
        ctx = StepContext(
            round=rounds,
            messages=tuple(run.messages),
            usage=run.usage,
            memory_id=run.memory_id,
            context=run.context,
        )
        changed = await run.offering.step(ctx)
        run.entries = run.offering.tools  # type: ignore[assignment]
        return changed

    def _forces_tools(self, run: _Run) -> bool:
        choice = run.parameters.tool_choice
        return self.reset_tool_choice and choice is not None and choice.mode in ("required", "tool")

    def _parameters(self, run: _Run) -> ChatRequestParameters:
        cards = self._visible_cards(run)
        if self.result_store is not None:
            cards = self._with_reader(run, cards)
        given = run.parameters.tools or ()
        if given:
            names = {c.name for c in given}
            cards = (*given, *(c for c in cards if c.name not in names))
        if not cards:
            return run.parameters
        chosen = None if run.offering is None else run.offering.tool_choice
        own = run.parameters.tool_choice
        if chosen is not None and not (own is not None and own.mode == "none"):
            # the toolsets' choice for the step (docs/toolsets.md), over the tools sent (the
            # service's search may hide some); the caller's tools and the search tool are
            # no set's, so no set restricts them; the caller's NONE stands
            assert run.offering is not None
            owned = run.offering.tools
            sent = [c.name for c in cards]
            chosen = merge_choices(
                [
                    (chosen, [n for n in sent if n in owned]),
                    (None, [n for n in sent if n not in owned]),
                ]
            )
            update: dict[str, Any] = {"tools": cards, "tool_choice": chosen}
        else:
            update = {"tools": cards}
        if run.native_search:
            update["deferred_tools"] = self._deferred(run, cards)
        return run.parameters.model_copy(update=update)

    def _deferred(self, run: _Run, cards: tuple[ToolCard, ...]) -> tuple[str, ...] | None:
        """The tools a native search loads on demand: the search's own (the service's and
        the toolsets'), not always visible, not the caller's, not a `.searchable` set's
        search tool (None: none)."""
        assert self.tool_search is not None
        owned = self._entries if run.offering is None else run.offering.tools
        shown = self.tool_search.always_visible
        given = {c.name for c in run.parameters.tools or ()}
        names = tuple(
            c.name
            for c in cards
            if c.name in owned
            and c.name not in shown
            and c.name not in given
            and not is_search_tool(owned[c.name])
        )
        return names or None

    async def _fire(self, event: str, **kwargs: Any) -> None:
        cb = self.callbacks
        if cb.count and cb.has(event):
            await cb.trigger(event, **kwargs)

    def _fires(self, event: str) -> bool:
        """Whether `event` has a callback (the loop's own events check first: no coroutine,
        no arguments built, when none does)."""
        cb = self._callbacks if self._callbacks is not None else callback_framework
        return bool(cb.count) and cb.has(event)

    async def _loop(
        self, model: ChatModel, run: _Run, *, streaming: bool, eager: bool
    ) -> AsyncGenerator[ServiceEvent, None]:
        rounds = run.rounds
        paused = 0  # the provider's own turns paused and sent back (PAUSED_TURN)
        if self._sources:
            await self._refresh()
        run.entries = self._entries
        run.native_search = isinstance(self.tool_search, NativeToolSearch) and (
            native_tool_search(model)
        )
        if self._toolsets or self._functions.dynamic:
            run.offering = Offering((self._functions, *self._toolsets))
            await self._step(run, rounds)
        stepped = run.offering is not None  # the first step is asked already
        version = self._version
        parameters = self._parameters(run)
        pending: list[ToolExecutionRequest] = []
        turn = _Turn()
        run.span = start_agent_span(model, run.memory_id)
        failure: BaseException | None = None
        try:
            if run.resume is not None:
                try:
                    await self._claim_shared(run.resume, run.decisions)
                except CallAlreadyDecidedError:  # refused elsewhere: nothing was decided here
                    for key in run.claimed:
                        self._decided.pop(key, None)
                    raise
                pending = [p.request for p in run.resume.pending]
                turn = _Turn(asyncio.Queue() if streaming else None)
                async for event in self._resume(run, turn):
                    yield event
                pending = []
                if turn.finished:
                    return
            while True:
                if self._sources:
                    await self._refresh()  # a round's tools are the ones its request offered
                    run.entries = self._entries
                changed = False
                if run.offering is not None:
                    changed = stepped or await self._step(run, rounds)
                    stepped = False
                if rounds and self._forces_tools(run):
                    # a forced choice would make the model call tools forever
                    forced = run.parameters.tool_choice
                    allowed = None if forced is None else forced.allowed
                    run.parameters = run.parameters.model_copy(
                        update={
                            "tool_choice": ToolChoice.AUTO
                            if allowed is None
                            else ToolChoice.allowed_tools(allowed)  # the subset stays
                        }
                    )
                    parameters = self._parameters(run)
                elif (
                    self.tool_search is not None
                    or version != self._version
                    or changed
                    or run.reader_offered is not bool(run.stored)
                ):
                    parameters = self._parameters(run)
                version = self._version
                sending = parameters
                if run.policy is not None:  # the budget, then the hooks (may rewrite)
                    sending = await run.policy.before_request(run, parameters, rounds)
                sent = tuple(run.messages)
                if run.offering is not None and run.offering.instructions:
                    sent = with_instructions(sent, run.offering.instructions)
                request = _request(sent, sending)
                if self._fires(E.MODEL_REQUEST):
                    await self._fire(E.MODEL_REQUEST, request=request, memory_id=run.memory_id)
                run.gates.clear()  # a new turn's calls are gated afresh, whatever their ids
                run.refused.clear()  # and judged afresh by rules and standing decisions
                run.explicit.clear()
                turn = _Turn(asyncio.Queue() if streaming else None)
                if streaming:
                    eager_ok = eager and rounds < self.max_tool_calling_round_trips
                    if run.policy is not None:
                        eager_ok = eager_ok and run.policy.eager_ok
                    s = None
                    if run.span is not None:
                        s = start_model_span(
                            model, request, stream=True, parent=model_parent(run.span)
                        )
                    stream = self._stream_turn(model, request, run, turn, eager_ok)
                    try:
                        async for event in stream:
                            yield event
                    except BaseException as e:  # the span ends with the stream, however it ends
                        await stream.aclose()  # and an eager reader stops starting tools
                        end_model_span(s, model, error=None if isinstance(e, GeneratorExit) else e)
                        raise
                    end_model_span(s, model, turn.response)
                    assert turn.response is not None  # _stream_turn raises otherwise
                    response = turn.response
                else:
                    response = await (  # untraced: no coroutine of its own around the call
                        self._hooked_call(model, request, run)
                        if run.span is None
                        else self._traced_call(model, request, run)
                    )
                response = _unique_call_ids(response)
                if self._fires(E.MODEL_RESPONSE):
                    await self._fire(E.MODEL_RESPONSE, response=response, memory_id=run.memory_id)
                if response.usage is not None:
                    run.usage = response.usage + run.usage if run.usage else response.usage
                ai = response.ai_message
                run.messages.append(ai)
                calls = list(ai.tool_execution_requests)
                if not calls and response.metadata.get(PAUSED_TURN) is True:
                    # the provider paused its own turn (a server-side tool search): sent
                    # back as it is, the model goes on with it; no tool round is used
                    paused += 1
                    if paused > self.max_tool_calling_round_trips:
                        raise ToolLoopLimitError(
                            f"the provider paused its turn more than max_tool_calling_round_"
                            f"trips={self.max_tool_calling_round_trips} times; stopping the loop"
                        )
                    run.intermediate.append(response)
                    continue
                if not calls:
                    correction = self._check_output(run, response) if run.output else None
                    if correction is not None:
                        run.intermediate.append(response)
                        run.messages.append(correction)
                        continue
                    yield ChatCompleted(run.result(response))
                    return
                pending = calls
                if rounds >= self.max_tool_calling_round_trips:
                    raise ToolLoopLimitError(
                        f"the model asked for tools more than max_tool_calling_round_trips="
                        f"{self.max_tool_calling_round_trips} times; stopping the loop"
                    )
                rounds += 1
                run.intermediate.append(response)
                if self._fires(E.ROUND_STARTED):
                    await self._fire(
                        E.ROUND_STARTED, round=rounds, requests=calls, memory_id=run.memory_id
                    )
                gated = await self._gated(calls, run)
                runnable = [c for c in calls if run.gates.get(c.id) is None] if gated else calls
                if run.policy is not None and runnable:
                    spent = run.policy.check_round(runnable, run.usage)  # raises when over
                    if spent is not None:  # answer mode: not run, the next request is the last
                        run.policy.refuse(run.messages, calls, spent)
                        pending = []
                        continue
                if not runnable:
                    outcomes = []
                elif turn.queue is None:
                    outcomes = await self._execute_round(runnable, run, None, turn.started)
                else:
                    async for event in self._stream_round(runnable, run, turn):
                        yield event
                    outcomes = turn.outcomes
                self._record(run, runnable, outcomes)
                gated = self._with_raised(calls, gated, outcomes)
                pending = []
                if self._fires(E.ROUND_FINISHED):
                    await self._fire(
                        E.ROUND_FINISHED,
                        round=rounds,
                        executions=[o.execution for o in outcomes],
                        memory_id=run.memory_id,
                    )
                for o in outcomes:
                    if o.abort is not None:
                        raise o.abort
                if gated:
                    decisions = await self._decide_or_wait(run, gated)
                    if decisions is None:
                        async for event in self._pause(run, response, gated, rounds, streaming):
                            yield event
                        return
                    run.resume = ConversationState(
                        messages=tuple(run.messages), pending=tuple(gated), rounds=rounds
                    )
                    run.decisions = dict(decisions)
                    pending = [g.request for g in gated]
                    async for event in self._resume(run, turn):
                        yield event
                    pending = []
                    if turn.finished:
                        return
                    continue
                if self._returns_immediately(
                    calls, [o.execution.has_failed for o in outcomes], run
                ):
                    yield ChatCompleted(run.result(response, immediate=True))
                    return
        except BaseException as e:
            running = (*turn.started.values(), *((turn.round,) if turn.round else ()))
            early = [t for t in running if not t.done()]
            for task in early:  # tools started eagerly must not outlive the conversation
                task.cancel()
            if early:
                await asyncio.gather(*early, return_exceptions=True)
            if pending:
                self._answer_unanswered(run, pending, e)
            if isinstance(e, Exception):
                try:
                    e.partial_result = run.result(None)  # type: ignore[attr-defined]
                except AttributeError:
                    pass
            if not isinstance(e, GeneratorExit):  # the consumer stopped reading: no error
                failure = e
            raise
        finally:
            end_agent_span(run.span, run.usage, failure)

    async def _stream_turn(
        self, model: ChatModel, request: ChatRequest, run: _Run, turn: _Turn, eager: bool
    ) -> AsyncGenerator[ServiceEvent, None]:
        """One streamed model call: its events, partial outputs, and (with `eager`) tools
        started as soon as their call is complete; sets `turn.response`."""
        assert turn.queue is not None
        partials = PartialJsonStream() if run.output is not None else None
        ids = _UniqueIds()
        source: AsyncIterator[StreamEvent]
        if run.policy is not None and run.policy.model_hooks:
            source = run.policy.stream_model(request, lambda r: self._open_stream(model, r, run))
        else:
            source = self._open_stream(model, request, run)
        reader = _interleaved(self._pump(source, run, turn, ids), turn.queue) if eager else None
        events: AsyncIterator[Any] = reader if reader is not None else source
        # an eager turn's reader must stop (and start no more tools) however this ends
        closing = contextlib.aclosing(reader) if reader is not None else contextlib.nullcontext()
        async with closing:
            async for event in events:
                if isinstance(event, (ToolExecutionStarted, ToolExecutionFinished)):
                    yield event  # an eagerly started tool's progress, as it happens
                    continue
                if not eager:
                    event = _renamed(event, ids)
                if partials is not None and isinstance(event, ResponseCompleted):
                    value = partials.flush()
                    if value is not None:
                        yield PartialOutput(value)
                yield event
                if partials is not None and isinstance(event, TextDelta):
                    value = partials.feed(event.text)
                    if value is not None:
                        yield PartialOutput(value)
                if isinstance(event, ResponseCompleted):
                    turn.response = event.response
        if turn.response is None:
            raise ToolweaveError(
                f"the model stream of {type(model).__name__} ended without a final response"
            )

    async def _pump(
        self, source: AsyncIterator[StreamEvent], run: _Run, turn: _Turn, ids: _UniqueIds
    ) -> None:
        """The eager turn's reader, in a task of its own: moves the model's events into the
        turn's queue as they arrive and starts each tool as soon as its call is complete (so
        the tools' progress events interleave with the model's). One task runs the whole
        stream, so what the stream holds across events (an HTTP response, a timeout scope)
        stays in one task."""
        queue = turn.queue
        assert queue is not None
        barrier_seen = False
        try:
            async for raw in source:
                event = _renamed(raw, ids)
                queue.put_nowait(_FromModel(event))
                if not isinstance(event, CompleteToolCall):
                    continue
                entry = self._entry(event.request.name, run)
                if barrier_seen or (entry is not None and entry.barrier):
                    barrier_seen = True  # calls after a barrier wait for the whole response
                elif not _may_wait(entry) or await self._gate(event.request, run) is None:
                    turn.started[event.request.id] = asyncio.create_task(
                        self._execute_one(event.request, run, queue)
                    )
                    await asyncio.sleep(0)  # its start is reported before what comes next
        except asyncio.CancelledError:
            raise
        except BaseException as e:
            queue.put_nowait(_FromModel(error=e))
        else:
            queue.put_nowait(_FromModel())
        finally:
            close = getattr(source, "aclose", None)
            if close is not None:
                await close()

    async def _stream_round(
        self, calls: list[ToolExecutionRequest], run: _Run, turn: _Turn
    ) -> AsyncIterator[ServiceEvent]:
        """Run a round while yielding its tool events as they happen; sets `turn.outcomes`."""
        queue = turn.queue
        assert queue is not None
        round_task = asyncio.create_task(self._execute_round(calls, run, queue, turn.started))
        turn.round = round_task
        getter: asyncio.Future[Any] | None = None
        try:
            while not round_task.done() or not queue.empty():
                getter = asyncio.ensure_future(queue.get())
                await asyncio.wait({getter, round_task}, return_when=asyncio.FIRST_COMPLETED)
                if getter.done():
                    yield getter.result()
                else:
                    getter.cancel()
            turn.outcomes = round_task.result()
        finally:
            if getter is not None:
                getter.cancel()  # cancelled while waiting: no pending get left behind
            if not round_task.done():
                round_task.cancel()
                await asyncio.gather(round_task, return_exceptions=True)

    def _check_output(self, run: _Run, response: ChatResponse) -> UserMessage | None:
        """Validate the final answer; a correction request, or None once it is valid."""
        assert run.output is not None
        text = response.ai_message.text
        try:
            run.output_value = run.output.validate_text(text)
        except OutputValidationError as e:
            run.output_failures += 1
            if run.output_failures > self.max_argument_retries:
                raise StructuredOutputError(
                    f"the model's answer did not match the output schema {run.output.name!r} "
                    f"after {run.output_failures} attempts: {e.message}",
                    raw_text=text,
                ) from None
            return UserMessage(
                f"Your answer could not be used. {e.message}\n"
                "Reply again with only a JSON value that matches the required schema."
            )
        return None

    def _open_stream(
        self, model: ChatModel, request: ChatRequest, run: _Run
    ) -> AsyncIterator[StreamEvent]:
        """The model's stream for `request`."""
        if run.span is not None:
            with loop_owned():  # the loop's own span covers this call
                return model.astream(request)
        return model.astream(request)

    def _hooked_call(
        self, model: ChatModel, request: ChatRequest, run: _Run
    ) -> Awaitable[ChatResponse]:
        """`_call_model`, through the around-model-call hooks when there are some."""
        if run.policy is not None and run.policy.model_hooks:
            return run.policy.call_model(request, lambda r: self._call_model(model, r, run))
        return self._call_model(model, request, run)

    async def _traced_call(self, model: ChatModel, request: ChatRequest, run: _Run) -> ChatResponse:
        """`_call_model` inside its `chat {model}` span (when tracing is on)."""
        if run.span is None:
            return await self._hooked_call(model, request, run)
        s = start_model_span(model, request, stream=False, parent=model_parent(run.span))
        try:
            with current(s), loop_owned():
                response = await self._hooked_call(model, request, run)
        except BaseException as e:
            end_model_span(s, model, error=e)
            raise
        end_model_span(s, model, response)
        return response

    async def _call_model(self, model: ChatModel, request: ChatRequest, run: _Run) -> ChatResponse:
        """One non-streaming model call (a hook for subclasses, e.g. durable execution)."""
        return await model.achat(request)

    def _record(
        self, run: _Run, calls: list[ToolExecutionRequest], outcomes: list[_Outcome]
    ) -> None:
        for call, outcome in zip(calls, outcomes, strict=True):
            if outcome.paused is not None:
                continue  # it waits: its result comes when it runs again
            result = outcome.execution.result
            run.executions.append(outcome.execution)
            run.messages.append(ToolExecutionResultMessage.from_result(call, result))
            if not result.attributes:
                continue  # most results: neither a sub-conversation's nor a search's
            spent = subconversation_spent(result)
            if spent is not None:  # a conversation run as a tool: what it used counts here
                if spent.usage is not None:
                    run.usage = spent.usage + run.usage
                if run.policy is not None:
                    run.policy.usage.requests += spent.requests
                    run.policy.usage.tool_calls += spent.tool_calls
            found = result.attributes.get(FOUND_TOOLS_ATTRIBUTE)
            if found:
                for name in found:
                    if name not in run.found:
                        run.found.append(name)

    @staticmethod
    def _answer_unanswered(
        run: _Run, calls: list[ToolExecutionRequest], error: BaseException
    ) -> None:
        answered = {m.id for m in run.messages if isinstance(m, ToolExecutionResultMessage)}
        reason = (
            "it was cancelled"
            if isinstance(error, asyncio.CancelledError)
            else (f"the conversation stopped: {type(error).__name__}")
        )
        for call in calls:
            if call.id not in answered:
                run.messages.append(
                    ToolExecutionResultMessage(
                        id=call.id,
                        tool_name=call.name,
                        text=f"The tool call was not executed: {reason}.",
                        is_error=True,
                    )
                )

    def _returns_immediately(
        self, calls: list[ToolExecutionRequest], errors: list[bool], run: _Run | None = None
    ) -> bool:
        """Whether the round of `calls` (with `errors`, one flag per finished call) ends the
        loop by the tools' `ReturnBehavior`."""
        if any(errors):
            return False
        behaviours = []
        for call in calls:
            entry = (run.entries if run and run.entries is not None else self._entries).get(
                call.name
            )
            behaviours.append(entry.card.return_behavior if entry else ReturnBehavior.TO_LLM)
        if not behaviours:
            return False
        if behaviours[-1] is ReturnBehavior.IMMEDIATE_IF_LAST:
            return True
        return all(b is not ReturnBehavior.TO_LLM for b in behaviours)

    # approvals and deferred calls ------------------------------------------------------------
    def _claim_decisions(
        self, state: ConversationState, decisions: Mapping[str, Decision]
    ) -> list[tuple[str, str]]:
        """Record the decisions made now for calls of `state`'s pause, by (pause id, call id):
        the same for every state derived from that pause. A call approved before (through
        this state or another of the pause) cannot be approved again nor denied, and a call
        denied or answered cannot be approved: `CallAlreadyDecidedError`, before anything
        runs. Claimed synchronously, so two concurrent resumes cannot both pass. Returns the
        keys recorded now (not decided before)."""
        calls = {p.id: p for p in state.pending}
        claims = {
            (state.pause_id, claim_key(calls[i]) if i in calls else i): (i, decision_kind(d))
            for i, d in decisions.items()
        }
        for key, (call_id, kind) in claims.items():
            decided = self._decided.get(key)
            if decided is not None and not repeat_allowed(decided, kind):
                call = calls.get(call_id)
                raise already_decided(
                    call_id=call_id,
                    tool_name=call.tool_name if call is not None else "?",
                    decided=decided,
                    attempted=kind,
                    pause_id=state.pause_id,
                )
        new = [key for key in claims if key not in self._decided]
        for key in new:
            self._decided[key] = claims[key][1]
        while len(self._decided) > _DECIDED_KEPT:
            self._decided.pop(next(iter(self._decided)))
        return new

    async def _claim_shared(
        self, state: ConversationState, decisions: Mapping[str, Decision]
    ) -> None:
        """Claim the decisions beyond this process (a hook: a `DurableToolService` records
        them in its database, so another worker refuses them too), before anything of the
        resume runs. Raise `CallAlreadyDecidedError` to refuse."""
        return None

    async def _gated(self, calls: list[ToolExecutionRequest], run: _Run) -> list[PendingCall]:
        """The calls of a round that wait (in request order)."""
        out: list[PendingCall] = []
        judged = self._judged(run)
        for call in calls:
            if not judged and not _may_wait(self._entry(call.name, run)):
                continue  # the common case: no coroutine, nothing recorded
            gate = await self._gate(call, run)
            if gate is not None:
                out.append(gate)
        return out

    async def _gate(self, call: ToolExecutionRequest, run: _Run) -> PendingCall | None:
        """Why `call` waits (deferred tool, approval required), or None: it runs. Decided
        once per call of a model turn (an approval function is asked once). A policy
        function sees the validated arguments, defaults filled in (what the tool would run
        with); a call whose arguments are not valid does not wait: it takes the ordinary
        argument-error path, where the tool's validation refuses it and it never runs."""
        if call.id in run.gates:
            return run.gates[call.id]
        entry = self._entry(call.name, run)
        gate: PendingCall | None = None
        if entry is not None:
            reason: Any = None
            policy = entry.card.requires_approval
            verdict = await self._verdict(call, run) if self._judged(run) else None
            if verdict is not None and verdict[0] == "deny":
                run.refused[call.id] = verdict[1]
            elif entry.deferred:
                reason = "deferred"
            elif verdict is not None:
                pass  # allowed by a rule or a standing approval: it runs without asking
            elif policy is True:
                reason = "approval"
            elif policy is not False:
                reason = await self._ask_policy(entry, call, run)
            if reason is not None:
                gate = PendingCall(
                    id=call.id, tool_name=call.name, arguments=call.arguments, reason=reason
                )
        run.gates[call.id] = gate
        return gate

    async def _ask_policy(self, entry: _Entry, call: ToolExecutionRequest, run: _Run) -> str | None:
        """`"approval"` when the policy function of `entry` says `call` must wait, else None."""
        tool = _tool_behind(entry.executor)
        try:
            if tool is not None:
                arguments = await validated_arguments(tool, call)
            else:  # an executor of the caller's: the card's schema says what is valid
                if entry.validator is None:
                    entry.validator = JsonSchemaArgumentsValidator(
                        entry.card.input_params, tool_name=call.name
                    )
                arguments = entry.validator.validate_json(call.arguments)
        except ToolArgumentsError as e:
            if tool is not None:
                return None  # the tool refuses these arguments: it cannot run with them
            # the executor would get them as they are: a person decides
            logger.warning(
                "the arguments of %s (call %s) do not match its schema (%s); the call waits "
                "for approval",
                call.name,
                call.id,
                e.message,
            )
            return "approval"
        except Exception as e:  # a tool whose inputs cannot be prepared: fail closed
            logger.warning(
                "the arguments of %s (call %s) could not be prepared for its approval policy "
                "(%s: %s); the call waits for approval",
                call.name,
                call.id,
                type(e).__name__,
                e,
            )
            return "approval"
        context = ToolContext(
            tool_name=call.name,
            request_id=call.id,
            memory_id=run.memory_id,
            context=run.context,
            callbacks=self.callbacks,
        )
        if await needs_approval(entry.card.requires_approval, call, context, arguments=arguments):
            return "approval"
        return None

    async def _await_decisions(
        self, run: _Run, waiting: list[PendingCall]
    ) -> Mapping[str, Decision] | None:
        """Decisions for `waiting`, obtained without ending the conversation (a hook:
        durable conversations wait for them as messages); None pauses the loop."""
        return None

    def _judged(self, run: _Run) -> bool:
        """Whether rules or standing decisions may say something about a call of `run`."""
        return bool(self._rules or run.standing)

    async def _verdict(
        self, call: ToolExecutionRequest, run: _Run, *, standing: bool = True
    ) -> Verdict | None:
        """What the service's rules (and, with `standing`, the conversation's standing
        decisions) say about `call`, on its validated arguments; None: nothing (asked as
        usual). Found once per call and arguments."""
        if not self._rules and not (standing and run.standing):
            return None
        key = (call.id, call.arguments, standing)
        if key in run.verdicts:
            return run.verdicts[key]
        entry = self._entry(call.name, run)
        verdict: Verdict | None = None
        if entry is not None:
            arguments = await self._rule_arguments(entry, call)
            verdict = evaluate(self._rules, run.standing if standing else (), call.name, arguments)
        run.verdicts[key] = verdict
        return verdict

    async def _rule_arguments(self, entry: _Entry, call: ToolExecutionRequest) -> Any:
        """The arguments `call` would run with (validated, defaults filled in), or None when
        they are not valid (or cannot be prepared)."""
        tool = _tool_behind(entry.executor)
        try:
            if tool is not None:
                return await validated_arguments(tool, call)
            if entry.validator is None:
                entry.validator = JsonSchemaArgumentsValidator(
                    entry.card.input_params, tool_name=call.name
                )
            return entry.validator.validate_json(call.arguments)
        except Exception:
            return None

    async def _refusal(self, call: ToolExecutionRequest, run: _Run) -> str | None:
        """Why `call` must not run (a deny rule, a standing denial), or None."""
        refused = run.refused.get(call.id)
        if refused is not None or not self._judged(run):
            return refused
        verdict = await self._verdict(call, run, standing=call.id not in run.explicit)
        return verdict[1] if verdict is not None and verdict[0] == "deny" else None

    def _with_raised(
        self,
        calls: list[ToolExecutionRequest],
        gated: list[PendingCall],
        outcomes: list[_Outcome],
    ) -> list[PendingCall]:
        """`gated` with the calls whose tool paused itself, in request order."""
        raised = {
            o.execution.request.id: _pending(o.execution.request, o.paused)
            for o in outcomes
            if o.paused is not None
        }
        if not raised:
            return gated
        by_id = {g.id: g for g in gated} | raised
        return [by_id[c.id] for c in calls if c.id in by_id]

    async def _decide_or_wait(
        self, run: _Run, waiting: list[PendingCall]
    ) -> Mapping[str, Decision] | None:
        """Decisions for the calls that paused: those that paused themselves and that a
        rule or a standing approval covers are approved at once (they run again, seeing
        it); the rest wait for a person (`_await_decisions`)."""
        auto: dict[str, Decision] = {}
        for call in waiting:
            if call.raised and call.reason == "approval" and child_state(call) is None:
                verdict = await self._verdict(call.request, run)  # (not a sub-conversation's)
                if verdict is not None:
                    auto[call.id] = verdict[1] if verdict[0] == "allow" else Deny(verdict[1])
        if auto:
            return auto  # what is left waits when the resume reaches it
        return await self._decisions_for(run, waiting)

    async def _decisions_for(
        self, run: _Run, waiting: list[PendingCall]
    ) -> Mapping[str, Decision] | None:
        """`_await_decisions` asked about the calls a person decides (those waiting in a
        paused sub-conversation, instead of its call), its answer routed back to them."""
        decided = await self._await_decisions(run, list(nested_pending(waiting)))
        return route_pending(waiting, decided)

    async def _pause(
        self,
        run: _Run,
        response: ChatResponse,
        waiting: list[PendingCall],
        rounds: int,
        streaming: bool,
        pause_id: str | None = None,
    ) -> AsyncIterator[ServiceEvent]:
        """Stop the loop: the calls in `waiting` have no result yet. `pause_id` is the pause
        this stop continues (a resume that left calls waiting), else it starts one."""
        state = ConversationState(
            messages=tuple(run.messages),
            pending=tuple(waiting),
            rounds=rounds,
            pause_id=pause_id or "",  # "": a new pause
            standing_decisions=tuple(run.standing),
        )
        if run.span is not None:
            run.span.add_event(
                "toolweave.round_paused",
                {
                    "toolweave.pending.call_ids": [c.id for c in state.pending],
                    "toolweave.pending.tools": [c.tool_name for c in state.pending],
                    "toolweave.pending.reasons": [c.reason for c in state.pending],
                },
            )
        await self._fire(E.ROUND_PAUSED, pending=state.pending, memory_id=run.memory_id)
        if streaming:
            yield ApprovalRequired(nested_pending(state.pending), state)
        yield ChatCompleted(run.result(response, state=state))

    async def _resume(self, run: _Run, turn: _Turn) -> AsyncIterator[ServiceEvent]:
        """Apply the decisions to a paused round: run the approved calls (a call that paused
        itself runs again, seeing its decision), answer the denied and deferred ones; wait
        again while calls are left without a decision (a durable conversation waits for
        them, else the loop pauses); else end the loop if the round's `ReturnBehavior` says
        so (sets `turn.finished`)."""
        state = run.resume
        assert state is not None
        run.resume = None
        position, ai = next(
            (i, m) for i, m in reversed(list(enumerate(state.messages))) if isinstance(m, AiMessage)
        )
        response = ChatResponse(ai)
        pending = list(state.pending)
        while True:
            waiting: list[PendingCall] = []
            async for event in self._apply_decisions(run, turn, pending, waiting):
                yield event
            if not waiting:
                break
            decisions = await self._decisions_for(run, waiting)
            if decisions is None:
                turn.finished = True
                async for event in self._pause(  # the rounds of the resumed state
                    run, response, waiting, state.rounds, turn.queue is not None, state.pause_id
                ):
                    yield event
                return
            run.decisions = dict(decisions)
            pending = waiting
        # every call of the round is answered: results in request order, as without a pause
        order = {c.id: i for i, c in enumerate(ai.tool_execution_requests)}
        answers = run.messages[position + 1 :]
        if all(isinstance(m, ToolExecutionResultMessage) for m in answers):
            answers.sort(key=lambda m: order.get(getattr(m, "id", ""), len(order)))
            run.messages[position + 1 :] = answers
        errors = {
            m.id: m.is_error
            for m in run.messages[position + 1 :]
            if isinstance(m, ToolExecutionResultMessage)
        }
        calls = list(ai.tool_execution_requests)
        if self._returns_immediately(calls, [errors.get(c.id, False) for c in calls], run):
            turn.finished = True
            yield ChatCompleted(run.result(response, immediate=True))

    async def _apply_decisions(
        self, run: _Run, turn: _Turn, pending: list[PendingCall], waiting: list[PendingCall]
    ) -> AsyncIterator[ServiceEvent]:
        """Apply `run.decisions` to `pending`: run the approved calls (yielding their events
        when streaming), answer the others. Appends to `waiting` the calls left without a
        decision, and those whose run after a decision paused again (asked once more)."""
        approved: list[ToolExecutionRequest] = []
        asked: dict[str, PendingCall] = {}
        now = datetime.now(UTC)
        for call in pending:
            decision = run.decisions.get(call.id)
            if decision is None:
                waiting.append(call)
                continue
            standing = standing_from(call, decision)
            if standing is not None and not any(_same(standing, s) for s in run.standing):
                run.standing.append(standing)
            request = call.request
            runs = isinstance(decision, Approve) or (
                call.raised and isinstance(decision, DeferredResult)
            )
            if isinstance(decision, Approve) and decision.arguments is not None:
                arguments = decision.arguments
                if not isinstance(arguments, str):
                    arguments = json.dumps(dict(arguments), ensure_ascii=False)
                request = request.model_copy(update={"arguments": arguments})
            refusal = await self._verdict(request, run, standing=False) if runs else None
            if runs and (refusal is None or refusal[0] != "deny"):
                run.gates[call.id] = None
                run.explicit.add(call.id)
                if call.raised:
                    run.approvals[call.id] = decision
                asked[call.id] = call
                approved.append(request)
                continue
            if refusal is not None and refusal[0] == "deny":
                result = ToolExecutionResult.error_result(refusal[1])
            elif isinstance(decision, Deny):
                result = ToolExecutionResult.error_result(decision.message)
            else:
                assert isinstance(decision, DeferredResult)
                result = ToolExecutionResult(
                    text=decision.text, result=decision.result, is_error=decision.is_error
                )
            run.executions.append(ToolExecution(request, result, now, now, run.memory_id))
            run.messages.append(ToolExecutionResultMessage.from_result(request, result))
        if approved and run.policy is not None:
            spent = run.policy.check_round(approved, run.usage)  # raises when over the budget
            if spent is not None:
                run.policy.refuse(run.messages, approved, spent)
                approved = []
        if approved:
            if turn.queue is None:
                outcomes = await self._execute_round(approved, run, None, turn.started)
            else:
                async for event in self._stream_round(approved, run, turn):
                    yield event
                outcomes = turn.outcomes
            self._record(run, approved, outcomes)
            for request, outcome in zip(approved, outcomes, strict=True):
                run.approvals.pop(request.id, None)
                if outcome.paused is not None:  # it paused (again): asked once more
                    before = asked[request.id]
                    again = _pending(before.request, outcome.paused)  # as the model made it
                    waiting.append(again.model_copy(update={"ask": before.ask + 1}))
            abort = next((o.abort for o in outcomes if o.abort is not None), None)
            if abort is not None:
                raise abort

    # executing a round ----------------------------------------------------------------------
    async def _execute_round(
        self,
        calls: list[ToolExecutionRequest],
        run: _Run,
        queue: asyncio.Queue[ServiceEvent] | None,
        started: dict[str, asyncio.Task[_Outcome]],
    ) -> list[_Outcome]:
        if len(calls) == 1 and not started:
            return [await self._execute_one(calls[0], run, queue, inline=run.inline_sync)]
        results: list[_Outcome | None] = [None] * len(calls)
        tasks: list[asyncio.Task[_Outcome]] = []
        try:
            segment: list[tuple[int, asyncio.Task[_Outcome]]] = []
            for i, call in enumerate(calls):
                task = started.pop(call.id, None)
                entry = self._entry(call.name, run)
                barrier = entry is not None and entry.barrier
                if barrier:
                    for j, t in segment:
                        results[j] = await t
                    segment = []
                    results[i] = await (
                        task if task is not None else self._execute_one(call, run, queue)
                    )
                    continue
                if task is None:
                    task = asyncio.create_task(self._execute_one(call, run, queue))
                tasks.append(task)
                segment.append((i, task))
            for j, t in segment:
                results[j] = await t
        finally:
            for task in (*tasks, *started.values()):
                if not task.done():
                    task.cancel()
            leftovers = [t for t in (*tasks, *started.values()) if not t.done()]
            if leftovers:
                await asyncio.gather(*leftovers, return_exceptions=True)
        return [r for r in results if r is not None]

    async def _execute_one(
        self,
        call: ToolExecutionRequest,
        run: _Run,
        queue: asyncio.Queue[ServiceEvent] | None,
        *,
        inline: bool = False,
    ) -> _Outcome:
        if queue is not None:
            queue.put_nowait(ToolExecutionStarted(call))
        abort: BaseException | None = None
        paused: ToolPause | None = None
        async with self._guards(call, run):
            start = datetime.now(UTC)
            try:
                refusal = (  # the common case (no rules, no standing decisions): no await
                    await self._refusal(call, run) if run.refused or self._judged(run) else None
                )
                if refusal is not None:
                    result = ToolExecutionResult.error_result(refusal)
                else:
                    with (
                        current(run.span),  # its execute_tool span goes under invoke_agent
                        use_tool_channel(_ServiceChannel(self, call, queue, run)),
                        (
                            use_approval(call.id, run.approvals.get(call.id))
                            if run.approvals or current_approval() is not None
                            else _NO_APPROVAL  # none here, nor around us (a nested loop)
                        ),
                    ):
                        result = await self._dispatch(call, run, inline=inline)
                        if run.policy is not None and run.policy.result_hooks:
                            result = await self._after_result(call, result, run)
                    paused = _pause_of(result)
            except _Paused as p:
                paused = p.pause
                result = ToolExecutionResult(text=f"The call paused ({p.pause.kind}).")
            except _Abort as a:
                abort = a.error
                result = a.result
        cap = self._cap(call, run)
        if cap is not None:  # most calls have none: no coroutine for them
            result = await self._limit_output(call, run, result, cap)
        execution = ToolExecution(call, result, start, datetime.now(UTC), run.memory_id)
        if paused is not None:  # no result yet: the call waits (its run again reports one)
            return _Outcome(execution, abort, paused)
        if queue is not None:
            queue.put_nowait(ToolExecutionFinished(execution))
        return _Outcome(execution, abort)

    def _guards(self, call: ToolExecutionRequest, run: _Run) -> _Holding | _NothingHeld:
        """What a call must hold while it runs: its object's lock, its tool's limit and the
        service's limit (each only when there is one)."""
        entry = self._entry(call.name, run)
        guards: list[Limit | asyncio.Lock] = []
        if entry is not None:
            lock = self._instance_lock(entry, run)
            if lock is not None:
                guards.append(lock)
            if entry.limit is not None:
                guards.append(entry.limit)
        if self._limit is not None:
            guards.append(self._limit)
        return _Holding(guards) if guards else _NOTHING_HELD

    def _instance_lock(self, entry: _Entry, run: _Run) -> asyncio.Lock | None:
        """The conversation's lock for the object `entry`'s tool is a method of, if any:
        calls of one object's methods run one at a time, in request order (asyncio locks are
        FIFO and a round's tasks reach it in request order)."""
        instance = entry.instance
        if instance is _UNKNOWN:
            instance = entry.instance = _shared_instance(entry)
        if instance is None:
            return None
        lock = run.locks.get(id(instance))
        if lock is None:
            lock = run.locks[id(instance)] = asyncio.Lock()
        return lock

    async def _dispatch(
        self, call: ToolExecutionRequest, run: _Run, *, inline: bool = False
    ) -> ToolExecutionResult:
        search = self.tool_search
        if search is not None and call.name == search.card.name:
            return await self._run_search(call, run)
        if run.stored and call.name == READ_RESULT_TOOL and self.result_store is not None:
            return await self._read_result(call, run)
        entry = self._entry(call.name, run)
        if entry is None:
            return await self._hallucinated(call, run)
        policy = self._retry_policy(entry)
        if policy is not None:  # transient failures are retried (an idempotent tool)
            entry = dataclasses.replace(
                entry, executor=_RetryingExecutor(entry.executor, policy, call.name)
            )
        hooks = self._tool_hooks(run)
        if hooks:  # around the tool's executor, inside its guardrails (as in a durable step)
            entry = dataclasses.replace(
                entry, executor=self._hooked_executor(entry.executor, hooks, call, run, inline)
            )
        try:
            executor = entry.executor
            guardrails = self._guardrails_of(entry)
            if guardrails:
                result: ToolExecutionResult = await self._guarded(
                    guardrails, entry, call, run.memory_id, run.context, run.injected, inline
                )
            elif inline and _is_plain_sync(executor):
                # the sync face's engine loop serves nobody else: no thread hop needed
                result = executor.execute_with_result(
                    call, run.memory_id, context=run.context, injected=run.injected
                )
            else:
                result = await executor.aexecute_with_result(
                    call, run.memory_id, context=run.context, injected=run.injected
                )
        except ToolArgumentsError as e:
            return await self._handle(self.arguments_error_handler, e, call, run, counted=True)
        except ToolExecutionError as e:
            if _asks_retry(e):
                return await self._retry_prompt(e, call, run)
            return await self._handle(self.execution_error_handler, e, call, run, counted=False)
        except BaseException as e:  # untyped: a custom executor, a tool's own BaseException
            if _propagates(e):
                raise
            if isinstance(e, ModelRetry):
                asked = ToolExecutionError(
                    e.message, tool_name=call.name, cause=e, details={"wrapped": True}
                )
                return await self._retry_prompt(asked, call, run)
            wrapped = ToolExecutionError(
                f"tool {call.name!r} failed: {error_text(e)}",
                tool_name=call.name,
                cause=e,
                details={"wrapped": True},
            )
            return await self._handle(
                self.execution_error_handler, wrapped, call, run, counted=False
            )
        run.failures.pop(call.name, None)
        if result.attributes and HALT_ATTRIBUTE in result.attributes:
            halt = halted_error(call, result.attributes[HALT_ATTRIBUTE])
            halt.__cause__ = result.error  # a guardrail's own exception, when it failed
            raise _Abort(halt, result)
        return result

    # hooks (docs/policies.md) ------------------------------------------------------------------
    def _tool_hooks(self, run: _Run) -> tuple[Any, ...]:
        """The around-tool-call hooks `_dispatch` runs (a hook: a durable conversation runs
        them inside the call's step instead)."""
        return run.policy.tool_hooks if run.policy is not None else ()

    def _hooked_executor(
        self,
        executor: Any,
        hooks: Sequence[Any],
        call: ToolExecutionRequest,
        run: _Run,
        inline: bool = False,
    ) -> HookedExecutor:
        ctx = ToolContext(call.name, call.id, run.memory_id, run.context, self.callbacks)
        return HookedExecutor(executor, hooks, ctx, inline=inline and _is_plain_sync(executor))

    async def _after_result(
        self, call: ToolExecutionRequest, result: ToolExecutionResult, run: _Run
    ) -> ToolExecutionResult:
        """`result` through the after-tool-result hooks; a hook that raises ends the
        conversation once the round is done (the call keeps `result`)."""
        assert run.policy is not None
        ctx = ToolContext(call.name, call.id, run.memory_id, run.context, self.callbacks)
        try:
            return await run.policy.after_result(call, result, ctx)
        except Exception as e:
            raise _Abort(e, result) from None

    # guardrails (docs/policies.md) ------------------------------------------------------------
    def _guardrails_of(self, entry: _Entry) -> tuple[Guardrail, ...]:
        """The guardrails `_dispatch` runs around a call of `entry`: the service's, then the
        card's (a toolset's `.guarded` put its own first there). A hook: a durable
        conversation runs them inside the call's step instead."""
        own = entry.card.guardrails
        if not self.guardrails:
            return own
        return (*self.guardrails, *own) if own else self.guardrails

    async def _guarded(
        self,
        guardrails: Sequence[Guardrail],
        entry: _Entry,
        call: ToolExecutionRequest,
        memory_id: Any,
        context: Any,
        injected: Any,
        inline: bool = False,
    ) -> ToolExecutionResult:
        """Run `call` of `entry` through `guardrails` (see `service.guardrails`); `inline`
        as for `_dispatch`."""
        behind, tool = entry.executor, None
        for _ in range(8):  # through the executors wrapped around the tool's (hooks, retry)
            if isinstance(behind, DefaultToolExecutor):
                tool = behind.tool
                break
            behind = getattr(behind, "inner", None)

        async def prepare(given: ToolExecutionRequest) -> dict[str, Any]:
            if tool is not None:
                return await validated_arguments(tool, given)
            if entry.validator is None:  # an executor of the caller's: the card's schema
                entry.validator = JsonSchemaArgumentsValidator(
                    entry.card.input_params, tool_name=given.name
                )
            arguments: dict[str, Any] = entry.validator.validate_json(given.arguments)
            return arguments

        async def execute(given: ToolExecutionRequest) -> ToolExecutionResult:
            executor = entry.executor
            if inline and _is_plain_sync(executor):  # as in _dispatch: no thread hop
                done: ToolExecutionResult = executor.execute_with_result(
                    given, memory_id, context=context, injected=injected
                )
                return done
            out: ToolExecutionResult = await executor.aexecute_with_result(
                given, memory_id, context=context, injected=injected
            )
            return out

        ctx = ToolContext(call.name, call.id, memory_id, context, self.callbacks)
        return await run_guarded(
            guardrails, call, ctx, prepare, execute, validates=tool is not None
        )

    def _guarded_executor(self, guardrails: Sequence[Guardrail], entry: _Entry, inner: Any) -> Any:
        """`inner` (what runs `entry`'s calls) with `guardrails` around each call (a durable
        step runs them there, so their verdicts are recorded with the outcome)."""
        return GuardedExecutor(
            self._guarded, guardrails, dataclasses.replace(entry, executor=inner)
        )

    async def _handle(
        self,
        handler: ToolErrorHandler,
        error: ToolweaveError,
        call: ToolExecutionRequest,
        run: _Run,
        *,
        counted: bool,
    ) -> ToolExecutionResult:
        cause = getattr(error, "cause", None)
        if isinstance(cause, ToolPause):  # the tool paused itself: not a failure
            raise _Paused(cause)
        attempt = 1
        if counted:
            attempt = run.failures.get(call.name, 0) + 1
            run.failures[call.name] = attempt
        ctx = ToolErrorContext(
            request=call,
            memory_id=run.memory_id,
            attempt=attempt,
            budget=self._budget(call, run),
            raw_error=error,
        )
        try:
            out = handler(error, ctx)
            if inspect.isawaitable(out):
                out = await out
        except BaseException as raised:
            raise _Abort(
                raised, ToolExecutionResult.error_result(error_text(error), error=error)
            ) from None
        text = out.text if isinstance(out, ToolErrorHandlerResult) else str(out)
        return ToolExecutionResult.error_result(text, error=error)

    # retries and output limits (docs/policies.md) -------------------------------------------
    def _budget(self, call: ToolExecutionRequest, run: _Run) -> int:
        """The argument-retry budget of `call`'s tool: its card's, its toolset's, else the
        service's."""
        entry = self._entry(call.name, run)
        if entry is not None:
            if entry.card.max_argument_retries is not None:
                budget: int = entry.card.max_argument_retries
                return budget
            if entry.max_argument_retries is not None:
                return entry.max_argument_retries
        return self.max_argument_retries

    def _retry_policy(self, entry: _Entry) -> Retry | None:
        """The transient-failure policy `_dispatch` applies to a call of `entry` (a hook: a
        durable conversation retries inside the call's step instead)."""
        policy: Retry | None = entry.card.retry
        return policy

    async def _retry_prompt(
        self, error: ToolExecutionError, call: ToolExecutionRequest, run: _Run
    ) -> ToolExecutionResult:
        """A tool raised `ModelRetry`: within the tool's budget the model gets its message;
        past it, the call is the tool's failure (`execution_error_handler`)."""
        attempt = run.failures.get(call.name, 0) + 1
        run.failures[call.name] = attempt
        if attempt > self._budget(call, run):
            return await self._handle(self.execution_error_handler, error, call, run, counted=False)
        return ToolExecutionResult(
            text=error_text(error),
            is_error=True,
            error=error,
            attributes={MODEL_RETRY_ATTRIBUTE: attempt},
        )

    def _cap(self, call: ToolExecutionRequest, run: _Run) -> Cap | None:
        """The output cap of `call`: the card's, its toolset's, else the service's (None for
        the pages `read_result` answers: a page is as long as the cap already)."""
        if run.stored and call.name == READ_RESULT_TOOL and self.result_store is not None:
            return None
        entry = self._entry(call.name, run)
        chars, tokens = self.max_result_chars, self.max_result_tokens
        if entry is not None:
            card = entry.card
            if card.max_result_chars is not None or card.max_result_tokens is not None:
                chars, tokens = card.max_result_chars, card.max_result_tokens
            elif entry.max_result_chars is not None or entry.max_result_tokens is not None:
                chars, tokens = entry.max_result_chars, entry.max_result_tokens
        if chars is None and tokens is None:
            return None
        if tokens is not None and self.result_token_counter is None:
            raise ToolCardError(
                f"tool {call.name!r} has a cap in tokens but the service has no "
                "result_token_counter to count them"
            )
        return Cap(chars, tokens, self.result_token_counter)

    async def _limit_output(
        self, call: ToolExecutionRequest, run: _Run, result: ToolExecutionResult, cap: Cap
    ) -> ToolExecutionResult:
        """`result` within `cap`; with a result store, kept whole there."""
        store = self.result_store
        out, stored, rid = cut(result, cap, call.id, call.name, store is not None)
        if stored is not None and rid is not None and store is not None:
            try:
                await store.put(rid, stored)
            except Exception as e:  # the model still gets the beginning, with the plain note
                logger.warning("could not store the result of %s (%s): %s", call.name, call.id, e)
                out, _, _ = cut(result, cap, call.id, call.name, False)
            else:
                if rid not in run.stored:
                    run.stored.append(rid)
        return out

    def _with_reader(self, run: _Run, cards: tuple[ToolCard, ...]) -> tuple[ToolCard, ...]:
        """`cards` plus `read_result` while the conversation has stored results."""
        run.reader_offered = bool(run.stored)
        if not run.stored:
            return cards
        if any(c.name == READ_RESULT_TOOL for c in cards):
            raise ToolCardError(
                f"a tool named {READ_RESULT_TOOL!r} is offered, and the service's result "
                "store offers its own under that name; rename yours"
            )
        return (*cards, READ_RESULT_CARD)

    async def _read_result(self, call: ToolExecutionRequest, run: _Run) -> ToolExecutionResult:
        """Answer a `read_result(result_id, page)` call from the result store."""
        assert self.result_store is not None
        try:
            args = parse_arguments(call.arguments, tool_name=call.name)
        except ToolArgumentsError as e:
            return await self._handle(self.arguments_error_handler, e, call, run, counted=True)
        rid, page = args.get("result_id"), args.get("page", 2)
        if not isinstance(rid, str):
            return ToolExecutionResult.error_result("result_id must be the id of a stored result")
        if not isinstance(page, int) or isinstance(page, bool) or page < 1:
            return ToolExecutionResult.error_result("page must be a whole number from 1 up")
        stored = await self.result_store.get(rid) if rid in run.stored else None
        if stored is None:
            known = ", ".join(repr(i) for i in run.stored)
            return ToolExecutionResult.error_result(
                f"There is no stored result {rid!r} in this conversation (stored: {known}). "
                "Call the original tool again if you need its output."
            )
        if page > stored.pages:
            return ToolExecutionResult.error_result(
                f"Result {rid!r} has {stored.pages} pages; there is no page {page}."
            )
        return ToolExecutionResult(text=page_text(rid, stored, page), result=stored.page(page))

    async def _hallucinated(self, call: ToolExecutionRequest, run: _Run) -> ToolExecutionResult:
        available = [c.name for c in self._visible_cards(run)]
        attempt = run.failures.get(call.name, 0) + 1
        run.failures[call.name] = attempt
        try:
            result = await answer_hallucinated(self.hallucinated_tool_strategy, call, available)
        except BaseException as raised:
            fallback = HallucinatedToolStrategy.FEEDBACK(call, available)
            raise _Abort(raised, ToolExecutionResult.error_result(fallback, error=raised)) from None
        if attempt > self.max_argument_retries:
            error = HallucinatedToolError(
                f"the model called the unknown tool {call.name!r} {attempt} times in a row "
                f"(available: {', '.join(available) or '(none)'})",
                tool_name=call.name,
                available=available,
            )
            raise _Abort(error, dataclasses.replace(result, error=error))
        return result

    async def _run_search(self, call: ToolExecutionRequest, run: _Run) -> ToolExecutionResult:
        assert self.tool_search is not None
        entries = self._entries if run.offering is None else run.offering.tools
        hidden = [
            e.card
            for name, e in entries.items()
            if name not in self.tool_search.always_visible and name not in run.found
        ]
        try:
            found = self.tool_search.search(
                parse_arguments(call.arguments, tool_name=call.name), hidden
            )
        except ToolArgumentsError as e:
            return await self._handle(self.arguments_error_handler, e, call, run, counted=True)
        return found_result([c.name for c in found])


MODEL_RETRY_ATTRIBUTE = "toolweave.model_retry"
"""The attribute of a result answering a `ModelRetry`: the tool's consecutive attempt."""
ATTEMPTS_ATTRIBUTE = "toolweave.attempts"
"""The attribute of a result whose call ran more than once (transient retries)."""


def _asks_retry(error: ToolExecutionError) -> bool:
    """Whether the tool raised `ModelRetry` (its durable record says so after a replay)."""
    if isinstance(error.cause, ModelRetry):
        return True
    return bool(error.details.get("recorded")) and error.details.get("error_type") == "ModelRetry"


class _RetryingExecutor:
    """Runs a call of an idempotent tool again after a transient failure (`Retry`);
    `inner` is the tool's executor (the loop looks through it)."""

    __slots__ = ("inner", "name", "policy")

    def __init__(self, inner: Any, policy: Retry, name: str) -> None:
        self.inner = inner
        self.policy = policy
        self.name = name

    async def aexecute_with_result(
        self, request: ToolExecutionRequest, memory_id: Any = None, **kwargs: Any
    ) -> ToolExecutionResult:
        inner = self.inner

        async def attempt() -> ToolExecutionResult:
            out: ToolExecutionResult = await inner.aexecute_with_result(
                request, memory_id, **kwargs
            )
            return out

        def retrying(error: BaseException, attempt: int, wait: float) -> None:
            logger.info(
                "tool %r failed transiently (%s), attempt %d of %d; retrying in %.2f s",
                self.name,
                error_text(error),
                attempt,
                self.policy.attempts,
                wait,
            )

        result, attempts = await self.policy.run(attempt, failed=_failure_of, on_retry=retrying)
        if attempts > 1:
            attributes = {**result.attributes, ATTEMPTS_ATTRIBUTE: attempts}
            result = dataclasses.replace(result, attributes=attributes)
        return result

    def execute_with_result(
        self, request: ToolExecutionRequest, memory_id: Any = None, **kwargs: Any
    ) -> ToolExecutionResult:
        return run_sync(self.aexecute_with_result(request, memory_id, **kwargs))


def _failure_of(result: ToolExecutionResult) -> BaseException | None:
    """The error an error result stands for (None: a success, or no exception behind it)."""
    return result.error if result.is_error else None


def _tool_behind(executor: Any) -> Tool | None:
    """The `Tool` an entry's executor runs (through a subclass's wrapper, e.g. a durable
    one), or None for an executor of the caller's."""
    while executor is not None:  # through wrappers: durable, hooks, retries
        if isinstance(executor, DefaultToolExecutor):
            return executor.tool
        executor = getattr(executor, "inner", None)
    return None


def _may_wait(entry: _Entry | None) -> bool:
    """Whether a call of `entry`'s tool may have to wait (deferred, or approval asked)."""
    return entry is not None and (entry.deferred or entry.card.requires_approval is not False)


def _shared_instance(entry: _Entry) -> Any:
    """The object the entry's tool is a bound method of (None when the tool is declared
    safe to run in parallel, or is not a method)."""
    if entry.parallel_safe is True:
        return None
    executor = entry.executor
    executor = getattr(executor, "inner", executor)  # a wrapping executor (durable)
    target: Any = None
    if isinstance(executor, DefaultToolExecutor) and isinstance(executor.tool, LocalFunction):
        target = executor.tool.func
    elif isinstance(executor, _CallableExecutor):
        target = executor.target
    if isinstance(target, types.MethodType):
        return target.__self__
    return None


class _Holding:
    """`async with`: acquire the guards in order (releasing what was taken if that fails or
    is cancelled), release them in reverse order."""

    __slots__ = ("guards",)

    def __init__(self, guards: list[Limit | asyncio.Lock]) -> None:
        self.guards = guards

    async def __aenter__(self) -> None:
        for i, guard in enumerate(self.guards):
            try:
                await guard.acquire()
            except BaseException:
                for taken in reversed(self.guards[:i]):
                    taken.release()
                raise

    async def __aexit__(self, *exc: object) -> None:
        for guard in reversed(self.guards):
            guard.release()


class _NothingHeld:
    """`async with` for a call with no guards (the common case): no coroutine to enter or
    leave it."""

    __slots__ = ()

    def __aenter__(self) -> _Ready:
        return _READY

    def __aexit__(self, *exc: object) -> _Ready:
        return _READY


class _Ready:
    """An awaitable that is already done (None), without a coroutine."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        return iter(())  # type: ignore[return-value]


_READY = _Ready()
_NOTHING_HELD = _NothingHeld()


def _is_plain_sync(executor: Any) -> bool:
    tool = getattr(executor, "tool", None)
    return (
        isinstance(executor, DefaultToolExecutor)
        and isinstance(tool, LocalFunction)
        and not tool.is_async
        and tool.supports_invoke()
        and tool.card.timeout is None
    )


class _Abort(Exception):
    """Internal: a handler raised; carries the error result that still answers the call."""

    def __init__(self, error: BaseException, result: ToolExecutionResult) -> None:
        super().__init__(str(error))
        self.error = error
        self.result = result


_NO_APPROVAL = contextlib.nullcontext()


class _Paused(Exception):
    """Internal: the tool raised `NeedsApproval` / `CallDeferred`; carries it."""

    def __init__(self, pause: ToolPause) -> None:
        super().__init__(str(pause))
        self.pause = pause


def _pause_of(result: ToolExecutionResult) -> ToolPause | None:
    """The pause a tool raised, when its executor turned it into an error result."""
    error = result.error if result.is_error else None
    if isinstance(error, ToolPause):
        return error
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, ToolPause) else None


def _pending(call: ToolExecutionRequest, pause: ToolPause) -> PendingCall:
    """The pending entry of a call whose tool paused itself."""
    return PendingCall(
        id=call.id,
        tool_name=call.name,
        arguments=call.arguments,
        reason=pause.kind,
        raised=True,
        message=pause.message,
        metadata=pause.metadata,
    )


def _same(a: StandingDecision, b: StandingDecision) -> bool:
    """Whether two standing decisions decide the same (a repeat is not kept twice)."""
    return (
        not a.in_process
        and not b.in_process
        and (a.tool_name, a.decision, a.when, a.message)
        == (b.tool_name, b.decision, b.when, b.message)
    )
