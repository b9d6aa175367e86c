"""Event names: one registry of plain string constants."""

from __future__ import annotations

from typing import Final

__all__ = ["LOOP_EVENTS", "TOOL_EVENTS", "ToolCallEvents"]


class ToolCallEvents:
    """Every event toolweave fires, tool-level then loop-level."""

    TOOL_CALL_STARTED: Final = "tool_call_started"
    TOOL_CALL_FINISHED: Final = "tool_call_finished"
    TOOL_CALL_ERROR: Final = "tool_call_error"
    TOOL_RESULT_RECEIVED: Final = "tool_result_received"
    TOOL_PARSE_STARTED: Final = "tool_parse_started"
    TOOL_PARSE_FINISHED: Final = "tool_parse_finished"
    TOOL_INVOKE_INPUT: Final = "tool_invoke_input"
    TOOL_INVOKE_OUTPUT: Final = "tool_invoke_output"
    TOOL_STREAM_INPUT: Final = "tool_stream_input"
    TOOL_STREAM_OUTPUT: Final = "tool_stream_output"
    TOOL_AUTH: Final = "tool_auth"
    TOOL_PROGRESS: Final = "tool_progress"
    """A tool running under `ToolService` reported progress (ToolContext, or an MCP server)."""
    TOOL_LOG: Final = "tool_log"
    """A tool running under `ToolService` sent a log message through its ToolContext."""
    MODEL_REQUEST: Final = "model_request"
    MODEL_RESPONSE: Final = "model_response"
    ROUND_STARTED: Final = "round_started"
    ROUND_FINISHED: Final = "round_finished"
    ROUND_PAUSED: Final = "round_paused"
    """The loop stopped for calls waiting for approval or a deferred result."""


TOOL_EVENTS: Final = frozenset(v for k, v in vars(ToolCallEvents).items() if k.startswith("TOOL_"))
LOOP_EVENTS: Final = frozenset(
    v for k, v in vars(ToolCallEvents).items() if k.startswith(("MODEL_", "ROUND_"))
)
