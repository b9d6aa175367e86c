"""Loop policies: hooks that wrap and rewrite the loop's steps, and usage budgets
(docs/policies.md)."""

from .hooks import (
    CallModel,
    CallTool,
    HistoryProcessor,
    Hook,
    InvalidHistoryError,
    ModelCallHook,
    ModelRequestHook,
    ToolCallHook,
    ToolResultHook,
    after_tool_result,
    around_model_call,
    around_tool_call,
    before_model_request,
    history_processor,
)
from .usage import RunUsage, UsageLimitExceeded, UsageLimits

__all__ = [
    "CallModel",
    "CallTool",
    "HistoryProcessor",
    "Hook",
    "InvalidHistoryError",
    "ModelCallHook",
    "ModelRequestHook",
    "RunUsage",
    "ToolCallHook",
    "ToolResultHook",
    "UsageLimitExceeded",
    "UsageLimits",
    "after_tool_result",
    "around_model_call",
    "around_tool_call",
    "before_model_request",
    "history_processor",
]
