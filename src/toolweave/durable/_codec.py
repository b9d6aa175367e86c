"""JSON forms of what durable steps record: model responses, raw tool outcomes, histories
and results. Steps return plain JSON data so recorded values stay readable (`runs show`)
and never depend on pickling user objects."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from pydantic import TypeAdapter

from ..chat.messages import ChatMessage
from ..chat.response import ChatResponse, TokenUsage
from ..errors import ToolArgumentsError, ToolExecutionError
from ..execution.content import ContentPart
from ..execution.executor import error_text
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecution, ToolExecutionResult
from ..service.approvals import StandingDecision
from ..service.result import ToolChatResult
from ..tools.pause import CallDeferred, NeedsApproval, ToolPause

__all__ = [
    "RecordedToolError",
    "decode_messages",
    "decode_outcome",
    "decode_result",
    "encode_error",
    "encode_messages",
    "encode_pause",
    "encode_result",
    "encode_tool_result",
    "json_safe",
]

_MESSAGES: TypeAdapter[list[ChatMessage]] = TypeAdapter(list[ChatMessage])
_CONTENTS: TypeAdapter[tuple[ContentPart, ...]] = TypeAdapter(tuple[ContentPart, ...])


class RecordedToolError(Exception):
    """A tool's exception as recorded by a durable step (its type is in `error_type`)."""

    def __init__(self, message: str, error_type: str = "Exception") -> None:
        super().__init__(message)
        self.error_type = error_type

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (str(self), self.error_type))


def json_safe(value: Any) -> Any:
    """`value` if it survives a JSON round trip unchanged in kind, else None."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError):
        return None


def encode_messages(messages: list[ChatMessage]) -> list[dict[str, Any]]:
    """Messages as JSON data."""
    return _MESSAGES.dump_python(messages, mode="json")  # type: ignore[no-any-return]


def decode_messages(data: list[dict[str, Any]]) -> list[ChatMessage]:
    """Messages from JSON data."""
    return _MESSAGES.validate_python(data)


def encode_tool_result(result: ToolExecutionResult) -> dict[str, Any]:
    """A successful (or tool-reported error) result as a recorded outcome."""
    return {
        "kind": "result",
        "text": result.text,
        "is_error": result.is_error,
        "result": json_safe(result.result),
        "contents": None
        if result.contents is None
        else _CONTENTS.dump_python(result.contents, mode="json"),
        "structured": json_safe(result.structured),
        "attributes": json.loads(json.dumps(result.attributes, default=str)),
    }


def encode_error(error: BaseException) -> dict[str, Any]:
    """A tool failure as a recorded outcome; `decode_outcome` raises its equivalent."""
    if isinstance(error, ToolArgumentsError):
        return {
            "kind": "arguments",
            "message": error.message,
            "errors": json.loads(json.dumps(error.errors, default=str)),
            "code": error.code,
        }
    if isinstance(error, ToolExecutionError):
        cause = error.cause if error.cause is not None else error
        return {
            "kind": "execution",
            "message": error_text(error),
            "error_type": type(cause).__name__,
            "code": error.code,
        }
    return {"kind": "exception", "message": error_text(error), "error_type": type(error).__name__}


def encode_pause(pause: ToolPause) -> dict[str, Any]:
    """A call whose tool paused itself (`NeedsApproval`, `CallDeferred`) as a recorded
    outcome; `decode_outcome` raises it again, so the loop pauses on replay too."""
    return {
        "kind": "pause",
        "reason": pause.kind,
        "message": pause.message,
        "metadata": pause.metadata,
    }


def decode_outcome(data: dict[str, Any], call: ToolExecutionRequest) -> ToolExecutionResult:
    """The result a recorded outcome stands for; raises the recorded error for failures
    (and the recorded pause for a call whose tool paused itself)."""
    kind = data.get("kind")
    if kind == "pause":
        metadata = data.get("metadata")
        if data.get("reason") == "deferred":
            raise CallDeferred(metadata, message=data.get("message"))
        raise NeedsApproval(data.get("message"), metadata)
    if kind == "result":
        contents = data.get("contents")
        return ToolExecutionResult(
            text=data.get("text", ""),
            is_error=bool(data.get("is_error")),
            result=data.get("result"),
            contents=None if contents is None else _CONTENTS.validate_python(contents),
            structured=data.get("structured"),
            attributes=dict(data.get("attributes") or {}),
        )
    if kind == "arguments":
        raise ToolArgumentsError(
            data["message"], tool_name=call.name, errors=data.get("errors"), code=data.get("code")
        )
    if kind == "execution":
        raise ToolExecutionError(
            data["message"],
            tool_name=call.name,
            code=data.get("code"),
            details={"recorded": True, "error_type": data.get("error_type")},
        )
    if kind == "unknown":
        return ToolExecutionResult.error_result(
            data["message"], error=RecordedToolError(data["message"], "OutcomeUnknown")
        )
    raise RecordedToolError(data.get("message", "the tool failed"), data.get("error_type", "?"))


def _time(value: datetime) -> str:
    return value.astimezone(UTC).isoformat()


def encode_result(result: ToolChatResult) -> dict[str, Any]:
    """A finished conversation as JSON data (the workflow's recorded output)."""
    return {
        "messages": encode_messages(result.messages),
        "final_response": None
        if result.final_response is None
        else result.final_response.model_dump(mode="json"),
        "intermediate_responses": [
            r.model_dump(mode="json") for r in result.intermediate_responses
        ],
        "token_usage": None if result.token_usage is None else result.token_usage.model_dump(),
        "immediate": result.immediate,
        "tool_executions": [
            {
                "request": e.request.model_dump(mode="json"),
                "result": encode_tool_result(e.result),
                "start_time": _time(e.start_time),
                "finish_time": _time(e.finish_time),
                "memory_id": json_safe(e.memory_id),
            }
            for e in result.tool_executions
        ],
        "standing_decisions": [s.model_dump(mode="json") for s in result.standing_decisions],
    }


def decode_result(data: dict[str, Any]) -> ToolChatResult:
    """A `ToolChatResult` from `encode_result` data."""
    executions = []
    for e in data.get("tool_executions", ()):
        request = ToolExecutionRequest.model_validate(e["request"])
        executions.append(
            ToolExecution(
                request,
                decode_outcome(e["result"], request),
                datetime.fromisoformat(e["start_time"]),
                datetime.fromisoformat(e["finish_time"]),
                e.get("memory_id"),
            )
        )
    final = data.get("final_response")
    usage = data.get("token_usage")
    return ToolChatResult(
        final_response=None if final is None else ChatResponse.model_validate(final),
        tool_executions=executions,
        intermediate_responses=[
            ChatResponse.model_validate(r) for r in data.get("intermediate_responses", ())
        ],
        token_usage=None if usage is None else TokenUsage.model_validate(usage),
        messages=decode_messages(data.get("messages", [])),
        immediate=bool(data.get("immediate")),
        standing_decisions=tuple(
            StandingDecision.model_validate(s) for s in data.get("standing_decisions", ())
        ),
    )
