"""`ToolService`: registration and the reason–act loop, with error handlers, concurrency,
streaming and tool search."""

from .handlers import (
    RETHROW,
    HallucinatedToolAnswer,
    HallucinatedToolStrategy,
    HallucinatedToolStrategyFunction,
    ToolErrorContext,
    ToolErrorHandler,
    ToolErrorHandlerResult,
    default_arguments_error_handler,
    default_execution_error_handler,
)
from .result import (
    ChatCompleted,
    PartialOutput,
    ToolChatResult,
    ToolExecutionFinished,
    ToolExecutionStarted,
)
from .search import KeywordToolSearch, ToolSearchStrategy
from .service import ServiceEvent, ToolService

__all__ = [
    "RETHROW",
    "ChatCompleted",
    "HallucinatedToolAnswer",
    "HallucinatedToolStrategy",
    "HallucinatedToolStrategyFunction",
    "KeywordToolSearch",
    "PartialOutput",
    "ServiceEvent",
    "ToolChatResult",
    "ToolErrorContext",
    "ToolErrorHandler",
    "ToolErrorHandlerResult",
    "ToolExecutionFinished",
    "ToolExecutionStarted",
    "ToolSearchStrategy",
    "ToolService",
    "default_arguments_error_handler",
    "default_execution_error_handler",
]
