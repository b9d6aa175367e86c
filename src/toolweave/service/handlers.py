"""Error handlers and the hallucinated-tool strategy of the loop.

A handler is `(error, context) -> ToolErrorHandlerResult | str`, sync or async; raising
aborts the conversation (after the round has finished, with the history kept valid).
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeAlias

from ..chat.messages import ToolExecutionResultMessage
from ..errors import HallucinatedToolError, ToolArgumentsError, ToolExecutionError
from ..execution.executor import error_text
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecutionResult

__all__ = [
    "RETHROW",
    "HallucinatedToolAnswer",
    "HallucinatedToolStrategy",
    "HallucinatedToolStrategyFunction",
    "ToolErrorContext",
    "ToolErrorHandler",
    "ToolErrorHandlerResult",
    "default_arguments_error_handler",
    "default_execution_error_handler",
]

logger = logging.getLogger("toolweave.service")


@dataclass(frozen=True, slots=True)
class ToolErrorContext:
    """What a handler knows about the failed call."""

    request: ToolExecutionRequest
    memory_id: Any = None
    attempt: int = 1
    """Consecutive failures of this tool in this conversation, this one included."""
    budget: int = 2
    """How many consecutive failures are fed back before the default handler raises."""
    raw_error: BaseException | None = None
    """The exception before unwrapping (the typed toolweave error)."""


@dataclass(frozen=True, slots=True)
class ToolErrorHandlerResult:
    """The text sent back to the model as the (error) result of the call."""

    text: str


ToolErrorHandler = Callable[
    [BaseException, ToolErrorContext],
    "ToolErrorHandlerResult | str | Awaitable[ToolErrorHandlerResult | str]",
]


def default_arguments_error_handler(
    error: BaseException, context: ToolErrorContext
) -> ToolErrorHandlerResult:
    """Feed the problem back to the model; raise once the per-tool budget is spent."""
    if context.attempt > context.budget:
        raise error
    return ToolErrorHandlerResult(error_text(error))


def default_execution_error_handler(
    error: BaseException, context: ToolErrorContext
) -> ToolErrorHandlerResult:
    """Feed the tool's error message (or its class name) back to the model, and log it."""
    cause = error.cause if isinstance(error, ToolExecutionError) and error.cause else error
    logger.warning(
        "tool %r failed: %s: %s", context.request.name, type(cause).__name__, error_text(error)
    )
    return ToolErrorHandlerResult(error_text(error))


def RETHROW(error: BaseException, context: ToolErrorContext) -> ToolErrorHandlerResult:
    """A handler that aborts the conversation with the error (the seed's strict behaviour)."""
    raise error


def _available_text(name: str, available: list[str]) -> str:
    listing = ", ".join(available) if available else "(none)"
    return f"There is no tool named {name!r}. Call one of the available tools instead: {listing}."


HallucinatedToolAnswer: TypeAlias = ToolExecutionResultMessage | ToolExecutionResult | str
"""What a hallucinated-tool strategy returns: the message or result answering the call, or
its text (then an error result)."""

HallucinatedToolStrategyFunction: TypeAlias = Callable[
    ..., "HallucinatedToolAnswer | Awaitable[HallucinatedToolAnswer]"
]
"""`(request) -> answer` (the seed's form) or `(request, available_names) -> answer`, sync or
async; raising aborts the conversation."""


class HallucinatedToolStrategy:
    """What to do when the model calls a tool that does not exist.

    `FEEDBACK` (default) answers the call with an error listing the available tools (counted
    against the same per-tool budget as argument errors); `THROW` raises
    `HallucinatedToolError`. Any `HallucinatedToolStrategyFunction` may be used.
    """

    @staticmethod
    def FEEDBACK(request: ToolExecutionRequest, available: list[str]) -> str:
        """Answer with an error that lists the available tools."""
        return _available_text(request.name, available)

    @staticmethod
    def THROW(request: ToolExecutionRequest, available: list[str]) -> str:
        """Abort with `HallucinatedToolError`."""
        raise HallucinatedToolError(
            f"The model tried to call the tool {request.name!r}, which does not exist "
            f"(available: {', '.join(available) or '(none)'}). It is most likely a hallucination.",
            tool_name=request.name,
            available=available,
        )


def is_arguments_error(error: BaseException) -> bool:
    """Whether `error` goes to the arguments handler."""
    return isinstance(error, ToolArgumentsError)


def _wants_available(strategy: Callable[..., Any]) -> bool:
    """Whether `strategy` takes the available names as a second positional argument."""
    try:
        params = list(inspect.signature(strategy).parameters.values())
    except (TypeError, ValueError):
        return True
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return True
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return sum(p.kind in positional for p in params) >= 2


async def answer_hallucinated(
    strategy: HallucinatedToolStrategyFunction,
    request: ToolExecutionRequest,
    available: list[str],
) -> ToolExecutionResult:
    """Run `strategy` for a call of an unknown tool and turn its answer into the result: a
    message or a result keeps its text, error flag, contents and attributes; a `str` is an
    error result with that text."""
    out = strategy(request, available) if _wants_available(strategy) else strategy(request)
    if inspect.isawaitable(out):
        out = await out
    if isinstance(out, ToolExecutionResult):
        return out
    if isinstance(out, ToolExecutionResultMessage):
        return ToolExecutionResult(
            text=out.text,
            is_error=out.is_error,
            contents=out.contents,
            attributes=dict(out.attributes),
        )
    if isinstance(out, str):
        return ToolExecutionResult.error_result(out)
    raise TypeError(
        "a hallucinated-tool strategy must return a ToolExecutionResultMessage, a "
        f"ToolExecutionResult or a str, not {type(out).__name__}"
    )
