"""What both protocols share: the request's outcome, tool outputs as JSON, the signed state."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..chat import ChatMessage
from ..execution import ToolExecutionRequest, ToolExecutionResult
from ..execution.content import AudioContent, FileContent, ImageContent, TextContent
from ..service import ConversationState, Decision, DeferredResult, Deny
from ..service.approvals import StandingDecision

__all__ = ["ChatInput", "ProtocolRequestError"]


class ProtocolRequestError(ValueError):
    """A protocol request toolweave cannot turn into a conversation (answered with 400)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatInput:
    """A protocol request in toolweave's terms: what `ToolService.achat_stream` is given.

    `conversation` is the history (a fresh turn) or the paused `ConversationState` the
    request resumes, with a decision per call id in `decisions`. `message_id` is the
    assistant message a resumed AI SDK stream continues. `chat_id` is the client's
    conversation id (AI SDK `id`), which the signed `standing` decisions of a fresh turn
    (an earlier turn's "always" answers) are bound to."""

    conversation: list[ChatMessage] | ConversationState
    decisions: dict[str, Decision] = field(default_factory=dict)
    message_id: str | None = None
    chat_id: str | None = None
    standing: tuple[StandingDecision, ...] = ()

    @property
    def resuming(self) -> bool:
        """True when the request answers a pause."""
        return isinstance(self.conversation, ConversationState)


def parse_arguments(arguments: str) -> Any:
    """A call's arguments as JSON data; text that is not JSON stays as it is."""
    try:
        return json.loads(arguments) if arguments.strip() else {}
    except json.JSONDecodeError:
        return arguments


def media(result: ToolExecutionResult) -> list[dict[str, Any]]:
    """The non-text parts of a result, as `{type, mediaType, url}` (data: URLs inline)."""
    out: list[dict[str, Any]] = []
    for part in result.contents or ():
        if isinstance(part, ImageContent | AudioContent | FileContent):
            url = part.url or f"data:{part.mime_type};base64,{part.data or ''}"
            item: dict[str, Any] = {"type": part.type, "mediaType": part.mime_type, "url": url}
            if isinstance(part, FileContent) and part.name:
                item["filename"] = part.name
            out.append(item)
    return out


def output_value(result: ToolExecutionResult) -> Any:
    """What a UI shows as a tool's output: its structured value, else its text; with its
    images and files (as `media`) alongside when it has any."""
    value = result.structured if result.structured is not None else result.result_text()
    parts = media(result)
    if parts:
        texts = [p.text for p in result.contents or () if isinstance(p, TextContent)]
        return {"text": "\n".join(texts) or result.result_text(), "media": parts}
    return value


def decision_outcomes(
    state: ConversationState, decisions: dict[str, Decision]
) -> list[tuple[ToolExecutionRequest, Decision]]:
    """The pending calls a resume answers without running them (denied, or deferred and
    answered), with their decision."""
    out: list[tuple[ToolExecutionRequest, Decision]] = []
    for call in state.pending:
        decision = decisions.get(call.id)
        if isinstance(decision, Deny | DeferredResult):
            out.append((call.request, decision))
    return out


def sign(state: ConversationState, key: str | bytes) -> str:
    """The state as signed JSON text, for the client to send back."""
    return state.to_json(key=key)


def unsign(text: Any, key: str | bytes) -> ConversationState:
    """The state a client sent back; anything edited or foreign is refused."""
    if not isinstance(text, str):
        raise ProtocolRequestError("the paused conversation state must be a string")
    return ConversationState.from_json(text, key=key)
