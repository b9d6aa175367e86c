"""`DurableToolService`: the `ToolService` loop as a DBOS workflow (see docs/durable.md).

A conversation is one workflow (its id is the conversation id). Each model call is a step
(`model.chat`). Each tool call of a registered tool is a step (`tool:<name>`); a
non-idempotent tool gets a `tool.start:<name>` step first, recorded before the tool runs,
so a replay can tell "this call was started and its result never recorded" from "this call
never started". Such a call is never run again silently: a reconciliation function decides,
or the model receives an "outcome unknown" error result and `on_unknown_outcome` is told.

With a tool queue, every call of a round is a child workflow on a DBOS queue, so any worker
sharing the database may run it; results are still taken in request order.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import inspect
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Coroutine, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, TypeAlias

from dbos import DBOS, SetWorkflowID, StepOptions
from dbos import error as dbos_error

from .._utils.sync import reset_thread_loop, run_sync
from ..chat.messages import ChatMessage, UserMessage
from ..chat.model import ChatModel
from ..chat.request import ChatRequest, ChatRequestParameters
from ..chat.response import ChatResponse, TokenUsage
from ..context import ToolContext, current_approval, use_approval
from ..errors import ErrorCode, ToolweaveError
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecutionResult
from ..policies._loop import HookedExecutor
from ..policies.usage import UsageLimits
from ..service.approvals import (
    ConversationState,
    Decision,
    PendingCall,
    StandingDecision,
    already_decided,
    check_given_standing,
    claim_key,
    decision_kind,
    read_decision,
    repeat_allowed,
)
from ..service.result import ChatCompleted, ToolChatResult
from ..service.service import ServiceEvent, ToolService, _pause_of, _Run
from ..service.subagent import decision_payload, read_decision_payload
from ..tools.pause import ToolPause
from ..toolsets.abstract import ToolsetTool
from ..toolsets.offering import Offering
from ..toolsets.step import StepContext
from ._codec import (
    decode_messages,
    decode_outcome,
    decode_result,
    encode_error,
    encode_messages,
    encode_pause,
    encode_result,
    encode_tool_result,
)

__all__ = [
    "CONVERSATION_WORKFLOW_PREFIX",
    "DECISION_TOPIC",
    "PENDING_EVENT",
    "PROGRESS_EVENT",
    "RERUN",
    "STANDING_EVENT",
    "STANDING_TOPIC",
    "TOOL_OUTCOME_UNKNOWN",
    "TOOL_WORKFLOW_PREFIX",
    "ConversationFailedError",
    "ConversationHandle",
    "DurableToolService",
    "QueueSpec",
    "Reconciler",
    "UnknownOutcome",
    "conversation_payload",
    "launch",
    "recover",
    "shutdown",
]

logger = logging.getLogger("toolweave.durable")

CONVERSATION_WORKFLOW_PREFIX: Final = "toolweave.conversation."
"""Conversation workflows are named this plus the service name."""
TOOL_WORKFLOW_PREFIX: Final = "toolweave.tool."
"""Queued tool-call workflows are named this plus the service name."""
PROGRESS_EVENT: Final = "toolweave.progress"
"""The DBOS event key under which a conversation publishes its history as it goes."""
PENDING_EVENT: Final = "toolweave.pending"
"""The DBOS event key under which a conversation publishes the calls waiting for a
decision (an empty list when none wait)."""
DECISION_TOPIC: Final = "toolweave.decision"
"""The DBOS message topic on which a waiting conversation receives decisions."""
STANDING_EVENT: Final = "toolweave.standing"
"""The DBOS event key under which a conversation publishes its standing decisions."""
STANDING_TOPIC: Final = "toolweave.standing"
"""The DBOS message topic on which a conversation receives revocations of its standing
decisions (`ConversationClient.revoke`); read before each round's calls are gated."""
TOOL_OUTCOME_UNKNOWN: Final = "tool_outcome_unknown"
"""Callback event fired (once, when decided) for an interrupted non-idempotent call."""


class _Rerun:
    def __repr__(self) -> str:
        return "RERUN"


RERUN: Final = _Rerun()
"""A reconciliation function returns this to run the interrupted call again."""


@dataclass(frozen=True, slots=True)
class QueueSpec:
    """A DBOS queue: `concurrency` bounds it across all workers, `worker_concurrency` per
    worker process; `polling_interval` is how often workers look for work (seconds)."""

    name: str
    concurrency: int | None = None
    worker_concurrency: int | None = None
    polling_interval: float = 1.0


@dataclass(frozen=True, slots=True)
class UnknownOutcome:
    """A non-idempotent call that was started but whose result was never recorded."""

    conversation_id: str
    request: ToolExecutionRequest
    started_at: datetime | None
    started_by: str | None
    """The DBOS executor id of the worker that started it."""
    memory_id: Any = None

    @property
    def tool_name(self) -> str:
        """The tool's name."""
        return self.request.name


ReconcileVerdict: TypeAlias = ToolExecutionResult | str | _Rerun | None
Reconciler: TypeAlias = Callable[[UnknownOutcome], ReconcileVerdict | Awaitable[ReconcileVerdict]]
"""Decides an interrupted call: a result (or its text) to record as the call's result,
`RERUN` to run the tool again, or None to report the outcome as unknown."""


class DurableDatabaseError(ToolweaveError, ConnectionError):
    """`launch()` could not reach its PostgreSQL database; the message names the URL (its
    password masked), the driver's reason and what to start."""

    default_code = ErrorCode.DURABLE_DATABASE_UNAVAILABLE

    def __init__(self, message: str, *, url: str) -> None:
        super().__init__(message, details={"url": url})
        self.url = url
        """The database URL with its password masked."""


def _masked_url(url: str) -> str:
    """`url` with its password replaced by `***` (unparsable URLs are masked by pattern)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return re.sub(r"(//[^:/@]*:)[^@/]*@", r"\1***@", url)


class ConversationFailedError(ToolweaveError):
    """A durable conversation ended with an error; `error_type` names the original one and
    `partial_messages` holds the (valid) history up to the failure, when there was one."""

    def __init__(
        self,
        conversation_id: str,
        error_type: str,
        message: str,
        partial_messages: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(f"conversation {conversation_id!r} failed: {error_type}: {message}")
        self.conversation_id = conversation_id
        self.error_type = error_type
        self.error_message = message
        self.partial_messages = partial_messages

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            type(self),
            (self.conversation_id, self.error_type, self.error_message, self.partial_messages),
        )

    @property
    def partial_result(self) -> ToolChatResult | None:
        """The history up to the failure as a `ToolChatResult` (no final response)."""
        if self.partial_messages is None:
            return None
        return ToolChatResult(final_response=None, messages=decode_messages(self.partial_messages))


def _unknown_text(name: str, started_at: str | None, started_by: str | None) -> str:
    where = f" by worker {started_by}" if started_by else ""
    when = f" at {started_at}" if started_at else ""
    return (
        f"The outcome of this call to {name!r} is unknown: it was started{when}{where}, but "
        "that worker stopped before the result was recorded. It was not run again because "
        f"{name!r} is not idempotent. Check whether it took effect before calling it again."
    )


def conversation_payload(
    messages: Sequence[ChatMessage] | str,
    *,
    parameters: ChatRequestParameters | None = None,
    model: str = "default",
    memory_id: Any = None,
    context: Any = None,
    injected: Mapping[str, Any] | None = None,
    usage_limits: UsageLimits | None = None,
    standing_decisions: Sequence[StandingDecision] | None = None,
) -> dict[str, Any]:
    """The input of a conversation workflow: the history as JSON, the request parameters,
    the name of a model registered with the service, what reaches the tools (`memory_id`,
    `context`, `injected`; these must pickle), the conversation's `usage_limits` (None:
    the service's) and the standing decisions of an earlier turn (`standing_decisions`:
    kept in the database with the input, so none limited by a function: `TypeError`)."""
    standing = None if standing_decisions is None else check_given_standing(standing_decisions)
    kept_here = [s.id for s in standing or () if s.in_process]
    if kept_here:
        raise TypeError(
            f"standing decisions {kept_here} are limited by a function, which a durable "
            "conversation cannot keep: limit them with an argument pattern (when={...})"
        )
    history: list[ChatMessage] = (
        [UserMessage(messages)] if isinstance(messages, str) else list(messages)
    )
    if not history:
        raise ValueError("messages must not be empty: pass the conversation so far")
    return {
        "messages": encode_messages(history),
        "parameters": parameters,
        "model": model,
        "memory_id": memory_id,
        "context": context,
        "injected": dict(injected) if injected else None,
        **({"usage_limits": usage_limits} if usage_limits is not None else {}),
        **(
            {"standing": [s.model_dump(mode="json") for s in standing]}
            if standing is not None
            else {}
        ),
    }


# durable state of the workflow running in the current task ----------------------------------
@dataclass(slots=True)
class _State:
    conversation_id: str
    outcomes: dict[str, dict[str, Any]] = field(default_factory=dict)
    round: int = 0
    approvals: dict[str, Any] = field(default_factory=dict)
    """The run's decisions for calls that paused themselves (they run again with them)."""
    standing: tuple[dict[str, Any], ...] = ()
    """The standing decisions last published."""
    step: StepContext | None = None
    """The step the toolsets were last asked for (a queued call of a toolset's tool is
    looked up by asking the toolsets for it again, in the worker that runs it)."""


_STATE: ContextVar[_State | None] = ContextVar("toolweave_durable_state", default=None)

# Nonces of `tool.start` steps executed (not replayed) by this process and not yet consumed.
_FRESH_STARTS: set[str] = set()

_SERVICES: dict[str, DurableToolService] = {}

DECISION_CLAIM_WORKFLOW: Final = "toolweave.decision_claim"
"""The DBOS workflow recording one decision for one call of a paused `ConversationState`
resumed through a launched `DurableToolService` (its id is derived from the pause id and
the call id, and a workflow id exists once in the database: a second process resuming any
state of the same pause finds it and refuses)."""


async def _record_decision(record: dict[str, Any]) -> dict[str, Any]:
    return record


_decision_claim = DBOS.workflow(name=DECISION_CLAIM_WORKFLOW)(_record_decision)


def _claim_id(pause_id: str, call_id: str) -> str:
    digest = hashlib.sha256(f"{pause_id}\0{call_id}".encode("utf-8", "surrogatepass"))
    return f"{DECISION_CLAIM_WORKFLOW}/{digest.hexdigest()}"


def _dbos_launched() -> bool:
    """Whether DBOS is launched in this process (its database is there to claim in)."""
    from dbos import _dbos

    return bool(getattr(getattr(_dbos, "_dbos_global_instance", None), "_launched", False))


@dataclass(frozen=True, slots=True)
class _CallContext:
    conversation_id: str
    memory_id: Any
    context: Any
    injected: dict[str, Any] | None
    entries: dict[str, Any] | None = None
    """The round's tools (the service's and its toolsets'); None: the service's."""


_StepRunner = Callable[
    [str, Callable[[], Coroutine[Any, Any, dict[str, Any]]]], Awaitable[dict[str, Any]]
]


async def _mark_started() -> dict[str, Any]:
    nonce = uuid.uuid4().hex
    _FRESH_STARTS.add(nonce)
    return {"nonce": nonce, "at": datetime.now(UTC).isoformat(), "by": DBOS.executor_id}


class _DurableExecutor:
    """Wraps a registered executor: inside a durable conversation it answers with the
    outcome its step recorded; outside one it runs the tool directly."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def aexecute_with_result(
        self, request: ToolExecutionRequest, memory_id: Any = None, **kwargs: Any
    ) -> ToolExecutionResult:
        state = _STATE.get()
        if state is None:
            result: ToolExecutionResult = await self.inner.aexecute_with_result(
                request, memory_id, **kwargs
            )
            return result
        data = state.outcomes.pop(request.id, None)
        if data is None:  # pragma: no cover - a bug, never a silent non-durable run
            raise RuntimeError(f"no durable outcome prepared for tool call {request.id!r}")
        return decode_outcome(data, request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class ConversationHandle:
    """A started conversation: `await handle.result()` waits for it."""

    def __init__(self, conversation_id: str, handle: Any) -> None:
        self.conversation_id = conversation_id
        self._handle = handle

    async def result(self, timeout: float | None = None) -> ToolChatResult:
        """The finished conversation; raises `ConversationFailedError` if it failed and
        `TimeoutError` after `timeout` seconds."""
        data = await asyncio.wait_for(self._handle.get_result(polling_interval_sec=0.2), timeout)
        return decode_result(data)

    async def status(self) -> str:
        """The DBOS status: ENQUEUED, PENDING, SUCCESS, ERROR, CANCELLED, ..."""
        status = await self._handle.get_status()
        return str(status.status)


class DurableToolService(ToolService):
    """A `ToolService` whose conversations are DBOS workflows (docs/durable.md).

    Every worker process builds the same service (same `name`, tools and models) before
    `launch()`. `models` maps names to models; `model` is the one named "default".
    `tool_queue` sends each tool call through a DBOS queue (any worker runs it);
    `conversation_queue` makes `start` enqueue conversations instead of running them here.
    `reconcile` (or per-tool `reconcilers`) decides interrupted non-idempotent calls;
    `on_unknown_outcome(info)` is told when one is reported as unknown.
    `model_step_options` are DBOS step options for model calls (e.g. retries).
    Calls that need approval make the conversation wait for decisions sent with
    `ConversationClient.decide` (or `toolweave runs approve|deny`); `decision_poll` is how
    long one wait for a message lasts before waiting again (seconds).
    """

    def __init__(
        self,
        name: str = "default",
        *,
        model: ChatModel | None = None,
        models: Mapping[str, ChatModel] | None = None,
        tool_queue: QueueSpec | str | None = None,
        conversation_queue: QueueSpec | str | None = None,
        reconcile: Reconciler | None = None,
        reconcilers: Mapping[str, Reconciler] | None = None,
        on_unknown_outcome: Callable[[UnknownOutcome], Any] | None = None,
        model_step_options: StepOptions | None = None,
        max_recovery_attempts: int = 50,
        decision_poll: float = 3600.0,
        **options: Any,
    ) -> None:
        super().__init__(**options)
        self.decision_poll = decision_poll
        self.name = name
        self.models: dict[str, ChatModel] = dict(models or {})
        if model is not None:
            self.models["default"] = model
        self.tool_queue = QueueSpec(tool_queue) if isinstance(tool_queue, str) else tool_queue
        self.conversation_queue = (
            QueueSpec(conversation_queue)
            if isinstance(conversation_queue, str)
            else conversation_queue
        )
        self.reconcile = reconcile
        self.reconcilers: dict[str, Reconciler] = dict(reconcilers or {})
        self.on_unknown_outcome = on_unknown_outcome
        self.model_step_options: StepOptions = dict(model_step_options or {})  # type: ignore[assignment]
        service = self

        async def conversation(payload: dict[str, Any]) -> dict[str, Any]:
            return await service._run_conversation(payload)

        async def tool_call(payload: dict[str, Any]) -> dict[str, Any]:
            return await service._run_tool_workflow(payload)

        self._conversation_workflow = DBOS.workflow(
            name=self.workflow_name, max_recovery_attempts=max_recovery_attempts
        )(conversation)
        self._tool_workflow = DBOS.workflow(
            name=TOOL_WORKFLOW_PREFIX + name, max_recovery_attempts=max_recovery_attempts
        )(tool_call)
        _SERVICES[name] = self

    @property
    def workflow_name(self) -> str:
        """The DBOS name of this service's conversation workflow."""
        return CONVERSATION_WORKFLOW_PREFIX + self.name

    def _wrap(self, executor: Any) -> Any:
        return _DurableExecutor(executor)

    def register_queues(self) -> None:
        """Register this service's queues with the launched DBOS (`launch` does it)."""
        for spec in (self.tool_queue, self.conversation_queue):
            if spec is not None:
                DBOS.register_queue(
                    spec.name,
                    global_concurrency=spec.concurrency,
                    worker_concurrency=spec.worker_concurrency,
                    polling_interval_sec=spec.polling_interval,
                    on_conflict="always_update",
                )

    async def _claim_shared(
        self, state: ConversationState, decisions: Mapping[str, Decision]
    ) -> None:
        """A `ConversationState` resumed through this service (its non-durable faces) while
        DBOS is launched: each decision is also claimed in the database, as a
        `DECISION_CLAIM_WORKFLOW` whose id is derived from (pause id, call id), so every
        worker sharing the database refuses a call of the pause approved (or decided
        differently) elsewhere: `CallAlreadyDecidedError`, before anything runs."""
        if not decisions or not _dbos_launched() or DBOS.workflow_id is not None:
            return
        tools = {p.id: p.tool_name for p in state.pending}
        keys = {p.id: claim_key(p) for p in state.pending}
        claims = {
            _claim_id(state.pause_id, keys.get(call_id, call_id)): (
                call_id,
                decision_kind(decision),
            )
            for call_id, decision in decisions.items()
        }

        def refusal(call_id: str, kind: str, first: dict[str, Any]) -> Exception | None:
            decided = str(first.get("decision"))
            if repeat_allowed(decided, kind):
                return None
            return already_decided(
                call_id=call_id,
                tool_name=tools.get(call_id, "?"),
                decided=decided,
                attempted=kind,
                pause_id=state.pause_id,
                decided_at=first.get("at"),
                decided_by=first.get("by"),
            )

        # every refusal before anything is claimed (a race past this check still refuses
        # below, leaving the calls claimed before it claimed: at most once)
        recorded = await _recorded_decisions(list(claims))
        for claim, first in recorded.items():
            call_id, kind = claims[claim]
            error = refusal(call_id, kind, first)
            if error is not None:
                raise error
        for claim, (call_id, kind) in claims.items():
            if claim in recorded:
                continue
            record = {
                "pause_id": state.pause_id,
                "call_id": call_id,
                "tool": tools.get(call_id),
                "decision": kind,
                "at": datetime.now(UTC).isoformat(),
                "by": DBOS.executor_id,
            }
            try:
                with SetWorkflowID(claim, workflow_id_reuse_policy="reject"):
                    handle = await DBOS.start_workflow_async(_decision_claim, record)
            except dbos_error.DBOSWorkflowIDInUseError:
                first = (await _recorded_decisions([claim])).get(claim, {})
                error = refusal(call_id, kind, first)
                if error is not None:
                    raise error from None
                continue
            await handle.get_result()

    # starting conversations -----------------------------------------------------------------
    def _model_key(self, model: ChatModel | str | None) -> str:
        if model is None:
            if "default" in self.models:
                return "default"
            if len(self.models) == 1:
                return next(iter(self.models))
            raise ValueError("name the model: this service has several (or none) registered")
        if isinstance(model, str):
            if model not in self.models:
                raise ValueError(
                    f"no model named {model!r} is registered (have: {list(self.models)})"
                )
            return model
        for key, m in self.models.items():
            if m is model:
                return key
        raise ValueError(
            "a durable conversation can only use a model registered with the service "
            "(models={...}), so that every worker can rebuild it after a crash"
        )

    def payload(
        self,
        messages: Sequence[ChatMessage] | str,
        *,
        parameters: ChatRequestParameters | None = None,
        model: ChatModel | str | None = None,
        memory_id: Any = None,
        context: Any = None,
        injected: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        standing_decisions: Sequence[StandingDecision] | None = None,
    ) -> dict[str, Any]:
        """The workflow input for a conversation (see `conversation_payload`)."""
        return conversation_payload(
            messages,
            parameters=parameters,
            model=self._model_key(model),
            memory_id=memory_id,
            context=context,
            injected=injected,
            usage_limits=usage_limits,
            standing_decisions=standing_decisions,
        )

    async def start(
        self,
        messages: Sequence[ChatMessage] | str,
        *,
        conversation_id: str | None = None,
        parameters: ChatRequestParameters | None = None,
        model: ChatModel | str | None = None,
        memory_id: Any = None,
        context: Any = None,
        injected: Mapping[str, Any] | None = None,
        usage_limits: UsageLimits | None = None,
        standing_decisions: Sequence[StandingDecision] | None = None,
    ) -> ConversationHandle:
        """Start (or, if `conversation_id` exists already, attach to) a conversation.

        With a `conversation_queue` it is enqueued for any worker; otherwise it runs in
        this process. Starting an existing id never runs it again: the handle yields the
        recorded result (the new arguments are ignored). `standing_decisions` (an earlier
        turn's `result.standing_decisions`) stand in this conversation from its start.
        """
        payload = self.payload(
            messages,
            parameters=parameters,
            model=model,
            memory_id=memory_id,
            context=context,
            injected=injected,
            usage_limits=usage_limits,
            standing_decisions=standing_decisions,
        )
        cid = conversation_id or f"conv-{uuid.uuid4().hex}"
        with SetWorkflowID(cid):
            if self.conversation_queue is not None:
                handle: Any = await DBOS.enqueue_workflow_async(
                    self.conversation_queue.name, self._conversation_workflow, payload
                )
            else:
                handle = await DBOS.start_workflow_async(self._conversation_workflow, payload)
        return ConversationHandle(cid, handle)

    async def arun(
        self,
        messages: Sequence[ChatMessage] | str,
        *,
        conversation_id: str | None = None,
        timeout: float | None = None,
        **options: Any,
    ) -> ToolChatResult:
        """Start the conversation and wait for its result (see `start`)."""
        handle = await self.start(messages, conversation_id=conversation_id, **options)
        return await handle.result(timeout)

    async def achat(  # type: ignore[override]
        self,
        model: ChatModel | str | None,
        parameters: ChatRequestParameters | None = None,
        messages: Sequence[ChatMessage] | str | None = None,
        *,
        memory_id: Any = None,
        context: Any = None,
        injected: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
        usage_limits: UsageLimits | None = None,
        standing_decisions: Sequence[StandingDecision] | None = None,
    ) -> ToolChatResult:
        """`ToolService.achat`, durably: `model` must be registered (or named)."""
        if messages is None:
            raise ValueError("messages must not be empty: pass the conversation so far")
        return await self.arun(
            messages,
            conversation_id=conversation_id,
            parameters=parameters,
            model=model,
            memory_id=memory_id,
            context=context,
            injected=injected,
            usage_limits=usage_limits,
            standing_decisions=standing_decisions,
        )

    def chat(  # type: ignore[override]
        self,
        model: ChatModel | str | None,
        parameters: ChatRequestParameters | None = None,
        messages: Sequence[ChatMessage] | str | None = None,
        *,
        memory_id: Any = None,
        context: Any = None,
        injected: Mapping[str, Any] | None = None,
        conversation_id: str | None = None,
        usage_limits: UsageLimits | None = None,
        standing_decisions: Sequence[StandingDecision] | None = None,
    ) -> ToolChatResult:
        """Synchronous durable `achat` (must not be called from a running event loop)."""
        return run_sync(
            self.achat(
                model,
                parameters,
                messages,
                memory_id=memory_id,
                context=context,
                injected=injected,
                conversation_id=conversation_id,
                usage_limits=usage_limits,
                standing_decisions=standing_decisions,
            )
        )

    # the conversation workflow --------------------------------------------------------------
    async def _run_conversation(self, payload: dict[str, Any]) -> dict[str, Any]:
        cid = DBOS.workflow_id
        assert cid is not None
        model = self.models[payload["model"]]
        run = self._start(
            payload.get("parameters"),
            decode_messages(payload["messages"]),
            payload.get("memory_id"),
            payload.get("context"),
            payload.get("injected"),
            usage_limits=payload.get("usage_limits"),
            standing_decisions=(
                [StandingDecision.model_validate(s) for s in payload["standing"]]
                if "standing" in payload
                else None
            ),
        )
        token = _STATE.set(_State(cid, approvals=run.approvals))
        try:
            result: ToolChatResult | None = None
            event: ServiceEvent
            async for event in self._loop(model, run, streaming=False, eager=False):
                if isinstance(event, ChatCompleted):
                    result = event.result
            assert result is not None
            return encode_result(result)
        except dbos_error.DBOSException:
            raise
        except Exception as e:
            partial = getattr(e, "partial_result", None)
            raise ConversationFailedError(
                cid,
                type(e).__name__,
                getattr(e, "message", None) or str(e),
                encode_messages(partial.messages) if partial is not None else None,
            ) from e
        finally:
            _STATE.reset(token)

    async def _await_decisions(
        self, run: _Run, waiting: list[PendingCall]
    ) -> Mapping[str, Decision] | None:
        """In a conversation workflow, calls that need approval (or deferred calls) do not
        end it: it publishes them (`PENDING_EVENT`) and waits for one decision per call on
        `DECISION_TOPIC` (`ConversationClient.decide`, `toolweave runs approve|deny`).
        Waiting holds no thread, and survives restarts: DBOS replays received messages.
        Each pending call is published with its `pause` (the history's length, unique per
        pause of a conversation); a decision naming another pause is ignored."""
        if _STATE.get() is None:
            return None
        await self._publish_standing(run)
        ids = {call.id for call in waiting}
        # unique per pause of a conversation; a call asked again after its decision (it
        # paused itself once more) gets a pause of its own
        pause = len(run.messages) + max(call.ask for call in waiting) * 2**32
        await DBOS.set_event_async(
            PENDING_EVENT, [{**call.model_dump(), "pause": pause} for call in waiting]
        )
        await self._publish(run, "waiting")
        decisions: dict[str, Decision] = {}
        while len(decisions) < len(ids):
            message = await DBOS.recv_async(DECISION_TOPIC, timeout_seconds=self.decision_poll)
            decided = read_decision(message)
            stale = isinstance(message, Mapping) and message.get("pause", pause) != pause
            if decided is None or decided[0] not in ids or stale:
                if message is not None:
                    logger.warning(
                        "conversation %s: ignored a decision: %r", DBOS.workflow_id, message
                    )
                continue
            decisions.setdefault(*decided)
        await DBOS.set_event_async(PENDING_EVENT, [])
        return decisions

    async def _gated(self, calls: list[ToolExecutionRequest], run: _Run) -> list[PendingCall]:
        """In a conversation workflow with standing decisions: apply the revocations sent
        since (`ConversationClient.revoke`) and publish them (`STANDING_EVENT`) first."""
        state = _STATE.get()
        if state is not None and run.standing:
            while True:
                message = await DBOS.recv_async(STANDING_TOPIC, timeout_seconds=0)
                if message is None:
                    break
                which = message.get("revoke") if isinstance(message, Mapping) else None
                if isinstance(which, str):
                    run.standing[:] = [s for s in run.standing if which not in (s.id, s.tool_name)]
                    run.verdicts.clear()
            await self._publish_standing(run)
        return await super()._gated(calls, run)

    async def _publish_standing(self, run: _Run) -> None:
        """Publish the conversation's standing decisions when they changed."""
        state = _STATE.get()
        if state is None:
            return
        standing = tuple(s.model_dump(mode="json") for s in run.standing)
        if standing != state.standing:
            state.standing = standing
            await DBOS.set_event_async(STANDING_EVENT, list(standing))

    async def _publish(self, run: _Run, phase: str) -> None:
        await DBOS.set_event_async(
            PROGRESS_EVENT,
            {"phase": phase, "messages": encode_messages(run.messages)},
        )

    async def _call_model(self, model: ChatModel, request: ChatRequest, run: _Run) -> ChatResponse:
        if _STATE.get() is None:
            return await super()._call_model(model, request, run)
        await self._publish(run, "model")

        async def call() -> dict[str, Any]:
            response = await model.achat(request)
            return response.model_dump(mode="json")

        options: StepOptions = {**self.model_step_options, "name": "model.chat"}
        data = await DBOS.run_step_async(options, call)
        return ChatResponse.model_validate(data)

    def _guardrails_of(self, entry: Any) -> tuple[Any, ...]:
        """In a conversation workflow a call's guardrails run inside its step
        (`_execute_raw`): their verdicts are recorded with the outcome, never taken again."""
        return () if _STATE.get() is not None else super()._guardrails_of(entry)

    def _tool_hooks(self, run: _Run) -> tuple[Any, ...]:
        """In a conversation workflow the around-tool-call hooks run inside each call's
        step (`_execute_raw`), so what they decide is recorded and never decided again."""
        return () if _STATE.get() is not None else super()._tool_hooks(run)

    def _is_tool(self, call: ToolExecutionRequest, run: _Run | None = None) -> bool:
        """Whether `call` names a tool offered in `run`'s round (the service's own or a
        toolset's): its outcome is recorded as a step."""
        search = self.tool_search
        if search is not None and call.name == search.card.name:
            return False
        entries = self._entries if run is None or run.entries is None else run.entries
        return call.name in entries

    async def _step(self, run: _Run, rounds: int) -> bool:
        changed = await super()._step(run, rounds)
        state = _STATE.get()
        if state is not None:
            state.step = StepContext(
                round=rounds,
                messages=tuple(run.messages),
                usage=run.usage,
                memory_id=run.memory_id,
                context=run.context,
            )
        return changed

    async def _execute_round(
        self,
        calls: list[ToolExecutionRequest],
        run: _Run,
        queue: Any,
        started: dict[str, Any],
    ) -> Any:
        state = _STATE.get()
        if state is None:
            return await super()._execute_round(calls, run, queue, started)
        state.round += 1
        await self._publish(run, "tools")
        ctx = _CallContext(
            state.conversation_id, run.memory_id, run.context, run.injected, run.entries
        )
        segment: list[tuple[int, ToolExecutionRequest]] = []
        recorded: dict[str, Any] = {}
        for i, call in enumerate(calls):
            if not self._is_tool(call, run):
                continue
            entry = self._entry(call.name, run)
            if entry is not None and not isinstance(entry.executor, _DurableExecutor):
                # a toolset's tool: the loop gets the outcome its step recorded, as for the
                # service's own tools (whose executors are wrapped when registered)
                recorded[call.name] = dataclasses.replace(
                    entry, executor=_DurableExecutor(entry.executor)
                )
            if entry is not None and entry.barrier:
                await self._run_segment(segment, ctx, state, run)
                await self._run_segment([(i, call)], ctx, state, run)
                segment = []
            else:
                segment.append((i, call))
        await self._run_segment(segment, ctx, state, run)
        if not recorded or run.entries is None:
            return await super()._execute_round(calls, run, queue, started)
        entries = run.entries
        run.entries = {**entries, **recorded}
        try:
            return await super()._execute_round(calls, run, queue, started)
        finally:
            run.entries = entries

    async def _run_segment(
        self,
        segment: list[tuple[int, ToolExecutionRequest]],
        ctx: _CallContext,
        state: _State,
        run: _Run,
    ) -> None:
        """Run calls that may overlap; their outcomes are recorded in `state.outcomes`.
        Every DBOS operation id is drawn here in request order, so replays line up."""
        # a call a rule or a standing decision denied never runs (the loop answers it)
        segment = [(i, call) for i, call in segment if call.id not in run.refused]
        if not segment:
            return
        if self.tool_queue is not None:
            handles = []
            for i, call in segment:
                payload = {
                    "call": call.model_dump(mode="json"),
                    "conversation_id": ctx.conversation_id,
                    "memory_id": ctx.memory_id,
                    "context": ctx.context,
                    "injected": ctx.injected,
                }
                if call.id in state.approvals:  # it runs again after pausing itself
                    payload["approval"] = decision_payload(call.id, state.approvals[call.id])
                if call.name not in self._entries and state.step is not None:
                    # a toolset's tool: the worker running the call asks the toolsets for
                    # this step again to find it
                    payload["step"] = {
                        "round": state.step.round,
                        "messages": encode_messages(list(state.step.messages)),
                        "usage": None
                        if state.step.usage is None
                        else state.step.usage.model_dump(mode="json"),
                    }
                with SetWorkflowID(f"{ctx.conversation_id}/r{state.round}/c{i}"):
                    handles.append(
                        await DBOS.enqueue_workflow_async(
                            self.tool_queue.name, self._tool_workflow, payload
                        )
                    )
            for (_, call), handle in zip(segment, handles, strict=True):
                state.outcomes[call.id] = await handle.get_result(polling_interval_sec=0.1)
            return
        plans = []
        for _, call in segment:
            # the round's tools: an MCP server's tools/list_changed may have swapped the
            # service's since the round began; a tool unknown is treated as not idempotent.
            entry = self._entry(call.name, run)
            start = None if entry is not None and entry.card.idempotent else DBOS.reserve_step()
            body = DBOS.reserve_step()
            plans.append((call, start, body))

        def runner(reservation: Any) -> _StepRunner:
            async def run_step(
                name: str, fn: Callable[[], Coroutine[Any, Any, dict[str, Any]]]
            ) -> dict[str, Any]:
                out: dict[str, Any] = await reservation.run_async({"name": name}, fn)
                return out

            return run_step

        async def one(call: ToolExecutionRequest, start: Any, body: Any) -> dict[str, Any]:
            async with self._guards(call, run):
                return await self._durable_call(
                    call, ctx, runner(start) if start is not None else None, runner(body)
                )

        results = await asyncio.gather(*(one(*p) for p in plans))
        for (call, _, _), data in zip(plans, results, strict=True):
            state.outcomes[call.id] = data

    async def _run_tool_workflow(self, payload: dict[str, Any]) -> dict[str, Any]:
        call = ToolExecutionRequest.model_validate(payload["call"])
        entries = await self._step_tools(payload)
        ctx = _CallContext(
            payload["conversation_id"],
            payload.get("memory_id"),
            payload.get("context"),
            payload.get("injected"),
            entries,
        )

        approval = read_decision_payload(payload.get("approval"))

        async def step(
            name: str, fn: Callable[[], Coroutine[Any, Any, dict[str, Any]]]
        ) -> dict[str, Any]:
            with use_approval(call.id, None if approval is None else approval[1]):
                out: dict[str, Any] = await DBOS.run_step_async({"name": name}, fn)
            return out

        entry = (self._entries if entries is None else entries).get(call.name)
        idempotent = entry is not None and entry.card.idempotent
        return await self._durable_call(call, ctx, None if idempotent else step, step)

    async def _step_tools(self, payload: dict[str, Any]) -> dict[str, Any] | None:
        """The tools the toolsets offer in the step a queued call came from (None: the call
        names one of the service's own tools)."""
        step = payload.get("step")
        if step is None:
            return None
        usage = step.get("usage")
        offering = Offering((self._functions, *self._toolsets))
        await offering.step(
            StepContext(
                round=step["round"],
                messages=tuple(decode_messages(step["messages"])),
                usage=None if usage is None else TokenUsage.model_validate(usage),
                memory_id=payload.get("memory_id"),
                context=payload.get("context"),
            )
        )
        tools: dict[str, ToolsetTool] = offering.tools
        return dict(tools)

    # one tool call ----------------------------------------------------------------------------
    async def _durable_call(
        self,
        call: ToolExecutionRequest,
        ctx: _CallContext,
        start_step: _StepRunner | None,
        body_step: _StepRunner,
    ) -> dict[str, Any]:
        """`tool.start` (non-idempotent tools) then `tool`: the body runs the tool when the
        start step was just executed, and resolves the interrupted call when it was replayed."""
        started: dict[str, Any] | None = None
        fresh = True
        if start_step is not None:
            started = await start_step(f"tool.start:{call.name}", _mark_started)
            nonce = started.get("nonce")
            fresh = nonce in _FRESH_STARTS
            _FRESH_STARTS.discard(nonce)  # type: ignore[arg-type]

        async def body() -> dict[str, Any]:
            if fresh:
                return await self._execute_raw(call, ctx)
            return await self._resolve_interrupted(call, ctx, started or {})

        return await body_step(f"tool:{call.name}", body)

    def _retry_policy(self, entry: Any) -> Any:
        # in a durable conversation the call's step retries, and records only the outcome
        return None if _STATE.get() is not None else super()._retry_policy(entry)

    async def _execute_raw(self, call: ToolExecutionRequest, ctx: _CallContext) -> dict[str, Any]:
        entry = self._functions.entry(call.name, ctx.entries)
        if entry is None:
            return {"kind": "exception", "message": f"no tool named {call.name!r} in this worker"}
        executor = entry.executor
        inner = executor.inner if isinstance(executor, _DurableExecutor) else executor
        if entry.card.retry is not None:  # transient failures are retried inside the step
            from ..service.service import _RetryingExecutor

            inner = _RetryingExecutor(inner, entry.card.retry, call.name)
        hooks = self._policies.tool_hooks if self._policies is not None else ()
        if hooks:  # the service's around-tool-call hooks, inside the call's step
            tool_ctx = ToolContext(call.name, call.id, ctx.memory_id, ctx.context, self.callbacks)
            inner = HookedExecutor(inner, hooks, tool_ctx)
        guardrails = super()._guardrails_of(entry)
        if guardrails:  # outside the hooks, as in the loop
            inner = self._guarded_executor(guardrails, entry, inner)
        state = _STATE.get()
        approval = state.approvals.get(call.id) if state is not None else current_approval()
        try:
            with use_approval(call.id, approval):
                result: ToolExecutionResult = await inner.aexecute_with_result(
                    call, ctx.memory_id, context=ctx.context, injected=ctx.injected
                )
        except Exception as e:
            cause = e if isinstance(e, ToolPause) else getattr(e, "cause", None)
            if isinstance(cause, ToolPause):  # the tool paused itself: recorded as such
                return encode_pause(cause)
            return encode_error(e)
        pause = _pause_of(result)
        return encode_tool_result(result) if pause is None else encode_pause(pause)

    async def _resolve_interrupted(
        self, call: ToolExecutionRequest, ctx: _CallContext, started: dict[str, Any]
    ) -> dict[str, Any]:
        at = started.get("at")
        info = UnknownOutcome(
            conversation_id=ctx.conversation_id,
            request=call,
            started_at=datetime.fromisoformat(at) if at else None,
            started_by=started.get("by"),
            memory_id=ctx.memory_id,
        )
        reconcile = self.reconcilers.get(call.name, self.reconcile)
        note = ""
        if reconcile is not None:
            try:
                verdict = reconcile(info)
                if inspect.isawaitable(verdict):
                    verdict = await verdict
            except Exception as e:
                logger.warning("reconciling %r failed: %s", call.name, e)
                note = f" (reconciliation failed: {type(e).__name__}: {e})"
            else:
                if verdict is RERUN:
                    return await self._execute_raw(call, ctx)
                if isinstance(verdict, ToolExecutionResult):
                    return encode_tool_result(verdict)
                if isinstance(verdict, str):
                    return encode_tool_result(ToolExecutionResult(text=verdict))
                if verdict is not None:
                    note = f" (reconciliation returned an unusable {type(verdict).__name__})"
        text = _unknown_text(call.name, at, info.started_by) + note
        if self.on_unknown_outcome is not None:
            try:
                out = self.on_unknown_outcome(info)
                if inspect.isawaitable(out):
                    await out
            except Exception:
                logger.exception("on_unknown_outcome failed for %r", call.name)
        await self._fire(TOOL_OUTCOME_UNKNOWN, outcome=info, memory_id=ctx.memory_id)
        return {"kind": "unknown", "message": text, "started_at": at, "started_by": info.started_by}


# process-level helpers ------------------------------------------------------------------------
def launch(
    database_url: str,
    *,
    app_name: str = "toolweave",
    executor_id: str | None = None,
    application_version: str | None = None,
    recover_executors: Sequence[str] = (),
    log_level: str | None = None,
    **config: Any,
) -> None:
    """Configure and launch DBOS in this process, then register the queues of every
    `DurableToolService` built so far. Build the services first: DBOS needs every workflow
    registered before launch. `executor_id` names this worker (a restarted worker with the
    same id recovers its own unfinished work); `recover_executors` takes over the unfinished
    work of other, dead, workers. Extra keyword arguments go into the `DBOSConfig`."""
    dbos_config: dict[str, Any] = {"name": app_name, "system_database_url": database_url}
    if executor_id is not None:
        dbos_config["executor_id"] = executor_id
    if application_version is not None:
        dbos_config["application_version"] = application_version
    if log_level is not None:
        dbos_config["log_level"] = log_level
    dbos_config.update(config)
    DBOS(config=dbos_config)  # type: ignore[arg-type]
    try:
        DBOS.launch()
    except Exception as e:
        if not _unreachable(e):
            raise
        with contextlib.suppress(Exception):
            DBOS.destroy()  # so a later launch() (say, once the database is up) starts clean
        raise _database_error(database_url, e) from e
    for service in list(_SERVICES.values()):
        service.register_queues()
    if recover_executors:
        recover(recover_executors)


def _unreachable(error: BaseException) -> bool:
    from sqlalchemy.exc import InterfaceError, OperationalError

    return isinstance(error, (OperationalError, InterfaceError, ConnectionError))


def _database_error(database_url: str, error: BaseException) -> DurableDatabaseError:
    url = _masked_url(database_url)
    cause = getattr(error, "orig", None) or error
    reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
    password = _password(database_url)
    if password:
        reason = reason.replace(password, "***")
    return DurableDatabaseError(
        f"cannot reach the PostgreSQL database of toolweave.durable at {url}: {reason}. "
        "Start PostgreSQL there (for example `docker run -d -p 5432:5432 "
        "-e POSTGRES_PASSWORD=... postgres:16`) or pass the URL of a running server to "
        "launch(); DBOS creates the database itself when the user may.",
        url=url,
    )


def _password(url: str) -> str | None:
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).password  # type: ignore[return-value]
    except (ArgumentError, ValueError):
        return None


async def _recorded_decisions(claims: list[str]) -> dict[str, dict[str, Any]]:
    """The first decision recorded for each of `claims` (decision-claim workflow ids) that
    has one."""
    rows = await DBOS.list_workflows_async(workflow_ids=claims, load_input=True, load_output=False)
    found: dict[str, dict[str, Any]] = {}
    for row in rows:
        inputs: Any = row.input
        args = inputs.get("args") if isinstance(inputs, Mapping) else None
        record = args[0] if args and isinstance(args[0], dict) else {}
        found[row.workflow_id] = record
    return found


def recover(executor_ids: Sequence[str]) -> list[str]:
    """Make the unfinished conversations and tool calls of the given (dead) workers
    runnable again by any live worker; returns their workflow ids. Never recover a worker
    that is still running: its work would run twice."""
    handles = DBOS._recover_pending_workflows(list(executor_ids))
    return [h.get_workflow_id() for h in handles]


def shutdown() -> None:
    """Stop DBOS in this process (running conversations stay pending and are recovered)."""
    DBOS.destroy()
    # DBOS made its (now stopped) thread pool the default executor of the loop the sync
    # faces reuse in this thread: later `asyncio.to_thread` calls there would fail
    reset_thread_loop()
