"""Python signatures and docstrings to canonical JSON Schema; argument validation."""

from .arguments import MAX_ARGUMENTS_BYTES, parse_arguments, repair_arguments
from .docstrings import ParsedDocstring, parse_docstring
from .function_schema import FunctionSchema, InjectedParam, function_schema
from .markers import Injected, P
from .parameters import ToolParameters
from .validation import (
    ArgumentsValidator,
    JsonSchemaArgumentsValidator,
    ModelArgumentsValidator,
    format_errors,
)

__all__ = [
    "MAX_ARGUMENTS_BYTES",
    "ArgumentsValidator",
    "FunctionSchema",
    "Injected",
    "InjectedParam",
    "JsonSchemaArgumentsValidator",
    "ModelArgumentsValidator",
    "P",
    "ParsedDocstring",
    "ToolParameters",
    "format_errors",
    "function_schema",
    "parse_arguments",
    "parse_docstring",
    "repair_arguments",
]
