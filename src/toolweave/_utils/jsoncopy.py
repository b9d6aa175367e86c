"""`copy_json`: a deep copy of JSON-shaped data (dicts, lists, scalars), several times faster
than `copy.deepcopy`; anything else inside is deep-copied the usual way."""

from __future__ import annotations

import copy
from typing import Any

__all__ = ["copy_json"]

_SCALARS = (str, int, float, bool, type(None))


def copy_json(value: Any) -> Any:
    """A deep copy of `value`, fast for JSON data (schemas, arguments, defaults)."""
    kind = type(value)
    if kind is dict:
        return {k: v if type(v) in _SCALARS else copy_json(v) for k, v in value.items()}
    if kind is list:
        return [v if type(v) in _SCALARS else copy_json(v) for v in value]
    if kind in _SCALARS:
        return value
    return copy.deepcopy(value)
