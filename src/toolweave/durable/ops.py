"""Operating durable conversations from any process: submit, wait, list, inspect, cancel,
resume, decide. Talks only to the system database (a `DBOSClient`), so it needs no workers
and never runs conversation code itself.

Decisions are recorded in a table of toolweave's own in that database
(`toolweave.decisions`, created on first use), keyed by conversation, pause and call: the
first decision for a call wins, whichever process sends it."""

from __future__ import annotations

import builtins
import contextlib
import functools
import getpass
import json
import math
import os
import socket
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any, Concatenate, ParamSpec, TypeVar

import sqlalchemy as sa
from dbos import DBOSClient, EnqueueOptions, WorkflowStatus

from ..chat.messages import ChatMessage
from ..chat.request import ChatRequestParameters
from ..errors import ToolArgumentsError
from ..service.approvals import (
    Approve,
    Decision,
    DeferredResult,
    Deny,
    InvalidConversationStateError,
    PendingCall,
    StandingDecision,
    check_decision_kind,
    check_standing_fields,
    decision_message,
    read_decision,
)
from ..service.result import ToolChatResult
from ..service.subagent import NestedPendingCall
from ._codec import decode_result
from .service import (
    CONVERSATION_WORKFLOW_PREFIX,
    DECISION_TOPIC,
    PENDING_EVENT,
    PROGRESS_EVENT,
    STANDING_EVENT,
    STANDING_TOPIC,
    ConversationFailedError,
    DurableDatabaseError,
    _masked_url,
    _password,
    _unreachable,
    conversation_payload,
)

__all__ = ["ConversationClient", "ConversationInfo", "DecisionConflictError", "StepRecord"]

_UNKNOWN_PREFIX = "The outcome of this call to "
_FINISHED = {"SUCCESS", "ERROR", "CANCELLED", "MAX_RECOVERY_ATTEMPTS_EXCEEDED"}


def _iso(ms: int | None) -> str | None:
    return None if ms is None else datetime.fromtimestamp(ms / 1000, UTC).isoformat()


@dataclass(slots=True)
class StepRecord:
    """One recorded operation of a conversation (a model call, a tool call, a child)."""

    step_id: int
    name: str
    started_at: str | None
    completed_at: str | None
    error: str | None = None
    child_workflow_id: str | None = None


@dataclass(slots=True)
class ConversationInfo:
    """What a conversation is doing; `to_json()` gives the JSON status document."""

    conversation_id: str
    service: str
    status: str
    created_at: str | None
    updated_at: str | None
    executor_id: str | None
    queue_name: str | None
    app_version: str | None
    recovery_attempts: int | None
    error: str | None = None
    final_text: str | None = None
    message_count: int | None = None
    tool_calls: int | None = None
    unknown_outcomes: list[str] = field(default_factory=list)
    messages: list[dict[str, Any]] | None = None
    steps: list[StepRecord] | None = None
    standing_decisions: list[dict[str, Any]] = field(default_factory=list)
    """The conversation's standing decisions, as last published by its worker."""

    @property
    def finished(self) -> bool:
        """Whether the conversation reached a final status."""
        return self.status in _FINISHED

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the `toolweave runs show --json` document)."""
        return asdict(self)


class DecisionConflictError(InvalidConversationStateError):
    """A decision for a call that was already decided otherwise: the first decision wins
    and this one was not sent. `decided` is the recorded decision, `decided_by` and
    `decided_at` say who recorded it and when (ISO 8601, UTC)."""

    def __init__(
        self,
        conversation_id: str,
        call_id: str,
        decided: Decision,
        decided_by: str | None,
        decided_at: str | None,
    ) -> None:
        who = f" by {decided_by}" if decided_by else ""
        when = f" at {decided_at}" if decided_at else ""
        super().__init__(
            f"call {call_id!r} of conversation {conversation_id!r} was already decided"
            f"{who}{when}: {_describe(decided)}; the first decision stands and this one was "
            "not sent",
            details={
                "conversation_id": conversation_id,
                "call_id": call_id,
                "decided_by": decided_by,
                "decided_at": decided_at,
            },
        )
        self.conversation_id = conversation_id
        self.call_id = call_id
        self.decided = decided
        self.decided_by = decided_by
        self.decided_at = decided_at


def _describe(decision: Decision) -> str:
    if isinstance(decision, Approve):
        if decision.arguments is None:
            return "approved"
        arguments = decision.arguments
        text = arguments if isinstance(arguments, str) else json.dumps(dict(arguments))
        return f"approved with arguments {text}"
    if isinstance(decision, Deny):
        return f"denied ({decision.message!r})"
    return "answered with a deferred result"


def _pending_call(data: Any) -> PendingCall:
    """A published pending call: a `NestedPendingCall` when it waits in a sub-conversation
    (it has a `path`)."""
    nested = isinstance(data, Mapping) and data.get("path")
    return (NestedPendingCall if nested else PendingCall).model_validate(data)


def _check_decision(call: PendingCall, decision: Any) -> None:
    """`decision` fits `call` (its kind and its fields), before anything is recorded."""
    check_decision_kind(call, decision)
    if isinstance(decision, Approve | Deny):
        check_standing_fields(call.id, decision)
        if callable(decision.when):
            raise TypeError(
                f"the standing decision for {call.id!r} is limited by a function, which "
                "cannot reach the worker: limit it with an argument pattern (when={...})"
            )
    if isinstance(decision, Approve) and decision.arguments is not None:
        arguments = decision.arguments
        if isinstance(arguments, str):
            try:
                value = json.loads(arguments)
            except ValueError as e:
                raise ToolArgumentsError(
                    f"Approve.arguments for {call.id!r} is not JSON: {e}", tool_name=call.tool_name
                ) from e
            if not isinstance(value, dict):
                raise ToolArgumentsError(
                    f"Approve.arguments for {call.id!r} must be a JSON object, not a "
                    f"{type(value).__name__}",
                    tool_name=call.tool_name,
                )
        elif isinstance(arguments, Mapping):
            try:
                json.dumps(dict(arguments))
            except (TypeError, ValueError) as e:
                raise TypeError(f"Approve.arguments for {call.id!r} is not JSON data: {e}") from e
        else:
            raise TypeError(
                f"Approve.arguments for {call.id!r} is a {type(arguments).__name__}: give a "
                "dict or JSON text"
            )
    elif isinstance(decision, Deny) and not isinstance(decision.message, str):
        raise TypeError(f"Deny.message for {call.id!r} must be a str")
    elif isinstance(decision, DeferredResult) and not isinstance(decision.text, str):
        raise TypeError(f"DeferredResult.text for {call.id!r} must be a str")


def _content(call_id: str, decision: Decision) -> str:
    """The decision as canonical JSON: equal texts are the same decision (arguments given
    as text or as a dict compare by value)."""
    message = decision_message(call_id, decision)
    if isinstance(message.get("arguments"), str):
        message["arguments"] = json.loads(message["arguments"])
    return json.dumps(message, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _who(source: str) -> str:
    try:
        user = getpass.getuser()
    except Exception:  # no user name in this environment (no passwd entry, no LOGNAME)
        user = f"uid {os.getuid()}"
    return f"{source} ({user}@{socket.gethostname()}, pid {os.getpid()})"


_DECISIONS_LOCK = 0x746F6F6C77656176  # pg_advisory_xact_lock key: "toolweav"


def _decisions_table(metadata: sa.MetaData, schema: str | None) -> sa.Table:
    return sa.Table(
        "decisions",
        metadata,
        sa.Column("conversation_id", sa.Text, primary_key=True),
        sa.Column("pause", sa.BigInteger, primary_key=True),
        sa.Column("call_id", sa.Text, primary_key=True),
        sa.Column("decision", sa.Text, nullable=False),
        sa.Column("decided_by", sa.Text),
        sa.Column("decided_at", sa.Text),
        sa.Column("sent", sa.Boolean, nullable=False, default=False),
        schema=schema,
    )


def _summarise(info: ConversationInfo, messages: list[dict[str, Any]] | None) -> None:
    if messages is None:
        return
    info.messages = messages
    info.message_count = len(messages)
    info.tool_calls = sum(1 for m in messages if m.get("type") == "tool_result")
    info.unknown_outcomes = [
        str(m.get("id"))
        for m in messages
        if m.get("type") == "tool_result"
        and m.get("is_error")
        and str(m.get("text", "")).startswith(_UNKNOWN_PREFIX)
    ]
    last = messages[-1] if messages else None
    if last is not None and last.get("type") == "ai" and not last.get("tool_execution_requests"):
        info.final_text = last.get("text")


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _bounded(
    method: Callable[Concatenate[ConversationClient, _P], _R],
) -> Callable[Concatenate[ConversationClient, _P], _R]:
    """Run `method` with unreachable-database errors raised as `DurableDatabaseError`."""

    @functools.wraps(method)
    def wrapper(self: ConversationClient, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._db():
            return method(self, *args, **kwargs)

    return wrapper


class ConversationClient:
    """Operations on the conversations recorded in `database_url` (see module docstring).

    `app_name` must match the `app_name` the workers were launched with. Every database
    operation is bounded: opening a connection takes at most `connect_timeout` seconds
    (PostgreSQL's `connect_timeout`: TCP, handshake and login; at least 2), a statement at
    most `statement_timeout` seconds (the server's `statement_timeout`), and a lost
    connection is not retried forever: a database that cannot be reached, or accepts the
    connection and never answers, is a `DurableDatabaseError`.
    """

    def __init__(
        self,
        database_url: str,
        *,
        app_name: str = "toolweave",
        connect_timeout: float = 10.0,
        statement_timeout: float = 30.0,
    ) -> None:
        self.app_name = app_name
        self._url = database_url
        self._connect_timeout = connect_timeout
        self._engine = _engine(database_url, connect_timeout, statement_timeout)
        postgres = self._engine.dialect.name == "postgresql"
        self._decisions = _decisions_table(sa.MetaData(), "toolweave" if postgres else None)
        self._decisions_ready = False
        try:
            with self._db():
                self._client = DBOSClient(
                    system_database_engine=self._engine,
                    application_name=app_name,
                    retry_connection_errors=False,
                )
        except BaseException:
            self._engine.dispose()
            raise

    @contextlib.contextmanager
    def _db(self) -> Iterator[None]:
        """Database errors that mean "unreachable" as a `DurableDatabaseError`."""
        try:
            yield
        except (sa.exc.TimeoutError, sa.exc.OperationalError, sa.exc.InterfaceError) as e:
            raise self._database_error(e) from e
        except Exception as e:
            if _unreachable(e):
                raise self._database_error(e) from e
            raise

    def _database_error(self, error: BaseException) -> DurableDatabaseError:
        url = _masked_url(self._url)
        cause = getattr(error, "orig", None) or error
        reason = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        password = _password(self._url)
        if password:
            reason = reason.replace(password, "***")
        return DurableDatabaseError(
            f"the PostgreSQL database of toolweave.durable at {url} could not be used: {reason} "
            f"(connections are given {self._connect_timeout:g}s; is the server running and "
            "answering there?)",
            url=url,
        )

    def close(self) -> None:
        """Release the database connections."""
        try:
            self._client.destroy()
        finally:
            self._engine.dispose()

    def __enter__(self) -> ConversationClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # submitting -----------------------------------------------------------------------------
    @_bounded
    def submit(
        self,
        service: str,
        messages: Sequence[ChatMessage] | str,
        *,
        queue: str,
        conversation_id: str | None = None,
        parameters: ChatRequestParameters | None = None,
        model: str = "default",
        memory_id: Any = None,
        context: Any = None,
        injected: Mapping[str, Any] | None = None,
        standing_decisions: Sequence[StandingDecision] | None = None,
    ) -> str:
        """Enqueue a conversation of the service named `service` on `queue` (the
        service's conversation queue); a worker runs it. Submitting an existing id
        attaches to it and never runs it twice. Returns the conversation id.
        `standing_decisions` (an earlier turn's `result.standing_decisions`) stand in it
        from its start."""
        payload = conversation_payload(
            messages,
            parameters=parameters,
            model=model,
            memory_id=memory_id,
            context=context,
            injected=injected,
            standing_decisions=standing_decisions,
        )
        options: EnqueueOptions = {
            "workflow_name": CONVERSATION_WORKFLOW_PREFIX + service,
            "queue_name": queue,
        }
        if conversation_id is not None:
            options["workflow_id"] = conversation_id
        handle: Any = self._client.enqueue(options, payload)
        return str(handle.get_workflow_id())

    @_bounded
    def result(self, conversation_id: str, timeout: float = 60.0) -> ToolChatResult:
        """Wait (at most `timeout` seconds) for the conversation and return its result;
        raises `ConversationFailedError` if it failed, `TimeoutError` if still running."""
        deadline = time.monotonic() + timeout
        delay = 0.05
        while True:
            status = self._client.retrieve_workflow(conversation_id).get_status()
            if status.status == "SUCCESS":
                output: dict[str, Any] = status.output or {}
                return decode_result(output)
            if status.status in _FINISHED:
                error = status.error
                if isinstance(error, ConversationFailedError):
                    raise error
                raise ConversationFailedError(
                    conversation_id, status.status, str(error) if error else status.status
                )
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"conversation {conversation_id!r} is still {status.status} after {timeout}s"
                )
            time.sleep(delay)
            delay = min(delay * 1.5, 0.5)

    # inspecting -----------------------------------------------------------------------------
    def _info(self, status: WorkflowStatus) -> ConversationInfo:
        error = status.error
        return ConversationInfo(
            conversation_id=status.workflow_id,
            service=status.name.removeprefix(CONVERSATION_WORKFLOW_PREFIX),
            status=str(status.status),
            created_at=_iso(status.created_at),
            updated_at=_iso(status.updated_at),
            executor_id=status.executor_id,
            queue_name=status.queue_name,
            app_version=status.app_version,
            recovery_attempts=status.recovery_attempts,
            error=None if error is None else str(error),
        )

    @_bounded
    def list(
        self,
        *,
        status: str | Sequence[str] | None = None,
        service: str | None = None,
        limit: int = 50,
    ) -> list[ConversationInfo]:
        """The most recent conversations (newest first), optionally by status/service."""
        names = None if service is None else [CONVERSATION_WORKFLOW_PREFIX + service]
        rows = self._client.list_workflows(
            status=list(status)
            if isinstance(status, Sequence) and not isinstance(status, str)
            else status,
            name=names,
            sort_desc=True,
            load_input=False,
            load_output=False,
        )
        found = [r for r in rows if r.name.startswith(CONVERSATION_WORKFLOW_PREFIX)]
        return [self._info(r) for r in found[:limit]]

    @_bounded
    def show(self, conversation_id: str, *, steps: bool = True) -> ConversationInfo:
        """One conversation: status, history so far (or final), and its recorded steps."""
        rows = self._client.list_workflows(workflow_ids=[conversation_id])
        if not rows or not rows[0].name.startswith(CONVERSATION_WORKFLOW_PREFIX):
            raise KeyError(f"no conversation with id {conversation_id!r}")
        status = rows[0]
        info = self._info(status)
        messages: list[dict[str, Any]] | None = None
        if status.status == "SUCCESS" and isinstance(status.output, dict):
            messages = status.output.get("messages")
        elif isinstance(status.error, ConversationFailedError):
            messages = status.error.partial_messages
        if messages is None:
            progress = self._client.get_event(conversation_id, PROGRESS_EVENT, timeout_seconds=0)
            if isinstance(progress, dict):
                messages = progress.get("messages")
        if messages is None and status.input is not None and status.input.get("args"):
            payload = status.input["args"][0]
            if isinstance(payload, dict):
                messages = payload.get("messages")
        _summarise(info, messages)
        info.standing_decisions = [
            s.model_dump(mode="json") for s in self._standing(conversation_id)
        ]
        if steps:
            info.steps = [
                StepRecord(
                    step_id=s["function_id"],
                    name=s["function_name"],
                    started_at=_iso(s.get("started_at_epoch_ms")),
                    completed_at=_iso(s.get("completed_at_epoch_ms")),
                    error=None if s.get("error") is None else str(s["error"]),
                    child_workflow_id=s.get("child_workflow_id"),
                )
                for s in self._client.list_workflow_steps(conversation_id, load_output=False)
            ]
        return info

    # controlling ----------------------------------------------------------------------------
    @_bounded
    def cancel(self, conversation_id: str) -> None:
        """Cancel the conversation and its queued tool calls. A step already running
        finishes (its result is kept); nothing new starts."""
        self._client.cancel_workflow(conversation_id, cancel_children=True)

    @_bounded
    def resume(self, conversation_id: str) -> None:
        """Resume a cancelled or failed conversation from its last recorded step; a live
        worker picks it up."""
        self._client.resume_workflow(conversation_id)

    # approvals ------------------------------------------------------------------------------
    @_bounded
    def pending(self, conversation_id: str | None = None) -> builtins.list[tuple[str, PendingCall]]:
        """The calls waiting for a decision, as (conversation id, call): of one
        conversation, or of every running one."""
        if conversation_id is not None:
            ids = [conversation_id]
        else:
            rows = self._client.list_workflows(
                status="PENDING", load_input=False, load_output=False
            )
            ids = [r.workflow_id for r in rows if r.name.startswith(CONVERSATION_WORKFLOW_PREFIX)]
        out: builtins.list[tuple[str, PendingCall]] = []
        for cid in ids:
            waiting = self._client.get_event(cid, PENDING_EVENT, timeout_seconds=0)
            for call in waiting or ():
                out.append((cid, _pending_call(call)))
        return out

    @_bounded
    def standing(self, conversation_id: str) -> builtins.list[StandingDecision]:
        """The standing decisions of a durable conversation (`Approve(always=True)`,
        `Deny(always=True)`), as its worker last published them."""
        return self._standing(conversation_id)

    def _standing(self, conversation_id: str) -> builtins.list[StandingDecision]:
        found = self._client.get_event(conversation_id, STANDING_EVENT, timeout_seconds=0)
        out: builtins.list[StandingDecision] = []
        for item in found or ():
            try:
                out.append(StandingDecision.model_validate(item))
            except ValueError:
                continue
        return out

    @_bounded
    def revoke(self, conversation_id: str, which: str) -> StandingDecision:
        """Revoke the standing decision `which` (its id) of a durable conversation: the
        conversation drops it before it next gates a call. Returns it; `KeyError` when the
        conversation has no such standing decision."""
        found = next((s for s in self._standing(conversation_id) if s.id == which), None)
        if found is None:
            raise KeyError(f"conversation {conversation_id!r} has no standing decision {which!r}")
        self._client.send(
            conversation_id,
            {"revoke": which},
            STANDING_TOPIC,
            idempotency_key=f"{conversation_id}:revoke:{which}:{uuid.uuid4().hex}",
        )
        return found

    def _waiting(self, conversation_id: str) -> builtins.list[tuple[PendingCall, int]]:
        """The calls `conversation_id` waits for, each with the pause it belongs to (-1
        when the worker did not say)."""
        waiting = self._client.get_event(conversation_id, PENDING_EVENT, timeout_seconds=0)
        out: builtins.list[tuple[PendingCall, int]] = []
        for call in waiting or ():
            pause = call.get("pause") if isinstance(call, Mapping) else None
            out.append((_pending_call(call), pause if isinstance(pause, int) else -1))
        return out

    @_bounded
    def decide(
        self,
        conversation_id: str,
        call_id: str,
        decision: Decision,
        *,
        decided_by: str = "ConversationClient.decide",
    ) -> bool:
        """Send `decision` for the waiting call `call_id` of a durable conversation (the
        worker running it, or the one that recovers it, goes on).

        The first decision for a call wins, across processes: it is recorded (with
        `decided_by`, the user, host and time) before it is sent. The same decision again
        is a no-op and returns False; a different one raises `DecisionConflictError` and is
        not sent. Returns True when this call recorded the decision. A call that is not
        waiting (and was never decided) is an `InvalidConversationStateError`; a decision
        that does not fit the call (`DeferredResult` for an approval, `Approve` for a
        deferred call, arguments that are not a JSON object) is refused before anything
        is recorded."""
        waiting = {call.id: (call, pause) for call, pause in self._waiting(conversation_id)}
        self._ensure_decisions()
        found = waiting.get(call_id)
        if found is None:
            prior = self._recorded(conversation_id, call_id, None)
            if prior is None:
                raise InvalidConversationStateError(
                    f"conversation {conversation_id!r} has no call {call_id!r} waiting for "
                    f"a decision (waiting: {', '.join(waiting) or 'none'})"
                )
            return self._repeat(conversation_id, call_id, decision, prior)
        call, pause = found
        _check_decision(call, decision)
        content = _content(call_id, decision)
        recorded = self._record(conversation_id, pause, call_id, content, _who(decided_by))
        if not recorded:
            prior = self._recorded(conversation_id, call_id, pause)
            assert prior is not None  # rows are never deleted
            self._repeat(conversation_id, call_id, decision, prior)
            if prior["sent"]:
                return False
            # the same decision, recorded by a process that may have stopped before
            # sending it: send it (again); the idempotency key makes a second copy a no-op
        message = decision_message(call_id, decision)
        key = f"{conversation_id}:{call_id}"
        if pause >= 0:  # -1: a worker that does not publish its pause
            message["pause"] = pause
            key = f"{conversation_id}:{pause}:{call_id}"
        self._client.send(conversation_id, message, DECISION_TOPIC, idempotency_key=key)
        with self._engine.begin() as conn:
            conn.execute(
                self._decisions.update()
                .where(
                    self._decisions.c.conversation_id == conversation_id,
                    self._decisions.c.pause == pause,
                    self._decisions.c.call_id == call_id,
                )
                .values(sent=True)
            )
        return recorded

    def _repeat(
        self, conversation_id: str, call_id: str, decision: Any, prior: Mapping[str, Any]
    ) -> bool:
        """False if `decision` is the recorded one; raises `DecisionConflictError` if not."""
        if not isinstance(decision, Approve | Deny | DeferredResult):
            raise TypeError(
                f"the decision for {call_id!r} is a {type(decision).__name__}: use Approve, "
                "Deny or DeferredResult"
            )
        try:
            same = _content(call_id, decision) == prior["decision"]
        except (TypeError, ValueError):
            same = False
        if same:
            return False
        decided = read_decision(json.loads(prior["decision"]))
        assert decided is not None
        raise DecisionConflictError(
            conversation_id, call_id, decided[1], prior["decided_by"], prior["decided_at"]
        )

    def _ensure_decisions(self) -> None:
        if self._decisions_ready:
            return
        with self._engine.begin() as conn:
            if self._engine.dialect.name == "postgresql":
                # concurrent CREATE ... IF NOT EXISTS can still collide in the catalog
                conn.execute(
                    sa.text("SELECT pg_advisory_xact_lock(:key)"), {"key": _DECISIONS_LOCK}
                )
                conn.execute(sa.text("CREATE SCHEMA IF NOT EXISTS toolweave"))
            self._decisions.create(conn, checkfirst=True)
        self._decisions_ready = True

    def _record(
        self, conversation_id: str, pause: int, call_id: str, content: str, by: str
    ) -> bool:
        """Insert the decision; False when one is recorded already (the key is unique)."""
        try:
            with self._engine.begin() as conn:
                conn.execute(
                    self._decisions.insert().values(
                        conversation_id=conversation_id,
                        pause=pause,
                        call_id=call_id,
                        decision=content,
                        decided_by=by,
                        decided_at=datetime.now(UTC).isoformat(timespec="seconds"),
                        sent=False,
                    )
                )
        except sa.exc.IntegrityError:
            return False
        return True

    def _recorded(
        self, conversation_id: str, call_id: str, pause: int | None
    ) -> dict[str, Any] | None:
        """The recorded decision for the call (of `pause`, or its latest pause)."""
        table = self._decisions
        query = sa.select(table).where(
            table.c.conversation_id == conversation_id, table.c.call_id == call_id
        )
        if pause is not None:
            query = query.where(table.c.pause == pause)
        query = query.order_by(table.c.pause.desc()).limit(1)
        with self._engine.connect() as conn:
            row = conn.execute(query).mappings().first()
        return None if row is None else dict(row)


def _engine(database_url: str, connect_timeout: float, statement_timeout: float) -> sa.Engine:
    """The system database's engine, every connection and statement bounded in time."""
    url = sa.make_url(database_url)
    if url.get_backend_name() != "postgresql":
        return sa.create_engine(url)
    url = url.set(drivername="postgresql+psycopg")
    settings = (
        f"-c statement_timeout={max(1, int(statement_timeout * 1000))} "
        "-c idle_in_transaction_session_timeout=60000"
    )
    options = url.query.get("options")
    if isinstance(options, str) and options:
        settings = f"{options} {settings}"
    return sa.create_engine(
        url,
        connect_args={
            "application_name": "toolweave_client",
            "connect_timeout": max(2, math.ceil(connect_timeout)),
            "options": settings,
        },
        pool_size=5,
        max_overflow=0,
        pool_timeout=connect_timeout,
        pool_pre_ping=True,
    )
