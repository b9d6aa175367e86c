"""Operating durable conversations from any process: submit, wait, list, inspect, cancel,
resume. Talks only to the system database (a `DBOSClient`), so it needs no workers and
never runs conversation code itself."""

from __future__ import annotations

import builtins
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from dbos import DBOSClient, EnqueueOptions, WorkflowStatus

from ..chat.messages import ChatMessage
from ..chat.request import ChatRequestParameters
from ..service.approvals import (
    Decision,
    DeferredResult,
    Deny,
    InvalidConversationStateError,
    PendingCall,
    decision_message,
)
from ..service.result import ToolChatResult
from ._codec import decode_result
from .service import (
    CONVERSATION_WORKFLOW_PREFIX,
    DECISION_TOPIC,
    PENDING_EVENT,
    PROGRESS_EVENT,
    ConversationFailedError,
    conversation_payload,
)

__all__ = ["ConversationClient", "ConversationInfo", "StepRecord"]

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

    @property
    def finished(self) -> bool:
        """Whether the conversation reached a final status."""
        return self.status in _FINISHED

    def to_json(self) -> dict[str, Any]:
        """A JSON-ready dict (the `toolweave runs show --json` document)."""
        return asdict(self)


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


class ConversationClient:
    """Operations on the conversations recorded in `database_url` (see module docstring).

    `app_name` must match the `app_name` the workers were launched with.
    """

    def __init__(self, database_url: str, *, app_name: str = "toolweave") -> None:
        self.app_name = app_name
        self._client = DBOSClient(system_database_url=database_url, application_name=app_name)

    def close(self) -> None:
        """Release the database connections."""
        self._client.destroy()

    def __enter__(self) -> ConversationClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # submitting -----------------------------------------------------------------------------
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
    ) -> str:
        """Enqueue a conversation of the service named `service` on `queue` (the
        service's conversation queue); a worker runs it. Submitting an existing id
        attaches to it and never runs it twice. Returns the conversation id."""
        payload = conversation_payload(
            messages,
            parameters=parameters,
            model=model,
            memory_id=memory_id,
            context=context,
            injected=injected,
        )
        options: EnqueueOptions = {
            "workflow_name": CONVERSATION_WORKFLOW_PREFIX + service,
            "queue_name": queue,
        }
        if conversation_id is not None:
            options["workflow_id"] = conversation_id
        handle: Any = self._client.enqueue(options, payload)
        return str(handle.get_workflow_id())

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
    def cancel(self, conversation_id: str) -> None:
        """Cancel the conversation and its queued tool calls. A step already running
        finishes (its result is kept); nothing new starts."""
        self._client.cancel_workflow(conversation_id, cancel_children=True)

    def resume(self, conversation_id: str) -> None:
        """Resume a cancelled or failed conversation from its last recorded step; a live
        worker picks it up."""
        self._client.resume_workflow(conversation_id)

    # approvals ------------------------------------------------------------------------------
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
                out.append((cid, PendingCall.model_validate(call)))
        return out

    def decide(self, conversation_id: str, call_id: str, decision: Decision) -> None:
        """Send `decision` for the waiting call `call_id` of a durable conversation (the
        worker running it, or the one that recovers it, goes on). A call that is not
        waiting is an `InvalidConversationStateError`."""
        waiting = {call.id: call for cid, call in self.pending(conversation_id)}
        call = waiting.get(call_id)
        if call is None:
            raise InvalidConversationStateError(
                f"conversation {conversation_id!r} has no call {call_id!r} waiting for a "
                f"decision (waiting: {', '.join(waiting) or 'none'})"
            )
        if call.reason == "deferred" and not isinstance(decision, DeferredResult | Deny):
            raise InvalidConversationStateError(
                f"{call_id!r} is a deferred call: answer it with DeferredResult (or Deny)"
            )
        self._client.send(
            conversation_id,
            decision_message(call_id, decision),
            DECISION_TOPIC,
            idempotency_key=f"{conversation_id}:{call_id}",
        )
