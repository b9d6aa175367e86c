"""`ToolExecutionResult` and `ToolExecution`: what a tool call produced."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from .content import ContentPart, TextContent
from .requests import ToolExecutionRequest

__all__ = ["StructuredText", "ToolExecution", "ToolExecutionResult"]


USER_ONLY_TEXT = "[The tool's result is for the user only; it is not shown to the model.]"
"""What the model is told when every part of a result is for the user only (MCP
``audience: ["user"]``)."""


class StructuredText(str):
    """Text with structured data alongside (`structured`), e.g. an MCP result's text and its
    ``structuredContent``. It is the text wherever a `str` is expected; the executor keeps
    the data in `ToolExecutionResult.structured`."""

    structured: Any

    def __new__(cls, text: str, structured: Any) -> StructuredText:
        out = super().__new__(cls, text)
        out.structured = structured
        return out

    def __reduce__(self) -> tuple[Any, ...]:
        return (StructuredText, (str(self), self.structured))


@dataclass(frozen=True, slots=True, kw_only=True, init=False)
class ToolExecutionResult:
    """The outcome of one call (keyword arguments only).

    Three things are kept apart: `result` is the raw return value (kept for the caller,
    never sent to the model); `contents` are the content parts in the tool's order (text,
    images, audio, files, resources) when it returned parts; `structured` is structured
    data sent alongside (MCP ``structuredContent``). `text` is the text the model receives
    (the joined text parts for a multimodal result); `attributes` is free-form data kept
    with the message.
    """

    text: str
    is_error: bool = False
    result: Any = None
    contents: tuple[ContentPart, ...] | None = None
    structured: Any = None
    attributes: dict[str, Any] = field(default_factory=dict)
    error: BaseException | None = None
    """The exception behind an error result, when there was one."""

    def __init__(
        self,
        *,
        text: str,
        is_error: bool = False,
        result: Any = None,
        contents: tuple[ContentPart, ...] | None = None,
        structured: Any = None,
        attributes: dict[str, Any] | None = None,
        error: BaseException | None = None,
    ) -> None:
        # the slots' own setters: a frozen dataclass's generated __init__ goes through
        # object.__setattr__ per field, twice as slow on the per-call path
        _set_text(self, text)
        _set_is_error(self, is_error)
        _set_result(self, result)
        _set_contents(self, contents)
        _set_structured(self, structured)
        _set_attributes(self, {} if attributes is None else attributes)
        _set_error(self, error)

    @classmethod
    def success(cls, text: str, result: Any = None) -> ToolExecutionResult:
        """A successful result: `text` for the model, `result` the raw value."""
        return cls(text=text, result=result)

    @classmethod
    def failure(cls, text: str, error: BaseException | None = None) -> ToolExecutionResult:
        """An error result with `text` for the model (the same as `error_result`)."""
        return cls(text=text, is_error=True, error=error)

    @classmethod
    def error_result(cls, text: str, error: BaseException | None = None) -> ToolExecutionResult:
        """An error result with `text` for the model."""
        return cls(text=text, is_error=True, error=error)

    def result_text(self) -> str:
        """The text sent to the model (joined text parts for multimodal results; the
        structured value as JSON when there is nothing else; a short note when every part
        is for the user only, so the model is not left with an empty result)."""
        if self.text:
            return self.text
        if self.contents is not None:
            text = "\n".join(
                p.text for p in self.contents if isinstance(p, TextContent) and p.for_model
            )
            if text or any(p.for_model for p in self.contents):
                return text
        if self.structured is not None:
            from .text import result_to_text

            return result_to_text(self.structured)
        if self.contents:
            return USER_ONLY_TEXT
        return self.text


(
    _set_text,
    _set_is_error,
    _set_result,
    _set_contents,
    _set_structured,
    _set_attributes,
    _set_error,
) = (
    getattr(ToolExecutionResult, name).__set__
    for name in (
        "text",
        "is_error",
        "result",
        "contents",
        "structured",
        "attributes",
        "error",
    )
)

_new = object.__new__


def text_result(text: str, result: Any) -> ToolExecutionResult:
    """`ToolExecutionResult(text=text, result=result)` without the keyword binding of
    `__init__` (the executor builds one per call)."""
    out = _new(ToolExecutionResult)
    _set_text(out, text)
    _set_is_error(out, False)
    _set_result(out, result)
    _set_contents(out, None)
    _set_structured(out, None)
    _set_attributes(out, {})
    _set_error(out, None)
    return out


@dataclass(frozen=True, slots=True)
class ToolExecution:
    """A finished call: the request, its result and when it ran."""

    request: ToolExecutionRequest
    result: ToolExecutionResult
    start_time: datetime
    finish_time: datetime
    memory_id: Any = None

    @property
    def duration(self) -> timedelta:
        """How long the call took."""
        return self.finish_time - self.start_time

    @property
    def has_failed(self) -> bool:
        """Whether the result is an error."""
        return self.result.is_error

    @property
    def result_text(self) -> str:
        """The text the model received."""
        return self.result.result_text()

    @property
    def raw_result(self) -> Any:
        """The tool's raw return value."""
        return self.result.result

    @property
    def contents(self) -> tuple[ContentPart, ...]:
        """The result's content parts in order (empty for a text-only result)."""
        return self.result.contents or ()

    @property
    def structured(self) -> Any:
        """The structured data sent alongside the text, if any."""
        return self.result.structured
