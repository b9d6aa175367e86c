"""`ToolParameters`: a small builder for hand-written parameter schemas."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from typing import Any

from ..errors import SchemaError

__all__ = ["ToolParameters"]

_JSON_TYPES = {"string", "integer", "number", "boolean", "array", "object", "null"}


class ToolParameters:
    """Build a JSON Schema object for a tool's parameters, one property at a time.

    ```python
    params = (
        ToolParameters()
        .add("city", "string", "城市名", required=True)
        .add("days", "integer", "forecast length", default=1, minimum=1)
        .add("tags", "array", items={"type": "string"})
        .add_object("address", ToolParameters().add("street", "string"), "where")
    )
    card = ToolCard(name="weather", input_params=params.to_schema())
    ```
    """

    def __init__(self, *, allow_extra: bool = False) -> None:
        self._properties: dict[str, dict[str, Any]] = {}
        self._required: list[str] = []
        self._allow_extra = allow_extra

    def add(
        self,
        name: str,
        type: str | list[str],
        description: str | None = None,
        *,
        required: bool = False,
        enum: Iterable[Any] | None = None,
        items: Mapping[str, Any] | ToolParameters | None = None,
        default: Any = ...,
        **keywords: Any,
    ) -> ToolParameters:
        """Add a property; extra keywords (`minimum`, `format`, ...) go into its schema."""
        if not name:
            raise SchemaError("a parameter name must not be empty")
        if name in self._properties:
            raise SchemaError(f"parameter {name!r} is already defined")
        kinds = [type] if isinstance(type, str) else list(type)
        unknown = [k for k in kinds if k not in _JSON_TYPES]
        if unknown:
            raise SchemaError(
                f"parameter {name!r}: unknown JSON Schema type {unknown[0]!r} "
                f"(use one of {sorted(_JSON_TYPES)})"
            )
        prop: dict[str, Any] = {"type": type if isinstance(type, str) else kinds}
        if description:
            prop["description"] = description
        if enum is not None:
            prop["enum"] = list(enum)
        if items is not None:
            prop["items"] = items.to_schema() if isinstance(items, ToolParameters) else dict(items)
        elif "array" in kinds:
            prop["items"] = {}
        if default is not ...:
            prop["default"] = default
        prop.update(keywords)
        self._properties[name] = prop
        if required:
            self._required.append(name)
        return self

    def add_object(
        self,
        name: str,
        parameters: ToolParameters,
        description: str | None = None,
        *,
        required: bool = False,
    ) -> ToolParameters:
        """Add a nested object property described by another builder."""
        schema = parameters.to_schema()
        if description:
            schema["description"] = description
        self._properties[name] = schema
        if required:
            self._required.append(name)
        return self

    def to_schema(self) -> dict[str, Any]:
        """The JSON Schema object (a fresh copy each call)."""
        schema: dict[str, Any] = {
            "type": "object",
            "properties": copy.deepcopy(self._properties),
        }
        if self._required:
            schema["required"] = list(self._required)
        if self._allow_extra:
            schema["additionalProperties"] = True
        return schema

    def __repr__(self) -> str:
        return f"ToolParameters({list(self._properties)})"
