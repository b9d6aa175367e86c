"""AG-UI (the `ag-ui-protocol` package's types and encoder): a `ToolService` stream as AG-UI
events, and a `RunAgentInput` as toolweave messages and decisions.

A pause for approval ends the run with an interrupt outcome (one interrupt per call, its id
the call id), after a `STATE_SNAPSHOT` that puts the signed paused conversation under the
state's `toolweave.paused` key: the client sends its state back with the next run, whose
`resume` entries answer the interrupts (`{"approved": bool, "arguments"?: {...},
"reason"?: str}`). Deferred calls end the run as a success with `pendingToolCallIds`; the
next run's tool messages answer them. Progress and partial structured output are `CUSTOM`
events (`toolweave.progress`, `toolweave.output`); the final output is the run's `result`."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from ag_ui.core import (
    AssistantMessage,
    BaseEvent,
    CustomEvent,
    DeveloperMessage,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunAgentInput,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
    ToolMessage,
)
from ag_ui.core import SystemMessage as AgSystemMessage
from ag_ui.core import TokenUsage as AgTokenUsage
from ag_ui.core import UserMessage as AgUserMessage
from ag_ui.core.events import (
    Interrupt,
    RunFinishedInterruptOutcome,
    RunFinishedSuccessOutcome,
)
from pydantic import ValidationError

from ..chat import (
    AiMessage,
    ChatMessage,
    CompleteToolCall,
    PartialToolCall,
    ReasoningDelta,
    ResponseCompleted,
    SystemMessage,
    TextDelta,
    ToolExecutionResultMessage,
    UserMessage,
)
from ..execution import ToolExecutionRequest, ToolExecutionResult
from ..execution.content import ContentPart, FileContent, ImageContent, TextContent
from ..service import (
    ApprovalRequired,
    Approve,
    ChatCompleted,
    ChatStatus,
    Decision,
    DeferredResult,
    Deny,
    PartialOutput,
    ServiceEvent,
    ToolExecutionFinished,
    ToolProgress,
)
from ._ai_sdk import _jsonable
from ._common import (
    ChatInput,
    ProtocolRequestError,
    decision_outcomes,
    media,
    output_value,
    sign,
    unsign,
)

__all__ = ["STATE_KEY", "ag_ui_events", "ag_ui_request"]

STATE_KEY = "toolweave"
"""The key of the run state under which a paused conversation travels (`{"paused": ...}`)."""

APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "approved": {"type": "boolean"},
        "arguments": {"type": "object", "description": "Run with these arguments instead."},
        "reason": {"type": "string", "description": "Why not (sent to the model)."},
    },
    "required": ["approved"],
}
"""The answer an approval interrupt expects."""


def _result_content(result: ToolExecutionResult) -> str | list[dict[str, Any]]:
    parts = media(result)
    if not parts:
        value = output_value(result)
        return value if isinstance(value, str) else json.dumps(_jsonable(value), ensure_ascii=False)
    content: list[dict[str, Any]] = [{"type": "text", "text": result.result_text()}]
    for part in parts:
        kind = {"image": "image", "audio": "audio"}.get(part["type"], "document")
        url: str = part["url"]
        if url.startswith("data:") and ";base64," in url:
            source = {
                "type": "data",
                "value": url.split(";base64,", 1)[1],
                "mimeType": part["mediaType"],
            }
        else:
            source = {"type": "url", "value": url, "mimeType": part["mediaType"]}
        content.append({"type": kind, "source": source})
    return content


class _Translator:
    def __init__(self, run: RunAgentInput, key: str | bytes, chat_input: ChatInput | None) -> None:
        self.run = run
        self.key = key
        self.chat_input = chat_input
        self.message_id: str | None = None
        self.text_open = False
        self.reasoning_id: str | None = None
        self.by_index: dict[int, str] = {}
        self.buffered: dict[int, list[str]] = {}
        self.started: set[str] = set()
        self.ended: set[str] = set()
        self.results = 0
        self.state: Any = run.state

    def _turn(self) -> str:
        if self.message_id is None:
            self.message_id = f"msg_{uuid.uuid4().hex}"
        return self.message_id

    def _close(self, out: list[BaseEvent]) -> None:
        if self.text_open and self.message_id is not None:
            out.append(TextMessageEndEvent(message_id=self.message_id))
            self.text_open = False
        if self.reasoning_id is not None:
            out.append(ReasoningMessageEndEvent(message_id=self.reasoning_id))
            out.append(ReasoningEndEvent(message_id=self.reasoning_id))
            self.reasoning_id = None

    def _announce(self, request: ToolExecutionRequest, out: list[BaseEvent]) -> None:
        if request.id not in self.started:
            self.started.add(request.id)
            out.append(
                ToolCallStartEvent(
                    tool_call_id=request.id,
                    tool_call_name=request.name,
                    parent_message_id=self._turn(),
                )
            )
            out.append(ToolCallArgsEvent(tool_call_id=request.id, delta=request.arguments))
        if request.id not in self.ended:
            self.ended.add(request.id)
            out.append(ToolCallEndEvent(tool_call_id=request.id))

    def _result(self, call_id: str, content: Any, error: bool) -> ToolCallResultEvent:
        self.results += 1
        return ToolCallResultEvent(
            message_id=f"result_{call_id}_{self.results}",
            tool_call_id=call_id,
            content=content,
            role="tool",
            metadata={"isError": True} if error else None,
        )

    def _with_paused(self, paused: str | None) -> Any:
        base = dict(self.state) if isinstance(self.state, dict) else {}
        if paused is None:
            base.pop(STATE_KEY, None)
        else:
            base[STATE_KEY] = {"paused": paused}
        self.state = base
        return base

    def start(self) -> list[BaseEvent]:
        out: list[BaseEvent] = [
            RunStartedEvent(thread_id=self.run.thread_id, run_id=self.run.run_id)
        ]
        chat_input = self.chat_input
        if chat_input is not None and not isinstance(chat_input.conversation, list):
            for call in chat_input.conversation.pending:  # the client has these calls already
                self.started.add(call.id)
                self.ended.add(call.id)
            for request, decision in decision_outcomes(
                chat_input.conversation, chat_input.decisions
            ):
                if isinstance(decision, Deny):
                    out.append(self._result(request.id, decision.message, True))
                # a DeferredResult came as the client's own tool message
        return out

    def feed(self, event: ServiceEvent) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        if isinstance(event, TextDelta):
            if self.reasoning_id is not None:
                self._close(out)
            if not self.text_open:
                out.append(TextMessageStartEvent(message_id=self._turn(), role="assistant"))
                self.text_open = True
            out.append(TextMessageContentEvent(message_id=self._turn(), delta=event.text))
        elif isinstance(event, ReasoningDelta):
            if self.text_open:
                self._close(out)
            if self.reasoning_id is None:
                self.reasoning_id = f"reasoning_{uuid.uuid4().hex}"
                out.append(ReasoningStartEvent(message_id=self.reasoning_id))
                out.append(
                    ReasoningMessageStartEvent(message_id=self.reasoning_id, role="reasoning")
                )
            out.append(ReasoningMessageContentEvent(message_id=self.reasoning_id, delta=event.text))
        elif isinstance(event, PartialToolCall):
            self._close(out)
            call_id = self.by_index.get(event.index)
            if call_id is None:
                pending = self.buffered.setdefault(event.index, [])
                if event.arguments_delta:
                    pending.append(event.arguments_delta)
                if not (event.id and event.name):
                    return out
                call_id = self.by_index[event.index] = event.id
                self.started.add(call_id)
                out.append(
                    ToolCallStartEvent(
                        tool_call_id=call_id,
                        tool_call_name=event.name,
                        parent_message_id=self._turn(),
                    )
                )
                deltas = self.buffered.pop(event.index)
            else:
                deltas = [event.arguments_delta] if event.arguments_delta else []
            out.extend(ToolCallArgsEvent(tool_call_id=call_id, delta=d) for d in deltas)
        elif isinstance(event, CompleteToolCall):
            self._close(out)
            self._announce(event.request, out)
        elif isinstance(event, ResponseCompleted):
            self._close(out)
            for request in event.response.ai_message.tool_execution_requests:
                self._announce(request, out)
            self.by_index.clear()
            self.buffered.clear()
            self.message_id = None
        elif isinstance(event, ToolProgress):
            value = {
                "toolCallId": event.request.id,
                "progress": event.progress,
                "total": event.total,
                "message": event.message,
            }
            out.append(CustomEvent(name="toolweave.progress", value=value))
        elif isinstance(event, ToolExecutionFinished):
            execution = event.execution
            self._announce(execution.request, out)
            result = execution.result
            out.append(self._result(execution.request.id, _result_content(result), result.is_error))
        elif isinstance(event, PartialOutput):
            out.append(CustomEvent(name="toolweave.output", value=_jsonable(event.value)))
        elif isinstance(event, ApprovalRequired):
            self._close(out)
            for call in event.pending:
                self._announce(call.request, out)
            snapshot = self._with_paused(sign(event.state, self.key))
            out.append(StateSnapshotEvent(snapshot=snapshot))
        elif isinstance(event, ChatCompleted):
            self._close(out)
            done = event.result.status is ChatStatus.COMPLETED
            if done and isinstance(self.state, dict) and STATE_KEY in self.state:
                out.append(StateSnapshotEvent(snapshot=self._with_paused(None)))  # resumed
            out.append(self._finished(event))
        return out

    def _finished(self, event: ChatCompleted) -> RunFinishedEvent:
        result = event.result
        usage = None
        if result.token_usage is not None:
            u = result.token_usage
            usage = [
                AgTokenUsage(
                    input_tokens=u.input_tokens,
                    output_tokens=u.output_tokens,
                    total_tokens=u.total_tokens,
                    reasoning_tokens=u.reasoning_tokens,
                )
            ]
        outcome: Any = None
        if result.status is ChatStatus.PENDING:
            approvals = [c for c in result.pending if c.reason == "approval"]
            if approvals:
                interrupts = [
                    Interrupt(
                        id=c.id,
                        reason="tool_approval",
                        message=f"Run {c.tool_name} with {c.arguments}?",
                        tool_call_id=c.id,
                        response_schema=APPROVAL_SCHEMA,
                    )
                    for c in approvals
                ]
                outcome = RunFinishedInterruptOutcome(interrupts=interrupts)
            else:
                outcome = RunFinishedSuccessOutcome(
                    pending_tool_call_ids=[c.id for c in result.pending]
                )
        return RunFinishedEvent(
            thread_id=self.run.thread_id,
            run_id=self.run.run_id,
            result=_jsonable(result.output) if result.output is not None else None,
            outcome=outcome,
            usage=usage,
        )


async def ag_ui_events(
    events: AsyncIterable[ServiceEvent],
    run: RunAgentInput,
    *,
    key: str | bytes,
    chat_input: ChatInput | None = None,
) -> AsyncIterator[BaseEvent]:
    """The AG-UI events of a `ToolService` stream answering `run`.

    `key` signs the paused conversation put in the run state when calls wait for approval;
    `chat_input` is what `ag_ui_request` made of `run` (a resume reports the denied calls'
    results). An exception from `events` becomes a `RUN_ERROR`."""
    translator = _Translator(run, key, chat_input)
    for item in translator.start():
        yield item
    try:
        async for event in events:
            for item in translator.feed(event):
                yield item
    except Exception as e:  # the stream's failure is the run's error
        yield RunErrorEvent(message=str(e) or type(e).__name__, code=type(e).__name__)


# the request ------------------------------------------------------------------------------


def ag_ui_request(body: Any, *, key: str | bytes) -> tuple[RunAgentInput, ChatInput]:
    """A run request (a `RunAgentInput` as JSON data) and what it asks of the service.

    With `resume` entries or tool messages answering a paused conversation whose signed
    state is in the run state, the request resumes it (checked against `key`): a resolved
    entry with `approved: true` is `Approve` (with its `arguments`, when given), anything
    else `Deny` (its `reason`); a tool message for a deferred call is its `DeferredResult`.
    Otherwise the messages are the conversation."""
    try:
        run = RunAgentInput.model_validate(body)
    except ValidationError as e:
        raise ProtocolRequestError(f"not an AG-UI RunAgentInput: {e}") from None
    state = run.state if isinstance(run.state, dict) else {}
    paused = (
        state.get(STATE_KEY, {}).get("paused") if isinstance(state.get(STATE_KEY), dict) else None
    )
    if paused is not None:
        conversation = unsign(paused, key)
        decisions: dict[str, Decision] = {}
        pending = {c.id: c for c in conversation.pending}
        for entry in run.resume or []:
            call = pending.get(entry.interrupt_id)
            if call is None:
                continue
            payload = entry.payload if isinstance(entry.payload, dict) else {}
            if entry.status == "resolved" and payload.get("approved") is True:
                arguments = payload.get("arguments")
                decisions[call.id] = Approve(arguments if isinstance(arguments, dict) else None)
            else:
                reason = payload.get("reason")
                decisions[call.id] = Deny(reason) if isinstance(reason, str) and reason else Deny()
        for message in run.messages:
            if isinstance(message, ToolMessage):
                call = pending.get(message.tool_call_id)
                if call is not None and call.reason == "deferred":
                    decisions[call.id] = DeferredResult(
                        _text(message.content), is_error=message.error is not None
                    )
        if decisions:
            return run, ChatInput(conversation=conversation, decisions=decisions)
    return run, ChatInput(conversation=_to_messages(run))


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(getattr(p, "text", "") for p in content or [])


def _user_content(content: Any) -> list[ContentPart]:
    parts: list[ContentPart] = []
    for p in content:
        kind = getattr(p, "type", None)
        if kind == "text":
            parts.append(TextContent(text=p.text))
            continue
        source = getattr(p, "source", None)
        if source is None:
            continue
        mime = getattr(source, "mime_type", None) or "application/octet-stream"
        data = source.value if source.type == "data" else None
        url = source.value if source.type == "url" else None
        if kind == "image":
            parts.append(ImageContent(data=data, url=url, mime_type=mime))
        else:
            parts.append(FileContent(data=data, url=url, mime_type=mime))
    return parts


def _to_messages(run: RunAgentInput) -> list[ChatMessage]:
    names: dict[str, str] = {}
    out: list[ChatMessage] = []
    for message in run.messages:
        if isinstance(message, AgSystemMessage | DeveloperMessage):
            out.append(SystemMessage(message.content))
        elif isinstance(message, AgUserMessage):
            if isinstance(message.content, str):
                out.append(UserMessage(message.content, name=message.name))
            else:
                out.append(
                    UserMessage(contents=tuple(_user_content(message.content)), name=message.name)
                )
        elif isinstance(message, AssistantMessage):
            calls = [
                ToolExecutionRequest(id=c.id, name=c.function.name, arguments=c.function.arguments)
                for c in message.tool_calls or []
            ]
            names.update((c.id, c.name) for c in calls)
            if message.content or calls:
                out.append(AiMessage(message.content or None, tool_execution_requests=calls))
        elif isinstance(message, ToolMessage):
            out.append(
                ToolExecutionResultMessage(
                    id=message.tool_call_id,
                    tool_name=names.get(message.tool_call_id, ""),
                    text=_text(message.content) or (message.error or ""),
                    is_error=message.error is not None,
                )
            )
        # reasoning and activity messages are the UI's own: not sent to the model
    return out
