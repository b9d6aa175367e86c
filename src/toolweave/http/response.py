"""Turning an HTTP response body into the `data` of a `RestfulApi` result."""

from __future__ import annotations

import codecs
import json
from collections.abc import Callable
from typing import Any

from .._utils.jsondepth import MAX_JSON_DEPTH, nested_deeper_than
from ..errors import ErrorCode, RestfulApiError

__all__ = ["is_json_type", "is_text_type", "masked_data", "parse_body"]

_JSON_TYPES = frozenset({"application/json", "text/json", "text/x-json"})
_TEXT_TYPES = frozenset(
    {
        "application/xml",
        "application/javascript",
        "application/ecmascript",
        "application/x-www-form-urlencoded",
        "application/x-yaml",
        "application/yaml",
        "application/x-ndjson",
    }
)


def _media(content_type: str | None) -> tuple[str, str | None]:
    if not content_type:
        return "text/plain", None
    parts = [p.strip() for p in content_type.split(";")]
    media = parts[0].lower() or "text/plain"
    charset = None
    for p in parts[1:]:
        key, _, value = p.partition("=")
        if key.strip().lower() == "charset" and value:
            charset = value.strip().strip('"').lower()
    return media, charset


def is_json_type(content_type: str | None) -> bool:
    """Whether the media type announces JSON (`application/json`, `*/*+json`, ...)."""
    media, _ = _media(content_type)
    return media in _JSON_TYPES or media.endswith("+json")


def is_text_type(content_type: str | None) -> bool:
    """Whether the media type is text (`text/*`, XML, and a few textual application types)."""
    media, _ = _media(content_type)
    return media.startswith("text/") or media in _TEXT_TYPES or media.endswith("+xml")


def _charset(charset: str | None) -> str:
    if charset:
        try:
            codecs.lookup(charset)
            return charset
        except LookupError:
            pass
    return "utf-8"


def _error(message: str, content_type: str | None) -> RestfulApiError:
    return RestfulApiError(
        message,
        code=ErrorCode.RESTFUL_API_RESPONSE_PROCESS_ERROR,
        details={"content_type": content_type},
    )


def parse_body(
    content_type: str | None, body: bytes, *, mask: Callable[[str], str] | None = None
) -> Any:
    """Parse `body` by its content type: JSON (empty → `{}`), text (empty → `""`).

    A missing content type is read as text. A JSON type whose body is not JSON, or a binary
    type whose body is not UTF-8 text, raises `RestfulApiError` with code 182105. `mask`,
    if given, is applied to the text, or to every string of the JSON value (`masked_data`).
    """
    media, charset = _media(content_type)
    if media in _JSON_TYPES or media.endswith("+json"):
        if not body.strip():
            return {}
        try:
            text = body.decode(_charset(charset)) if charset else body
            too_deep = nested_deeper_than(text)  # refused before any recursive parse
            if not too_deep:
                value = json.loads(text)
                return value if mask is None else _masked_json(value, text, mask)
        except (ValueError, UnicodeDecodeError) as e:
            raise _error(
                f"the response announced {media} but its body is not valid JSON: {e}",
                content_type,
            ) from e
        except RecursionError:  # only when called with little stack left
            pass
        raise _error(
            f"the response announced {media} but its body is nested too deeply to parse "
            f"(over {MAX_JSON_DEPTH} levels of arrays and objects)",
            content_type,
        )
    if media.startswith("text/") or media in _TEXT_TYPES or media.endswith("+xml"):
        text = body.decode(_charset(charset), errors="replace")
        return text if mask is None else mask(text)
    try:
        text = body.decode(_charset(charset))
        return text if mask is None else mask(text)
    except UnicodeDecodeError as e:
        raise _error(
            f"cannot turn a {media} response of {len(body)} bytes into text",
            content_type,
        ) from e


def _masked_json(value: Any, text: str | bytes, mask: Callable[[str], str]) -> Any:
    """`masked_data(value, mask)`, skipped when it cannot change anything: a JSON text with no
    backslash holds every string of its value literally, so if masking the text itself
    changes nothing, no string of the value holds a masked form either."""
    if isinstance(text, bytes):  # json.loads took the bytes: UTF-8, -16 or -32
        text = text.decode(json.detect_encoding(text), errors="replace")
    if "\\" not in text and mask(text) == text:
        return value
    return masked_data(value, mask)


def masked_data(data: Any, mask: Callable[[str], str]) -> Any:
    """`data` (what `parse_body` returns) with `mask` applied to the text, or to every string
    of a parsed JSON value, object keys included. Lists and objects are changed in place
    (they are the caller's fresh parse); iterative, so any depth is fine."""
    if isinstance(data, str):
        return mask(data)
    stack = [data] if isinstance(data, (dict, list)) else []
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, str):
                    node[i] = mask(item)
                elif isinstance(item, (dict, list)):
                    stack.append(item)
            continue
        renamed = False
        for key, value in node.items():
            if isinstance(value, str):
                node[key] = mask(value)  # an existing key: the iteration is not disturbed
            elif isinstance(value, (dict, list)):
                stack.append(value)
            renamed = renamed or mask(key) != key
        if renamed:
            items = [(mask(key), value) for key, value in node.items()]
            node.clear()
            node.update(items)
    return data
