"""`StepContext`: what a toolset knows when it is asked for the tools of one step."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..chat.messages import ChatMessage
from ..chat.response import TokenUsage

__all__ = ["StepContext"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StepContext:
    """One step of a conversation: the model request about to be sent."""

    round: int
    """Tool rounds done so far in the conversation (0 for its first request)."""
    messages: Sequence[ChatMessage]
    """The conversation so far (what the request will carry)."""
    usage: TokenUsage | None = None
    """Token usage summed over the conversation's model calls so far."""
    memory_id: Any = None
    """The conversation's `memory_id` (as given to `chat`)."""
    context: Any = None
    """The conversation's `context` (as given to `chat`)."""
