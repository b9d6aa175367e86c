"""Executing tool calls: requests, results, executors, argument parsing, result text."""

from ..schema.arguments import parse_arguments, repair_arguments
from .content import (
    Annotations,
    AudioContent,
    ContentPart,
    EmbeddedResource,
    FileContent,
    ImageContent,
    ResourceLink,
    TextContent,
)
from .executor import DefaultToolExecutor, ToolExecutor, as_executor, error_text
from .requests import ToolExecutionRequest
from .results import StructuredText, ToolExecution, ToolExecutionResult
from .text import result_to_text

__all__ = [
    "Annotations",
    "AudioContent",
    "ContentPart",
    "DefaultToolExecutor",
    "EmbeddedResource",
    "FileContent",
    "ImageContent",
    "ResourceLink",
    "StructuredText",
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
