"""The linear JSON depth pre-scan used before every recursive parse of untrusted JSON."""

from __future__ import annotations

import json
import tracemalloc
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from toolweave._utils import jsondepth
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
    default = jsondepth._CHUNK
    jsondepth._CHUNK = 2  # slices of two: every edge case of the slicing
    try:
        assert nested_deeper_than(text, limit) == (_depth(value) > limit)
    finally:
        jsondepth._CHUNK = default


def test_limits_and_hostile_shapes() -> None:
    assert not nested_deeper_than("[" * MAX_JSON_DEPTH + "]" * MAX_JSON_DEPTH)
    assert nested_deeper_than("[" * (MAX_JSON_DEPTH + 1))  # cut off: still refused
    assert nested_deeper_than("[" * 100_000 + "]" * 100_000)
    assert nested_deeper_than('{"a":' * 300 + "1" + "}" * 300)
    inside = "[" * 1000
    assert not nested_deeper_than(json.dumps([inside, inside]))
    assert not nested_deeper_than('["' + '\\"' * 10_000 + inside)  # an unterminated string
    assert nested_deeper_than('["\\\\"' + inside)  # the string ended: an escaped backslash


def test_the_scan_is_bounded_in_memory_and_exact_across_its_slices() -> None:
    """A storm of quotes (a hostile answer up to the size limit) is scanned in slices: the
    memory it takes stays a small multiple of the text, not a list as long as it."""
    storm = b'""' * 4_000_000 + b"[]" * 300
    tracemalloc.start()
    try:
        assert not nested_deeper_than(storm)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 3 * len(storm), peak
    # strings and nesting that cross the slices' edges
    long_string = "[" * 10 + '"' + "[" * 200_000 + '"' + "]" * 10
    assert not nested_deeper_than(long_string)
    assert not nested_deeper_than('"' * 3 + "[" * 70_000)  # inside an unterminated string
    assert nested_deeper_than('"' * 2 + "[" * 70_000)  # after an empty one
    across = '"' + "[" * 70_000 + '"'  # a string longer than a slice
    assert not nested_deeper_than(across + "[" * 200 + "]" * 200)
    assert nested_deeper_than(across + "[" * 300 + "]" * 300)
    deep_across = "[" * 200 + " " * 70_000 + "[" * 100 + "]" * 300
    assert nested_deeper_than(deep_across)
