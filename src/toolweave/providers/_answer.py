"""Structured output through a forced tool (providers without a native response format:
Anthropic, Bedrock Converse): the answer tool's schema, and the answer read back as text."""

from __future__ import annotations

import json
from typing import Any

from .._utils.jsondepth import nested_deeper_than
from ..schema.output import OutputSchema
from ._base import compact_json

__all__ = ["ANSWER_DESCRIPTION", "Answer", "answer_schema", "answer_text"]

ANSWER_DESCRIPTION = (
    "Give your final answer by calling this tool: its input is the answer. Call it once, "
    "after any other tools you need, instead of answering in text."
)


def answer_schema(output: OutputSchema) -> tuple[dict[str, Any], bool]:
    """The answer tool's `input_schema`, and whether the answer is wrapped: a schema that is
    not an object becomes `{"value": <schema>}` (tool inputs are objects)."""
    schema = output.json_schema
    if schema.get("type") == "object" and not any(k in schema for k in ("anyOf", "oneOf")):
        return schema, False
    inner = {k: v for k, v in schema.items() if k not in ("$defs", "definitions", "$schema")}
    wrapper: dict[str, Any] = {
        "type": "object",
        "properties": {"value": inner},
        "required": ["value"],
        "additionalProperties": False,
    }
    for key in ("$defs", "definitions"):
        if key in schema:
            wrapper[key] = schema[key]
    return wrapper, True


def answer_text(raw: Any, wrapped: bool) -> str:
    """The answer as JSON text: the tool input (a dict or its JSON text), unwrapped."""
    if isinstance(raw, str):
        if not wrapped:
            return raw if raw.strip() else "{}"
        if nested_deeper_than(raw):
            return raw  # validating the answer says so
        try:
            value: Any = json.loads(raw)
        except (ValueError, RecursionError):
            return raw
        raw = value
    if wrapped and isinstance(raw, dict) and "value" in raw:
        return compact_json(raw["value"])
    return compact_json(raw if raw is not None else {})


class Answer:
    """How a response carries a structured answer: the tool name, and whether wrapped."""

    __slots__ = ("name", "wrapped")

    def __init__(self, name: str, wrapped: bool) -> None:
        self.name = name
        self.wrapped = wrapped
