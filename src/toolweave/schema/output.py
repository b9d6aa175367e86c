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

import pydantic
import pydantic_core

from .._utils.jsondepth import MAX_JSON_DEPTH, nested_deeper_than
from ..errors import SchemaError

__all__ = ["OutputSchema", "OutputValidationError", "PartialJsonStream", "parse_partial_json"]

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


class PartialJsonStream:
    """Partial values of a JSON answer that arrives as text deltas, at bounded cost.

    The text so far is parsed (`parse_partial_json`) after every delta while it is shorter
    than `eager_chars`, then whenever it has grown by `1/growth` of its length since the
    last parse: a long answer costs a constant number of passes over its text, not one per
    delta. `feed` and `flush` return the new value when it differs from the last one
    returned, else None; `flush` (at the end of the stream) parses whatever is left.
    """

    __slots__ = ("_last", "_parsed_at", "_parts", "_size", "eager_chars", "growth")

    def __init__(self, *, eager_chars: int = 1024, growth: int = 32) -> None:
        self.eager_chars = eager_chars
        self.growth = growth
        self._parts: list[str] = []
        self._size = 0
        self._parsed_at = 0
        self._last: Any = None

    def feed(self, delta: str) -> Any:
        """Add a text delta; the new partial value, or None."""
        self._parts.append(delta)
        self._size += len(delta)
        if self._size > self.eager_chars and (
            (self._size - self._parsed_at) * self.growth < self._size
        ):
            return None
        return self._parse()

    def flush(self) -> Any:
        """The value of the whole text when it changed since the last one returned."""
        return self._parse() if self._size > self._parsed_at else None

    def _parse(self) -> Any:
        text = "".join(self._parts)
        self._parts = [text]
        self._parsed_at = self._size
        value = parse_partial_json(text)
        if value is None or value == self._last:
            return None
        self._last = value
        return value


@dataclass(frozen=True, slots=True)
class OutputSchema:
    """A structured-output specification: name, JSON schema and a validator.

    `strict`: whether a provider may send the schema in its strict form (OpenAI's makes
    every property required and nullable); None lets the provider decide, False sends the
    schema as it is.
    """

    name: str
    json_schema: dict[str, Any]
    adapter: pydantic.TypeAdapter[Any] | None = None
    validator: Any = None
    strict: bool | None = None

    @classmethod
    def of(cls, spec: Any) -> OutputSchema:
        """Build from a JSON schema dict or a type (see the module docstring)."""
        if isinstance(spec, OutputSchema):
            return spec
        if isinstance(spec, Mapping):
            schema = copy.deepcopy(dict(spec))
            import jsonschema  # loaded when first needed (import time)

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
        if nested_deeper_than(body):
            raise OutputValidationError(
                f"The answer is nested too deeply (over {MAX_JSON_DEPTH} levels of arrays and "
                "objects). Send a flatter JSON value."
            )
        if self.adapter is not None:
            try:
                return self.adapter.validate_json(body)
            except pydantic.ValidationError as e:
                raise OutputValidationError(_describe(e)) from None
        try:
            value = json.loads(body)
        except ValueError as e:
            raise OutputValidationError(f"The answer is not valid JSON: {e}.") from None
        except RecursionError:  # only when called with little stack left
            raise OutputValidationError("The answer is nested too deeply.") from None
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
