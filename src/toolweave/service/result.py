"""`ToolChatResult` and the events `chat_stream` yields besides the model's own."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..chat.messages import ChatMessage
from ..chat.response import ChatResponse, TokenUsage
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecution
from .approvals import ChatStatus, ConversationState, PendingCall, StandingDecision

__all__ = [
    "ChatCompleted",
    "PartialOutput",
    "ToolChatResult",
    "ToolExecutionFinished",
    "ToolExecutionStarted",
    "ToolProgress",
]


@dataclass(slots=True)
class ToolChatResult:
    """The outcome of `ToolService.chat`.

    `messages` is the whole conversation (the input, every model turn and every tool
    result), valid to send again: pass it back with a new `UserMessage` to continue.
    `immediate` is True when a tool's `ReturnBehavior` ended the loop; `final_response` is
    then the response that asked for that tool. `output` is the parsed structured output.
    `status` is `PENDING` when the loop stopped for calls that wait for approval or for a
    deferred result: `pending` lists them and `state` resumes the conversation
    (docs/approvals.md). `standing_decisions` are the standing decisions in force at the
    end (those given, those of the resumed state, those made while resuming): pass them to
    the next turn's `chat(..., standing_decisions=...)` (signed, `ToolService.sign_standing`,
    when they go through a client).
    """

    final_response: ChatResponse | None
    tool_executions: list[ToolExecution] = field(default_factory=list)
    intermediate_responses: list[ChatResponse] = field(default_factory=list)
    token_usage: TokenUsage | None = None
    messages: list[ChatMessage] = field(default_factory=list)
    immediate: bool = False
    output: Any = None
    status: ChatStatus = ChatStatus.COMPLETED
    pending: tuple[PendingCall, ...] = ()
    state: ConversationState | None = None
    standing_decisions: tuple[StandingDecision, ...] = ()

    @property
    def text(self) -> str | None:
        """The final answer's text."""
        return self.final_response.ai_message.text if self.final_response else None


@dataclass(frozen=True, slots=True)
class ToolExecutionStarted:
    """A tool call started (streaming)."""

    request: ToolExecutionRequest


@dataclass(frozen=True, slots=True)
class ToolProgress:
    """A running tool reported progress (streaming): through its `ToolContext`, or an MCP
    server's progress on an `McpTool` call. `total` and `message` are optional."""

    request: ToolExecutionRequest
    progress: float
    total: float | None = None
    message: str | None = None


@dataclass(frozen=True, slots=True)
class ToolExecutionFinished:
    """A tool call finished (streaming)."""

    execution: ToolExecution


@dataclass(frozen=True, slots=True)
class ChatCompleted:
    """The loop ended; the last event of `chat_stream`."""

    result: ToolChatResult


@dataclass(frozen=True, slots=True)
class PartialOutput:
    """The structured output parsed so far from the streaming answer (not yet validated)."""

    value: Any
