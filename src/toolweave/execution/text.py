"""Turning a tool's return value into the text sent to the model.

Rules: a `str` is sent as is; `None` becomes `"Success"`; anything else is serialised to
JSON by pydantic (models, dataclasses, dates, decimals, UUIDs, enums, sets handled). A value
that cannot be serialised raises `ToolExecutionError` naming its type.
"""

from __future__ import annotations

from typing import Any

import pydantic_core

from ..errors import ToolExecutionError

__all__ = ["result_to_text"]


def result_to_text(result: Any, *, tool_name: str | None = None) -> str:
    """The text a model receives for `result` (see the module docstring)."""
    if isinstance(result, str):
        return result
    if result is None:
        return "Success"
    try:
        return pydantic_core.to_json(result, serialize_unknown=False).decode("utf-8")
    except (pydantic_core.PydanticSerializationError, ValueError, TypeError, RecursionError) as e:
        raise ToolExecutionError(
            f"tool {tool_name!r} returned a value of type {type(result).__name__} that cannot be "
            "converted to text: return a str, a JSON-compatible value, a pydantic model or a "
            "dataclass",
            tool_name=tool_name,
            cause=e,
        ) from e
