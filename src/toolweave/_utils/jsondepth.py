"""`nested_deeper_than`: whether JSON text nests arrays and objects deeper than a limit.

The check is linear in time, bounded in memory and recursion-free, so a recursive parser
(`json.loads`, and every walk over what it returns) is never handed text that would take
it near the interpreter's recursion limit, where the garbage collector's finalizers start
failing too. Short texts, and texts with few brackets, are settled by two `count` calls.
"""

from __future__ import annotations

from itertools import accumulate

__all__ = ["MAX_JSON_DEPTH", "nested_deeper_than"]

MAX_JSON_DEPTH = 256
"""The deepest nesting of arrays and objects accepted from a provider, a model or an API."""

_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'"[]{}')
_ONE_KIND = bytes.maketrans(b"{}", b"[]")  # depth counts brackets, whatever their kind
_STEP = {ord("["): 1, ord("]"): -1}
_CHUNK = 1 << 16


def nested_deeper_than(text: str | bytes, limit: int = MAX_JSON_DEPTH) -> bool:
    """Whether `text` (str, or UTF-8 bytes), read as JSON, opens more than `limit` arrays or
    objects at once (brackets inside strings do not count). Exact for valid JSON; for
    invalid JSON an estimate, which the parser then refuses anyway."""
    if len(text) <= limit:
        return False
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if data.count(b"[") + data.count(b"{") <= limit:
        return False
    if b"\\" in data:  # escapes leave the quote structure: "\\" then "\"" (valid JSON pairs)
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    skeleton = data.translate(_ONE_KIND, _NOT_STRUCTURE)  # quotes, "[" and "]" only
    depth = 0
    in_string = 0
    # in slices, so that a storm of quotes never makes a list as long as the text
    for start in range(0, len(skeleton), _CHUNK):
        pieces = skeleton[start : start + _CHUNK].split(b'"')
        outside = b"".join(pieces[in_string::2])  # the brackets between strings
        if len(pieces) % 2 == 0:  # an odd number of quotes: the slice ends in the other state
            in_string ^= 1
        # Without its innermost pairs ("[]", at C speed) the slice peaks at most one level
        # lower; only a peak of exactly `limit` needs the slice itself.
        peak = _peak(outside.replace(b"[]", b""), depth)
        if peak > limit or (peak == limit and _peak(outside, depth) > limit):
            return True
        depth += outside.count(b"[") - outside.count(b"]")
    return False


def _peak(brackets: bytes, depth: int) -> int:
    """The deepest level reached by `brackets` ("[" and "]") from `depth`."""
    return max(accumulate(map(_STEP.__getitem__, brackets), initial=depth))
