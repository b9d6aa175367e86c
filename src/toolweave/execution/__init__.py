"""Executing tool calls: requests, results, executors, argument parsing, result text."""

from ..schema.arguments import parse_arguments, repair_arguments
from .content import ContentPart, FileContent, ImageContent, TextContent
from .executor import DefaultToolExecutor, ToolExecutor, as_executor, error_text
from .requests import ToolExecutionRequest
from .results import ToolExecution, ToolExecutionResult
from .text import result_to_text

__all__ = [
    "ContentPart",
    "DefaultToolExecutor",
    "FileContent",
    "ImageContent",
    "TextContent",
    "ToolExecution",
    "ToolExecutionRequest",
    "ToolExecutionResult",
    "ToolExecutor",
    "as_executor",
    "error_text",
    "parse_arguments",
    "repair_arguments",
    "result_to_text",
]
