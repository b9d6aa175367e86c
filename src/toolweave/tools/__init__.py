"""Declaring tools: `ToolCard`, the `Tool` base class, `LocalFunction`, `@tool`."""

from ..schema.parameters import ToolParameters
from .base import Tool
from .card import TOOL_NAME_PATTERN, ReturnBehavior, ToolCard, ToolInfo, check_tool_name
from .decorator import tool, tools_from
from .local_function import LocalFunction

__all__ = [
    "TOOL_NAME_PATTERN",
    "LocalFunction",
    "ReturnBehavior",
    "Tool",
    "ToolCard",
    "ToolInfo",
    "ToolParameters",
    "check_tool_name",
    "tool",
    "tools_from",
]
