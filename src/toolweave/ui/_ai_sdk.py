"""The Vercel AI SDK's UI message stream (`x-vercel-ai-ui-message-stream: v1`): a
`ToolService` stream as its chunks, and a `useChat` request as toolweave messages and
decisions.

Chunk shapes follow `UIMessageChunk` of the `ai` package (7.x); tool calls are static tool
parts (`tool-<name>`). toolweave's own data parts: `data-toolweave-progress` (a tool's
progress, one part per call, updated in place), `data-toolweave-output` (the structured
output) and `data-toolweave-state` (the signed paused conversation, sent back by the client
with the approval answers)."""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Mapping
from typing import Any

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
from ..chat.response import FinishReason
from ..execution import ToolExecutionRequest
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
from ..service.approvals import StandingDecision, sign_standing, verify_standing
from ._common import (
    ChatInput,
    ProtocolRequestError,
    decision_outcomes,
    output_value,
    parse_arguments,
    sign,
    unsign,
)

__all__ = [
    "AI_SDK_HEADERS",
    "STANDING_PART",
    "STATE_PART",
    "ai_sdk_chunks",
    "ai_sdk_request",
    "ai_sdk_sse",
]

AI_SDK_HEADERS = {
    "content-type": "text/event-stream",
    "cache-control": "no-cache",
    "x-vercel-ai-ui-message-stream": "v1",
    "x-accel-buffering": "no",
}
"""The response headers of a UI message stream."""

STATE_PART = "data-toolweave-state"
STANDING_PART = "data-toolweave-standing"
"""The data part carrying a completed turn's standing decisions, signed and bound to the
chat id: sent back, they stand in the next turn."""
"""The data part holding the signed paused conversation."""

_FINISH = {
    FinishReason.STOP: "stop",
    FinishReason.LENGTH: "length",
    FinishReason.TOOL_EXECUTION: "tool-calls",
    FinishReason.CONTENT_FILTER: "content-filter",
    FinishReason.OTHER: "other",
}


class _Translator:
    """Turns service events into UI message chunks, one event at a time."""

    def __init__(
        self, key: str | bytes, message_id: str | None, chat_id: str | None = None
    ) -> None:
        self.key = key
        self.chat_id = chat_id
        self.message_id = message_id or f"msg_{uuid.uuid4().hex}"
        self.step_open = False
        self.turn_open = False
        self.text_id: str | None = None
        self.reasoning_id: str | None = None
        self.by_index: dict[int, str] = {}
        self.buffered: dict[int, list[str]] = {}
        self.started: set[str] = set()
        self.available: set[str] = set()
        self.parts = 0
        self.stream_id = uuid.uuid4().hex[:8]

    def _id(self, kind: str) -> str:
        # unique across streams: a resumed stream adds parts to the message of an earlier one
        self.parts += 1
        return f"{kind}_{self.stream_id}_{self.parts}"

    def _close_text(self, out: list[dict[str, Any]]) -> None:
        if self.text_id is not None:
            out.append({"type": "text-end", "id": self.text_id})
            self.text_id = None
        if self.reasoning_id is not None:
            out.append({"type": "reasoning-end", "id": self.reasoning_id})
            self.reasoning_id = None

    def _model_turn(self, out: list[dict[str, Any]]) -> None:
        if self.turn_open:
            return
        if self.step_open:
            out.append({"type": "finish-step"})
        out.append({"type": "start-step"})
        self.step_open = self.turn_open = True

    def _announce(self, request: ToolExecutionRequest, out: list[dict[str, Any]]) -> None:
        if request.id not in self.started:
            self.started.add(request.id)
            out.append(
                {"type": "tool-input-start", "toolCallId": request.id, "toolName": request.name}
            )
        if request.id not in self.available:
            self.available.add(request.id)
            out.append(
                {
                    "type": "tool-input-available",
                    "toolCallId": request.id,
                    "toolName": request.name,
                    "input": parse_arguments(request.arguments),
                }
            )

    def start(self, chat_input: ChatInput | None) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = [{"type": "start", "messageId": self.message_id}]
        if chat_input is not None and not isinstance(chat_input.conversation, list):
            self.step_open = True  # the continued message's step
            for call in chat_input.conversation.pending:  # the client has these calls already
                self.started.add(call.id)
                self.available.add(call.id)
            for request, decision in decision_outcomes(
                chat_input.conversation, chat_input.decisions
            ):
                if isinstance(decision, Deny):
                    out.append({"type": "tool-output-denied", "toolCallId": request.id})
                elif isinstance(decision, DeferredResult):
                    kind = "tool-output-error" if decision.is_error else "tool-output-available"
                    field = "errorText" if decision.is_error else "output"
                    out.append({"type": kind, "toolCallId": request.id, field: decision.text})
        return out

    def feed(self, event: ServiceEvent) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        if isinstance(event, TextDelta):
            self._model_turn(out)
            if self.reasoning_id is not None:
                out.append({"type": "reasoning-end", "id": self.reasoning_id})
                self.reasoning_id = None
            if self.text_id is None:
                self.text_id = self._id("text")
                out.append({"type": "text-start", "id": self.text_id})
            out.append({"type": "text-delta", "id": self.text_id, "delta": event.text})
        elif isinstance(event, ReasoningDelta):
            self._model_turn(out)
            if self.text_id is not None:
                out.append({"type": "text-end", "id": self.text_id})
                self.text_id = None
            if self.reasoning_id is None:
                self.reasoning_id = self._id("reasoning")
                out.append({"type": "reasoning-start", "id": self.reasoning_id})
            out.append({"type": "reasoning-delta", "id": self.reasoning_id, "delta": event.text})
        elif isinstance(event, PartialToolCall):
            self._model_turn(out)
            self._close_text(out)
            call_id = self.by_index.get(event.index)
            if call_id is None:
                pending = self.buffered.setdefault(event.index, [])
                if event.arguments_delta:
                    pending.append(event.arguments_delta)
                if not (event.id and event.name):
                    return out  # announced once its id and name are known
                call_id = self.by_index[event.index] = event.id
                self.started.add(call_id)
                out.append(
                    {"type": "tool-input-start", "toolCallId": call_id, "toolName": event.name}
                )
                deltas = self.buffered.pop(event.index)
            else:
                deltas = [event.arguments_delta] if event.arguments_delta else []
            for delta in deltas:
                out.append(
                    {"type": "tool-input-delta", "toolCallId": call_id, "inputTextDelta": delta}
                )
        elif isinstance(event, CompleteToolCall):
            self._model_turn(out)
            self._close_text(out)
            self._announce(event.request, out)
        elif isinstance(event, ResponseCompleted):
            self._model_turn(out)
            self._close_text(out)
            for request in event.response.ai_message.tool_execution_requests:
                self._announce(request, out)
            self.by_index.clear()
            self.buffered.clear()
            self.turn_open = False
        elif isinstance(event, ToolProgress):
            data = {
                "toolCallId": event.request.id,
                "progress": event.progress,
                "total": event.total,
                "message": event.message,
            }
            out.append(
                {
                    "type": "data-toolweave-progress",
                    "id": f"progress_{event.request.id}",
                    "data": data,
                }
            )
        elif isinstance(event, ToolExecutionFinished):
            execution = event.execution
            self._announce(execution.request, out)
            result = execution.result
            if result.is_error:
                out.append(
                    {
                        "type": "tool-output-error",
                        "toolCallId": execution.request.id,
                        "errorText": result.result_text(),
                    }
                )
            else:
                out.append(
                    {
                        "type": "tool-output-available",
                        "toolCallId": execution.request.id,
                        "output": _jsonable(output_value(result)),
                    }
                )
        elif isinstance(event, PartialOutput):
            out.append(
                {"type": "data-toolweave-output", "id": "output", "data": _jsonable(event.value)}
            )
        elif isinstance(event, ApprovalRequired):
            self._close_text(out)
            for call in event.pending:
                self._announce(call.request, out)
                if call.reason == "approval":
                    out.append(
                        {
                            "type": "tool-approval-request",
                            "approvalId": call.id,
                            "toolCallId": call.id,
                        }
                    )
            out.append(
                {"type": STATE_PART, "id": "state", "data": {"state": sign(event.state, self.key)}}
            )
        elif isinstance(event, ChatCompleted):
            out.extend(self.finish(event))
        return out

    def finish(self, event: ChatCompleted) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        self._close_text(out)
        result = event.result
        if result.output is not None:
            out.append(
                {"type": "data-toolweave-output", "id": "output", "data": _jsonable(result.output)}
            )
        standing = result.standing_decisions
        if (
            self.chat_id is not None
            and result.status is ChatStatus.COMPLETED  # a pause's state carries them
            and standing
            and not any(s.in_process for s in standing)
        ):
            signed = sign_standing(standing, key=self.key, memory_id=self.chat_id)
            out.append({"type": STANDING_PART, "id": "standing", "data": {"standing": signed}})
        if self.step_open:
            out.append({"type": "finish-step"})
            self.step_open = False
        reason = "tool-calls" if result.status is ChatStatus.PENDING else "stop"
        if result.status is ChatStatus.COMPLETED and result.final_response is not None:
            reason = _FINISH.get(result.final_response.finish_reason or FinishReason.STOP, "other")
        finish: dict[str, Any] = {"type": "finish", "finishReason": reason}
        usage = result.token_usage
        if usage is not None:
            finish["messageMetadata"] = {"usage": usage.model_dump(exclude_none=True)}
        out.append(finish)
        return out


def _jsonable(value: Any) -> Any:
    """`value` as JSON data (pydantic models and dataclasses through their JSON form)."""
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        from pydantic import TypeAdapter

        return TypeAdapter(Any).dump_python(value, mode="json")


async def ai_sdk_chunks(
    events: AsyncIterable[ServiceEvent],
    *,
    key: str | bytes,
    chat_input: ChatInput | None = None,
) -> AsyncIterator[dict[str, Any]]:
    """The UI message chunks of a `ToolService` stream (`achat_stream`'s events).

    `key` signs the paused conversation the stream carries when calls wait for approval;
    `chat_input` is the request the stream answers (a resume continues its message and
    reports the denied calls). An exception from `events` becomes an `error` chunk."""
    translator = _Translator(
        key,
        chat_input.message_id if chat_input else None,
        chat_input.chat_id if chat_input else None,
    )
    for chunk in translator.start(chat_input):
        yield chunk
    try:
        async for event in events:
            for chunk in translator.feed(event):
                yield chunk
    except Exception as e:  # the stream's failure is the client's error chunk
        yield {"type": "error", "errorText": str(e) or type(e).__name__}


async def ai_sdk_sse(chunks: AsyncIterable[Mapping[str, Any]]) -> AsyncIterator[str]:
    """Server-sent events of `chunks`, ending with `[DONE]`."""
    async for chunk in chunks:
        yield f"data: {json.dumps(chunk, ensure_ascii=False, separators=(',', ':'))}\n\n"
    yield "data: [DONE]\n\n"


# the request ------------------------------------------------------------------------------


def ai_sdk_request(body: Any, *, key: str | bytes) -> ChatInput:
    """A `useChat` request body (`{id, messages, trigger, ...}`) as a `ChatInput`.

    When the last assistant message carries the `data-toolweave-state` part of a pause and
    tool parts answered since (`approval-responded`, or an output for a deferred call),
    the request resumes that state (checked against `key`): each answered call becomes
    `Approve` (with the part's `input` when it was edited), `Deny(reason)` or
    `DeferredResult`. Otherwise the messages are the conversation."""
    if not isinstance(body, Mapping) or not isinstance(body.get("messages"), list):
        raise ProtocolRequestError("the request needs a 'messages' list")
    messages: list[Any] = body["messages"]
    if not all(isinstance(m, Mapping) for m in messages):
        raise ProtocolRequestError("each message must be an object")
    chat_id = body.get("id") if isinstance(body.get("id"), str) and body.get("id") else None
    last = messages[-1] if messages else None
    if last is not None and last.get("role") == "assistant":
        state_text = next(
            (
                p.get("data", {}).get("state")
                for p in reversed(last.get("parts") or [])
                if isinstance(p, Mapping)
                and p.get("type") == STATE_PART
                and isinstance(p.get("data"), Mapping)
            ),
            None,
        )
        if state_text is not None:
            state = unsign(state_text, key)
            decisions = _decisions(last, state)
            return ChatInput(
                conversation=state,
                decisions=decisions,
                message_id=last.get("id"),
                chat_id=chat_id,
            )
    return ChatInput(
        conversation=[m for msg in messages for m in _to_messages(msg)],
        chat_id=chat_id,
        standing=_standing(messages, chat_id, key),
    )


def _standing(
    messages: list[Any], chat_id: str | None, key: str | bytes
) -> tuple[StandingDecision, ...]:
    """The standing decisions of the latest turn that sent some (verified, bound to
    `chat_id`; none without a chat id)."""
    for message in reversed(messages):
        if message.get("role") != "assistant":
            continue
        for part in reversed(message.get("parts") or []):
            if (
                isinstance(part, Mapping)
                and part.get("type") == STANDING_PART
                and isinstance(part.get("data"), Mapping)
            ):
                text = part["data"].get("standing")
                if chat_id is None:
                    return ()
                if not isinstance(text, str):
                    raise ProtocolRequestError("the standing decisions must be a string")
                return verify_standing(text, key=key, memory_id=chat_id)
    return ()


def _tool_name(part: Mapping[str, Any]) -> str | None:
    kind = part.get("type")
    if kind == "dynamic-tool":
        name = part.get("toolName")
        return name if isinstance(name, str) else None
    if isinstance(kind, str) and kind.startswith("tool-"):
        return kind[len("tool-") :]
    return None


def _decisions(message: Mapping[str, Any], state: Any) -> dict[str, Decision]:
    pending = {call.id: call for call in state.pending}
    decisions: dict[str, Decision] = {}
    for part in message.get("parts") or []:
        if not isinstance(part, Mapping) or _tool_name(part) is None:
            continue
        call = pending.get(part.get("toolCallId"))  # type: ignore[arg-type]
        if call is None:
            continue
        status = part.get("state")
        if status == "approval-responded":
            approval = part.get("approval") or {}
            if approval.get("approved") is True:
                edited = part.get("input")
                changed = isinstance(edited, dict) and edited != call.arguments_as_dict()
                # "Always allow": a standing approval (never one that edits the arguments)
                always = approval.get("always") is True and not changed
                decisions[call.id] = Approve(edited if changed else None, always=always)
            else:
                reason = approval.get("reason")
                decisions[call.id] = Deny(reason) if isinstance(reason, str) and reason else Deny()
        elif status == "output-available" and call.reason == "deferred":
            output = part.get("output")
            text = output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
            decisions[call.id] = DeferredResult(text, result=output)
        elif status == "output-error" and call.reason == "deferred":
            decisions[call.id] = DeferredResult(str(part.get("errorText") or ""), is_error=True)
        elif status == "output-denied":
            decisions[call.id] = Deny()
    return decisions


def _file_content(part: Mapping[str, Any]) -> ContentPart | None:
    url = part.get("url")
    media_type = part.get("mediaType") or "application/octet-stream"
    if not isinstance(url, str):
        return None
    data: str | None = None
    if url.startswith("data:") and ";base64," in url:
        data = url.split(";base64,", 1)[1]
        base64.b64decode(data, validate=False)
        url_value: str | None = None
    else:
        url_value = url
    if str(media_type).startswith("image/"):
        return ImageContent(data=data, url=url_value, mime_type=media_type)
    return FileContent(data=data, url=url_value, mime_type=media_type, name=part.get("filename"))


def _to_messages(message: Mapping[str, Any]) -> list[ChatMessage]:
    """One UI message as toolweave messages (an assistant message: one `AiMessage` per
    step, each followed by its tool results)."""
    role = message.get("role")
    parts = [p for p in message.get("parts") or [] if isinstance(p, Mapping)]
    texts = [p["text"] for p in parts if p.get("type") == "text" and isinstance(p.get("text"), str)]
    if role == "system":
        return [SystemMessage("".join(texts))]
    if role == "user":
        contents: list[ContentPart] = []
        for p in parts:
            if p.get("type") == "file":
                content = _file_content(p)
                if content is not None:
                    contents.append(content)
        if contents:
            contents = [TextContent(text="".join(texts)), *contents] if texts else contents
            return [UserMessage(contents=tuple(contents))]
        return [UserMessage("".join(texts))]
    if role != "assistant":
        raise ProtocolRequestError(f"unknown message role {role!r}")
    out: list[ChatMessage] = []
    steps: list[list[Mapping[str, Any]]] = [[]]
    for p in parts:
        if p.get("type") == "step-start" and steps[-1]:
            steps.append([])
        steps[-1].append(p)
    for step in steps:
        text = "".join(
            p["text"] for p in step if p.get("type") == "text" and isinstance(p.get("text"), str)
        )
        reasoning = "".join(
            p["text"]
            for p in step
            if p.get("type") == "reasoning" and isinstance(p.get("text"), str)
        )
        calls: list[ToolExecutionRequest] = []
        results: list[ChatMessage] = []
        for p in step:
            name = _tool_name(p)
            call_id = p.get("toolCallId")
            if name is None or not isinstance(call_id, str):
                continue
            arguments = json.dumps(p.get("input") if p.get("input") is not None else {})
            calls.append(ToolExecutionRequest(id=call_id, name=name, arguments=arguments))
            status = p.get("state")
            if status == "output-available":
                output = p.get("output")
                result_text = (
                    output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)
                )
                results.append(
                    ToolExecutionResultMessage(id=call_id, tool_name=name, text=result_text)
                )
            elif status in ("output-error", "output-denied"):
                error = str(p.get("errorText") or "The user did not approve this tool call.")
                results.append(
                    ToolExecutionResultMessage(
                        id=call_id, tool_name=name, text=error, is_error=True
                    )
                )
            else:  # a call without an answer: the history must still be valid
                results.append(
                    ToolExecutionResultMessage(
                        id=call_id,
                        tool_name=name,
                        text="The tool call was not executed.",
                        is_error=True,
                    )
                )
        if text or calls or reasoning:
            out.append(
                AiMessage(text or None, tool_execution_requests=calls, reasoning=reasoning or None)
            )
            out.extend(results)
    return out
