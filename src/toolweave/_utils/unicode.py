"""Lone UTF-16 surrogates: JSON may escape them (`"\\ud800"`) and `json.loads` accepts them,
but no UTF-8 encoder (pydantic-core's included) does; they become U+FFFD where text enters."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["SURROGATE", "has_surrogate_escape", "scrub_surrogates"]

SURROGATE = re.compile("[\ud800-\udfff]")
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def has_surrogate_escape(text: str) -> bool:
    """Whether JSON `text` may decode to a surrogate (a cheap test before walking a value)."""
    return "\\u" in text and _SURROGATE_ESCAPE.search(text) is not None


def scrub_surrogates(value: Any) -> Any:
    """`value` with lone surrogates in its strings (keys too) replaced by U+FFFD, in place
    for containers; iterative, since a value may be nested nearly as deep as the decoder
    allows."""
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value)
    stack: list[Any] = [value]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            for key in list(node):
                item = node[key]
                if isinstance(item, str):
                    item = SURROGATE.sub("\ufffd", item)
                elif isinstance(item, dict | list):
                    stack.append(item)
                if isinstance(key, str) and SURROGATE.search(key):
                    del node[key]
                    key = SURROGATE.sub("\ufffd", key)
                node[key] = item
        elif isinstance(node, list):
            for i, item in enumerate(node):
                if isinstance(item, str):
                    node[i] = SURROGATE.sub("\ufffd", item)
                elif isinstance(item, dict | list):
                    stack.append(item)
    return value
