"""`ToolService`: registration and the reason–act loop, with error handlers, concurrency,
streaming and tool search."""

from .approvals import (
    ApprovalPolicy,
    ApprovalRequired,
    Approve,
    CallAlreadyDecidedError,
    ChatStatus,
    ConversationState,
    Decision,
    DeferredResult,
    Deny,
    InvalidConversationStateError,
    PendingCall,
)
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
    ToolProgress,
)
from .search import KeywordToolSearch, ToolSearchStrategy
from .service import ServiceEvent, ToolService
from .subagent import ConversationTool, NestedEvent, NestedPendingCall

__all__ = [
    "RETHROW",
    "ApprovalPolicy",
    "ApprovalRequired",
    "Approve",
    "CallAlreadyDecidedError",
    "ChatCompleted",
    "ChatStatus",
    "ConversationState",
    "ConversationTool",
    "Decision",
    "DeferredResult",
    "Deny",
    "HallucinatedToolAnswer",
    "HallucinatedToolStrategy",
    "HallucinatedToolStrategyFunction",
    "InvalidConversationStateError",
    "KeywordToolSearch",
    "NestedEvent",
    "NestedPendingCall",
    "PartialOutput",
    "PendingCall",
    "ServiceEvent",
    "ToolChatResult",
    "ToolErrorContext",
    "ToolErrorHandler",
    "ToolErrorHandlerResult",
    "ToolExecutionFinished",
    "ToolExecutionStarted",
    "ToolProgress",
    "ToolSearchStrategy",
    "ToolService",
    "default_arguments_error_handler",
    "default_execution_error_handler",
]
