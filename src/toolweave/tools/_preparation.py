"""Input preparation for `Tool`: splitting a call's options from its arguments, and the
raw-inputs → arguments steps that do not need the compiled validator."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

__all__ = [
    "OPTION_KEYS",
    "PREP_OPTIONS",
    "drop_none",
    "fill_defaults",
    "pop_timeout",
    "split_options",
]

PREP_OPTIONS = ("skip_none_value", "skip_inputs_validate")
_TIMEOUT_KEYS = ("timeout", "operation_timeout", "operationTimeout")
OPTION_KEYS = frozenset((*PREP_OPTIONS, *_TIMEOUT_KEYS))
"""Every keyword argument of a call that is an option rather than for the implementation."""


def pop_timeout(kwargs: dict[str, Any], default: float | None) -> float | None:
    """Take the per-call timeout out of `kwargs` (`timeout`, `operation_timeout` or
    `operationTimeout`); a missing or non-positive value falls back to `default`."""
    for key in _TIMEOUT_KEYS:
        value = kwargs.pop(key, None)
        if value is not None and value > 0:
            return float(value)
    return default


def split_options(
    kwargs: dict[str, Any], default_timeout: float | None, handles_timeout: bool
) -> tuple[dict[str, Any], float | None]:
    """Take the preparation options and the timeout out of a call's `kwargs`.

    Returns the preparation options and the timeout the caller must enforce; when the tool
    kind `handles_timeout` itself, the timeout stays in `kwargs` as `timeout=` instead and
    `None` is returned for it.
    """
    if OPTION_KEYS.isdisjoint(kwargs):  # the common call: no options given
        prep: dict[str, Any] = {}
        timeout = default_timeout
    else:
        prep = {k: kwargs.pop(k) for k in PREP_OPTIONS if k in kwargs}
        timeout = pop_timeout(kwargs, default_timeout)
    if handles_timeout:
        kwargs["timeout"] = timeout
        return prep, None
    return prep, timeout


def drop_none(value: Any) -> Any:
    """`value` with every `None` removed from its dicts and lists, recursively."""
    if isinstance(value, dict):
        return {k: drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [drop_none(v) for v in value if v is not None]
    return value


def fill_defaults(schema: Mapping[str, Any], data: dict[str, Any]) -> dict[str, Any]:
    """Add the schema's top-level property defaults missing from `data` (in place); a null
    default means "absent" and adds nothing."""
    props = schema.get("properties") or {}
    for key, prop in props.items():
        if key not in data and isinstance(prop, dict) and prop.get("default") is not None:
            data[key] = copy.deepcopy(prop["default"])
    return data
