"""`json_encoder`: a reusable ``json.dumps`` with fixed options, for per-call paths."""

from __future__ import annotations

import json
import json.encoder
from collections.abc import Callable
from typing import Any

__all__ = ["json_encoder"]


def json_encoder(
    default: Callable[[Any], Any], *, separators: tuple[str, str] = (", ", ": ")
) -> Callable[[Any], str]:
    """``json.dumps(value, default=default, ensure_ascii=False, separators=separators)``,
    set up once.

    `JSONEncoder.encode` builds a new C encoder and markers dict on every call; this builds
    the C encoder once, without the circular-reference markers, so it keeps no state between
    calls (threads may share it). A circular value then raises `RecursionError` (its
    nesting never ends) instead of `ValueError`: callers catch both.
    """
    item_separator, key_separator = separators
    make = getattr(json.encoder, "c_make_encoder", None)
    if make is None:  # no C accelerator on this interpreter
        encoder = json.JSONEncoder(default=default, ensure_ascii=False, separators=separators)
        return encoder.encode
    c_encoder = make(
        None,
        default,
        json.encoder.encode_basestring,
        None,
        key_separator,
        item_separator,
        False,
        False,
        True,
    )

    def encode(value: Any) -> str:
        return "".join(c_encoder(value, 0))

    return encode
