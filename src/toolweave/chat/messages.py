"""Chat messages: system, user, AI (with tool calls) and tool results."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_serializer

from ..execution.content import ContentPart
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecutionResult
from ..execution.text import json_value

__all__ = [
    "AiMessage",
    "ChatMessage",
    "SystemMessage",
    "ToolExecutionResultMessage",
    "UserMessage",
]


class SystemMessage(BaseModel):
    """Instructions for the model."""

    model_config = ConfigDict(frozen=True)
    type: Literal["system"] = "system"
    text: str

    def __init__(self, text: str | None = None, /, **data: Any) -> None:
        if text is not None:
            data["text"] = text
        super().__init__(**data)


class UserMessage(BaseModel):
    """What the user said: text, optionally with multimodal parts."""

    model_config = ConfigDict(frozen=True)
    type: Literal["user"] = "user"
    text: str | None = None
    contents: tuple[ContentPart, ...] = ()
    name: str | None = None

    def __init__(self, text: str | None = None, /, **data: Any) -> None:
        if text is not None:
            data["text"] = text
        super().__init__(**data)


class AiMessage(BaseModel):
    """The model's turn: text and/or tool calls, plus reasoning when the provider sends it.

    `attributes` keeps provider data that must go back verbatim on the next turn (Anthropic
    thinking blocks and their signatures, Gemini thought signatures).
    """

    model_config = ConfigDict(frozen=True)
    type: Literal["ai"] = "ai"
    text: str | None = None
    tool_execution_requests: tuple[ToolExecutionRequest, ...] = ()
    reasoning: str | None = None
    attributes: dict[str, Any] = Field(default_factory=dict)

    def __init__(
        self,
        text: str | None = None,
        /,
        tool_execution_requests: Any = (),
        **data: Any,
    ) -> None:
        if text is not None:
            data["text"] = text
        super().__init__(tool_execution_requests=tuple(tool_execution_requests or ()), **data)

    def has_tool_execution_requests(self) -> bool:
        """Whether the model asked for at least one tool call."""
        return bool(self.tool_execution_requests)


class ToolExecutionResultMessage(BaseModel):
    """The result of one tool call, answering the call with the same `id`.

    `text` is the joined text; `contents` the parts in order when the tool returned parts
    (providers send these, each as their API best allows); `structured` is structured data
    sent alongside the text where the API takes it.
    """

    model_config = ConfigDict(frozen=True)
    type: Literal["tool_result"] = "tool_result"
    id: str
    tool_name: str
    text: str
    is_error: bool = False
    contents: tuple[ContentPart, ...] | None = None
    structured: Any = None
    attributes: dict[str, Any] = Field(default_factory=dict)

    @field_serializer("structured", when_used="json")
    def _structured_json(self, value: Any) -> Any:
        # any value a tool gave, JSON by the result-to-text rules (histories are stored)
        return json_value(value)

    @classmethod
    def from_result(
        cls, request: ToolExecutionRequest, result: ToolExecutionResult
    ) -> ToolExecutionResultMessage:
        """The message answering `request` with `result`."""
        # Trusted values: no re-validation on this per-call path. What `model_construct`
        # builds, without its generic per-field loop (a quarter of it); a subclass may
        # add fields or hooks, so it takes the generic way.
        values = {
            "type": "tool_result",
            "id": request.id,
            "tool_name": request.name,
            "text": result.result_text(),
            "is_error": result.is_error,
            "contents": result.contents,
            "structured": result.structured,
            "attributes": dict(result.attributes),
        }
        if cls is not ToolExecutionResultMessage:
            del values["type"]
            return cls.model_construct(**values)
        message = _new(cls)
        _setattr(message, "__dict__", values)
        _setattr(message, "__pydantic_fields_set__", set(_RESULT_FIELDS_SET))
        _setattr(message, "__pydantic_extra__", None)
        _setattr(message, "__pydantic_private__", None)
        return message


_new = object.__new__
_setattr = object.__setattr__
_RESULT_FIELDS_SET = frozenset(ToolExecutionResultMessage.model_fields) - {"type"}


ChatMessage = Annotated[
    SystemMessage | UserMessage | AiMessage | ToolExecutionResultMessage,
    Field(discriminator="type"),
]
"""Any message of a conversation."""
