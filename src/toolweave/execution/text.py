"""Turning a tool's return value into the text sent to the model.

Rules: a `str` is sent as is; `None` becomes `"Success"`; anything else becomes compact
JSON. Pydantic models, dataclasses, dates, decimals, UUIDs, enums and sets serialise as
pydantic does; numbers of any numeric type (`numbers.Integral` / `numbers.Real`, numpy and
mpmath-like scalars with `__index__` / `__float__`) become JSON numbers; array-likes with
`tolist()` become lists; bytes become their UTF-8 text (base64 when they are not UTF-8);
any other value becomes its `str()` (logged once per type). Only a value whose `str()`
itself raises is an error: a `ToolExecutionError` naming the leaf's path
(``result["items"][3]``).
"""

from __future__ import annotations

import base64
import dataclasses
import json
import logging
import numbers
from collections.abc import Mapping
from typing import Any

import pydantic_core
from pydantic import BaseModel

from .._utils.jsonencode import json_encoder
from ..errors import ToolExecutionError

__all__ = ["json_value", "result_to_text"]

_log = logging.getLogger("toolweave.execution")
_logged_types: set[type] = set()


class _Unprintable(Exception):
    def __init__(self, leaf: Any, cause: BaseException) -> None:
        super().__init__()
        self.leaf = leaf
        self.cause = cause


def result_to_text(result: Any, *, tool_name: str | None = None) -> str:
    """The text a model receives for `result` (see the module docstring)."""
    if isinstance(result, str):
        return result
    if result is None:
        return "Success"
    try:
        try:
            return _encode(result)
        except TypeError:  # dict keys json cannot take (tuples, objects): name them by str()
            try:
                return json.dumps(
                    _with_text_keys(result),
                    default=_default,
                    ensure_ascii=False,
                    separators=(",", ":"),
                )
            except (TypeError, ValueError, RecursionError):
                return _leaf_text(result)
        except (ValueError, RecursionError):  # a circular or too deeply nested value
            return _leaf_text(result)
    except _Unprintable as e:
        path = _path_of(result, e.leaf, "result", set()) or "result"
        raise ToolExecutionError(
            f"tool {tool_name!r} returned a value that cannot be converted to text: {path} "
            f"(of type {type(e.leaf).__name__}) fails in str(): {e.cause!r}",
            tool_name=tool_name,
            cause=e.cause,
            details={"path": path},
        ) from e.cause


def json_value(value: Any) -> Any:
    """`value` as JSON data by the same rules (a str stays a str; a value with no JSON form
    at all becomes its text, or None when even its str() fails)."""
    if value is None or isinstance(value, str):
        return value
    try:
        text = result_to_text(value)
    except ToolExecutionError:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def _default(value: Any) -> Any:
    """`json.dumps` hook for everything json does not know."""
    if isinstance(value, numbers.Real):
        return _leaf(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return _bytes_text(bytes(value))
    if isinstance(value, (set, frozenset)):
        return list(value)
    try:
        return pydantic_core.to_jsonable_python(value, fallback=_leaf)
    except ValueError:  # bytes that are not UTF-8 inside a model or dataclass
        pass
    try:
        return pydantic_core.to_jsonable_python(value, fallback=_leaf, bytes_mode="base64")
    except ValueError:  # a model's own config says UTF-8: its Python form, bytes by our rule
        if isinstance(value, BaseModel):
            return _with_text_keys(value.model_dump())
        return _leaf_text(value)


def _leaf(value: Any) -> Any:
    """A value pydantic cannot serialise: a number, a list, else its str()."""
    try:
        if isinstance(value, numbers.Integral):
            return int(value)
        if isinstance(value, numbers.Real):
            return float(value)
    except Exception:
        return _leaf_text(value)
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        try:
            return tolist()
        except Exception:
            pass
    for convert in (_index, _float):
        number = convert(value)
        if number is not None:
            return number
    return _leaf_text(value)


def _index(value: Any) -> int | None:
    if not hasattr(type(value), "__index__"):
        return None
    try:
        return int(value.__index__())
    except Exception:
        return None


def _float(value: Any) -> float | None:
    if isinstance(value, complex) or not hasattr(type(value), "__float__"):
        return None
    try:
        return float(value)
    except Exception:
        return None


def _leaf_text(value: Any) -> str:
    kind = type(value)
    try:
        text = str(value)
    except Exception as e:
        raise _Unprintable(value, e) from e
    if not isinstance(text, str):  # a str() returning a str subclass is fine, else broken
        raise _Unprintable(value, TypeError("__str__ did not return a str"))
    if kind not in _logged_types:
        _logged_types.add(kind)
        _log.info(
            "a tool result holds a %s.%s, which has no JSON form: sent as its str()",
            kind.__module__,
            kind.__qualname__,
        )
    return text


def _bytes_text(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return base64.b64encode(raw).decode("ascii")


def _with_text_keys(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {
            k if isinstance(k, (str, int, float, bool)) or k is None else _leaf_text(k): (
                _with_text_keys(v)
            )
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_with_text_keys(v) for v in value]
    return value


def _children(value: Any) -> list[tuple[str, Any]]:
    if isinstance(value, Mapping):
        return [(f"[{_key(k)}]", v) for k, v in value.items()] + [
            (f"[{_key(k)}] (key)", k) for k in value
        ]
    if isinstance(value, (list, tuple, set, frozenset)):
        return [(f"[{i}]", v) for i, v in enumerate(value)]
    if isinstance(value, BaseModel):
        return [(f".{name}", getattr(value, name, None)) for name in type(value).model_fields]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return [(f".{f.name}", getattr(value, f.name, None)) for f in dataclasses.fields(value)]
    return []


def _key(key: Any) -> str:
    return json.dumps(key) if isinstance(key, str) else repr(key)


def _path_of(value: Any, leaf: Any, path: str, seen: set[int]) -> str | None:
    """Where `leaf` sits inside `value`, as ``result["items"][3]``."""
    if value is leaf:
        return path
    if id(value) in seen:
        return None
    seen.add(id(value))
    try:
        children = _children(value)
    except Exception:
        return None
    for step, child in children:
        found = _path_of(child, leaf, path + step, seen)
        if found is not None:
            return found
    return None


_encode = json_encoder(_default, separators=(",", ":"))
"""Compact JSON with our rules for other values, set up once."""
