"""Structured output: the schema a final answer must follow, and its runtime validation.

`OutputSchema.of(spec)` accepts a JSON schema (dict) or a type pydantic can describe (a
`BaseModel`, a dataclass, a `TypedDict`, `list[...]`, ...). The JSON schema is what providers
are asked to enforce; `validate_text` checks the model's answer at runtime, whatever the
provider did: one surrounding Markdown code fence is tolerated, nothing else is repaired.
"""

from __future__ import annotations

import copy
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import jsonschema
import pydantic
import pydantic_core

from ..errors import SchemaError

__all__ = ["OutputSchema", "OutputValidationError", "parse_partial_json"]

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


class OutputValidationError(ValueError):
    """The answer is not valid JSON or does not match the schema; `message` says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


def _strip_fence(text: str) -> str:
    m = _FENCE.match(text)
    return m.group(1) if m else text


def parse_partial_json(text: str) -> Any:
    """Parse JSON that may be cut off mid-way (streaming); None when nothing parses yet.

    Uses pydantic-core's partial mode (jiter): incomplete strings, arrays and objects are
    closed at the last complete value.
    """
    body = text.lstrip()
    if body.startswith("```"):
        body = body.split("\n", 1)[1] if "\n" in body else ""
        body = body.split("```", 1)[0]
    if not body.strip():
        return None
    try:
        return pydantic_core.from_json(body, allow_partial="trailing-strings")
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """A structured-output specification: name, JSON schema and a validator."""

    name: str
    json_schema: dict[str, Any]
    adapter: pydantic.TypeAdapter[Any] | None = None
    validator: Any = None

    @classmethod
    def of(cls, spec: Any) -> OutputSchema:
        """Build from a JSON schema dict or a type (see the module docstring)."""
        if isinstance(spec, OutputSchema):
            return spec
        if isinstance(spec, Mapping):
            schema = copy.deepcopy(dict(spec))
            validator_cls = jsonschema.validators.validator_for(
                schema, default=jsonschema.Draft202012Validator
            )
            try:
                validator_cls.check_schema(schema)
            except jsonschema.SchemaError as e:
                raise SchemaError(f"the output schema is not valid JSON Schema: {e.message}") from e
            name = str(schema.get("title") or "output")
            return cls(name=_safe_name(name), json_schema=schema, validator=validator_cls(schema))
        try:
            adapter: pydantic.TypeAdapter[Any] = pydantic.TypeAdapter(spec)
            schema = adapter.json_schema()
        except (pydantic.PydanticSchemaGenerationError, pydantic.PydanticUserError, TypeError) as e:
            raise SchemaError(f"cannot build an output schema for {spec!r}: {e}") from e
        name = getattr(spec, "__name__", None) or str(schema.get("title") or "output")
        return cls(name=_safe_name(name), json_schema=schema, adapter=adapter)

    def validate_text(self, text: str | None) -> Any:
        """Parse and validate the model's answer; raises `OutputValidationError`."""
        if text is None or not text.strip():
            raise OutputValidationError("The answer is empty; a JSON value was expected.")
        body = _strip_fence(text.strip())
        if self.adapter is not None:
            try:
                return self.adapter.validate_json(body)
            except pydantic.ValidationError as e:
                raise OutputValidationError(_describe(e)) from None
        try:
            value = json.loads(body)
        except ValueError as e:
            raise OutputValidationError(f"The answer is not valid JSON: {e}.") from None
        errors = sorted(self.validator.iter_errors(value), key=lambda err: list(err.path))
        if errors:
            lines = [
                f"- {'.'.join(str(p) for p in err.absolute_path) or '(root)'}: {err.message}"
                for err in errors[:10]
            ]
            raise OutputValidationError(
                "The answer does not match the schema:\n" + "\n".join(lines)
            )
        return value


def _safe_name(name: str) -> str:
    cleaned = re.sub(r"[^a-zA-Z0-9_-]", "_", name)[:64]
    return cleaned or "output"


def _describe(e: pydantic.ValidationError) -> str:
    errors = e.errors(include_url=False, include_context=False)
    if any(err["type"] == "json_invalid" for err in errors):
        return f"The answer is not valid JSON: {errors[0]['msg']}."
    lines = []
    for err in errors[:10]:
        loc = ".".join(str(p) for p in err["loc"]) or "(root)"
        lines.append(f"- {loc}: {err['msg']}")
    return "The answer does not match the schema:\n" + "\n".join(lines)
