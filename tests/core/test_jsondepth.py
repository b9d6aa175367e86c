"""The linear JSON depth pre-scan used before every recursive parse of untrusted JSON."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolweave._utils.jsondepth import MAX_JSON_DEPTH, nested_deeper_than

_TRICKY = st.text(alphabet="[]{}\"\\'ab \n\u00e9\ud83d\ude00", max_size=12)
_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | _TRICKY,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_TRICKY, inner, max_size=3),
    max_leaves=30,
)


def _depth(value: Any) -> int:
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    return 0


@settings(max_examples=300, deadline=None)
@given(_VALUES, st.integers(min_value=0, max_value=6), st.booleans())
def test_the_scan_agrees_with_the_parsed_depth(value: Any, limit: int, ascii: bool) -> None:
    text = json.dumps(value, ensure_ascii=ascii, indent=1 if ascii else None)
    assert nested_deeper_than(text, limit) == (_depth(value) > limit)
    as_bytes = text.encode("utf-8", "surrogatepass")
    assert nested_deeper_than(as_bytes, limit) == (_depth(value) > limit)


def test_limits_and_hostile_shapes() -> None:
    assert not nested_deeper_than("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    assert nested_deeper_than("[" * (MAX_JSON_DEPTH + 1))  # cut off: still refused
    assert nested_deeper_than("[" * 100_000 + "]" * 100_000)
    assert nested_deeper_than('{"a":' * 300 + "1" + "}" * 300)
    inside = "[" * 1000
    assert not nested_deeper_than(json.dumps([inside, inside]))
    assert not nested_deeper_than('["' + '\\"' * 10_000 + inside)  # an unterminated string
    assert nested_deeper_than('["\\\\"' + inside)  # the string ended: an escaped backslash
