"""`ChatResponse`, `FinishReason` and `TokenUsage`."""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from .messages import AiMessage

__all__ = ["PAUSED_TURN", "ChatResponse", "FinishReason", "TokenUsage"]

PAUSED_TURN = "paused_turn"
"""The `ChatResponse.metadata` key set (True) when the provider paused its own server-side
turn (Anthropic's `pause_turn`, e.g. a long tool search): the loop sends the conversation
back as it is, and the model goes on with the same turn."""


class FinishReason(StrEnum):
    """Why the model stopped."""

    STOP = "stop"
    LENGTH = "length"
    TOOL_EXECUTION = "tool_execution"
    CONTENT_FILTER = "content_filter"
    OTHER = "other"


class TokenUsage(BaseModel):
    """Token counts; `+` adds them up (None counts as nothing)."""

    model_config = ConfigDict(frozen=True)

    input_tokens: int | None = None
    output_tokens: int | None = None
    total_tokens: int | None = None
    reasoning_tokens: int | None = None
    """Of the output tokens, those spent on reasoning (when the provider says)."""

    def __add__(self, other: TokenUsage | None) -> TokenUsage:
        if other is None:
            return self

        def add(a: int | None, b: int | None) -> int | None:
            return None if a is None and b is None else (a or 0) + (b or 0)

        return TokenUsage(
            input_tokens=add(self.input_tokens, other.input_tokens),
            output_tokens=add(self.output_tokens, other.output_tokens),
            total_tokens=add(self.total_tokens, other.total_tokens),
            reasoning_tokens=add(self.reasoning_tokens, other.reasoning_tokens),
        )

    __radd__ = __add__


class ChatResponse(BaseModel):
    """The model's answer to one request."""

    model_config = ConfigDict(frozen=True)

    ai_message: AiMessage
    finish_reason: FinishReason | None = None
    usage: TokenUsage | None = None
    model: str | None = None
    id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)

    def __init__(self, ai_message: AiMessage | None = None, /, **data: Any) -> None:
        if ai_message is not None:
            data["ai_message"] = ai_message
        super().__init__(**data)
