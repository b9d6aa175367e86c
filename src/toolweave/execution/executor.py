"""`ToolExecutor`: anything that runs a `ToolExecutionRequest`; `DefaultToolExecutor` wraps a
`Tool`.

`DefaultToolExecutor.aexecute_with_result` is the one path every caller (including
`ToolService`) goes through: parse and validate the arguments, call the tool with a
`ToolContext`, turn the return value into text or content parts. Bad arguments raise
`ToolArgumentsError`; an exception from the tool becomes an error result (text = its message,
or its class name when it has none), or is raised as `ToolExecutionError` when
`propagate_errors=True`, with the original exception as the cause.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any, Protocol, runtime_checkable

from .._utils.sync import run_sync
from .._utils.threads import to_thread
from ..context import ToolContext
from ..errors import (
    AbortError,
    ToolArgumentsError,
    ToolExecutionError,
    ToolNotSupportedError,
)
from ..tools.base import Tool
from .content import (
    AudioContent,
    EmbeddedResource,
    FileContent,
    ImageContent,
    ResourceLink,
    TextContent,
)
from .requests import ToolExecutionRequest
from .results import StructuredText, ToolExecutionResult, text_result
from .text import result_to_text

__all__ = ["DefaultToolExecutor", "ToolExecutor", "as_executor", "error_text"]

_CONTENT_TYPES = (
    TextContent,
    ImageContent,
    AudioContent,
    FileContent,
    ResourceLink,
    EmbeddedResource,
)


@runtime_checkable
class ToolExecutor(Protocol):
    """Executes a tool call and returns the text for the model."""

    def execute(self, request: ToolExecutionRequest, memory_id: Any = None) -> str: ...


def error_text(error: BaseException) -> str:
    """The text a model receives for a failed call: the message, else the class name."""
    if isinstance(error, ToolExecutionError) and error.details.get("wrapped") and error.cause:
        error = error.cause  # the tool's own exception, wrapped by the executor
    if isinstance(error, (ToolExecutionError, ToolArgumentsError)):
        return error.message
    message = str(error)
    return message if message.strip() else type(error).__name__


_PLAIN = frozenset({dict, str, int, float, bool, type(None)})
"""Return types that are never content parts (the common case, decided in one lookup)."""


def to_result(value: Any, tool_name: str) -> ToolExecutionResult:
    """Wrap a tool's return value: content parts stay parts, anything else becomes text."""
    if type(value) in _PLAIN:
        return text_result(result_to_text(value, tool_name=tool_name), value)
    if isinstance(value, ToolExecutionResult):
        return value
    if isinstance(value, StructuredText):
        return ToolExecutionResult(text=str(value), result=value, structured=value.structured)
    if isinstance(value, _CONTENT_TYPES):
        parts: tuple[Any, ...] = (value,)
    elif (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and value
        and all(isinstance(v, _CONTENT_TYPES) for v in value)
    ):
        parts = tuple(value)
    else:
        return text_result(result_to_text(value, tool_name=tool_name), value)
    text = "\n".join(p.text for p in parts if isinstance(p, TextContent) and p.for_model)
    return ToolExecutionResult(text=text, result=value, contents=parts)


class DefaultToolExecutor:
    """Runs requests against one `Tool`."""

    def __init__(self, tool: Tool, *, propagate_errors: bool = False) -> None:
        self.tool = tool
        self.propagate_errors = propagate_errors

    def __repr__(self) -> str:
        return f"DefaultToolExecutor({self.tool!r})"

    def _failed(self, error: Exception) -> ToolExecutionResult:
        """The error result for an exception from the tool (bad arguments and aborts are
        raised by the callers before this)."""
        wrapped = (
            error
            if isinstance(error, ToolExecutionError)
            else ToolExecutionError(
                f"tool {self.tool.card.name!r} failed: {error_text(error)}",
                tool_name=self.tool.card.name,
                cause=error,
                details={"wrapped": True},
            )
        )
        if self.propagate_errors or isinstance(error, ToolNotSupportedError):
            raise wrapped from error
        return ToolExecutionResult.error_result(error_text(error), error=wrapped)

    async def aexecute_with_result(
        self,
        request: ToolExecutionRequest,
        memory_id: Any = None,
        *,
        context: Any = None,
        injected: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> ToolExecutionResult:
        """Run `request` from async code; see the module docstring for error handling.

        `context` reaches the tool as `ToolContext.context`; `injected` supplies values for
        parameters declared `Injected`.
        """
        tool = self.tool
        name = tool.card.name
        ctx = ToolContext(name, request.id, memory_id, context, tool.callbacks, injected)
        try:
            if kwargs:
                value = await tool.ainvoke(request.arguments, tool_context=ctx, **kwargs)
            else:  # the common call (an empty **kwargs still costs a dict)
                value = await tool.ainvoke(request.arguments, tool_context=ctx)
            return to_result(value, name)
        except (ToolArgumentsError, AbortError):
            raise
        except Exception as e:
            return self._failed(e)

    def execute_with_result(
        self,
        request: ToolExecutionRequest,
        memory_id: Any = None,
        *,
        context: Any = None,
        injected: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> ToolExecutionResult:
        """Run `request` synchronously; see the module docstring for error handling."""
        tool = self.tool
        name = tool.card.name
        ctx = ToolContext(name, request.id, memory_id, context, tool.callbacks, injected)
        try:
            if kwargs:
                value = tool.invoke(request.arguments, tool_context=ctx, **kwargs)
            else:  # the common call (an empty **kwargs still costs a dict)
                value = tool.invoke(request.arguments, tool_context=ctx)
            return to_result(value, name)
        except (ToolArgumentsError, AbortError):
            raise
        except Exception as e:
            return self._failed(e)

    def execute(self, request: ToolExecutionRequest, memory_id: Any = None) -> str:
        """Run `request` and return the text for the model."""
        return self.execute_with_result(request, memory_id).result_text()

    async def aexecute(self, request: ToolExecutionRequest, memory_id: Any = None) -> str:
        """Async `execute`."""
        return (await self.aexecute_with_result(request, memory_id)).result_text()


class _CallableExecutor:
    """Adapts a user executor (an object with `execute`, or a callable) to the async path."""

    def __init__(self, target: Any) -> None:
        self.target = target
        self._with_result = getattr(target, "execute_with_result", None)
        self._execute: Callable[..., Any] = getattr(target, "execute", target)

    async def aexecute_with_result(
        self, request: ToolExecutionRequest, memory_id: Any = None, **_: Any
    ) -> ToolExecutionResult:

        fn = self._with_result or self._execute
        if inspect.iscoroutinefunction(fn):
            out = await fn(request, memory_id)
        else:
            out = await to_thread(fn, request, memory_id)
            if inspect.isawaitable(out):
                out = await out
        if isinstance(out, ToolExecutionResult):
            return out
        return to_result(out, request.name)

    def execute_with_result(
        self, request: ToolExecutionRequest, memory_id: Any = None, **kwargs: Any
    ) -> ToolExecutionResult:
        return run_sync(self.aexecute_with_result(request, memory_id, **kwargs))


def as_executor(target: Any) -> Any:
    """Return something with `aexecute_with_result` for a `Tool`, an executor or a callable."""
    if isinstance(target, Tool):
        return DefaultToolExecutor(target)
    if hasattr(target, "aexecute_with_result"):
        return target
    if hasattr(target, "execute") or callable(target):
        return _CallableExecutor(target)
    raise TypeError(
        f"{target!r} is not a tool executor: pass a Tool, an object with "
        "execute(request, memory_id), or a callable (request, memory_id) -> str"
    )
