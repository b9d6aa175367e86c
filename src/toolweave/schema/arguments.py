"""Parsing the model's raw argument string: a strict parse, then a documented repair pass.

Repairs, tried in order only after a strict `json.loads` failed:

1. Markdown code fences around the JSON are removed (```` ```json {...} ``` ````).
2. An object wrapped in one extra pair of quotes, with its inner quotes escaped or not
   (`"{\\"a\\": 1}"`), is unwrapped.
3. Trailing commas before `}` or `]` (outside strings) are removed.
4. A Python literal (`{'a': 1, 'b': True, 'c': None}`) is read with `ast.literal_eval`.
5. Single quotes mixed with JSON, unquoted keys and similar slips are fixed by the
   `json_repair` library, but only when the text starts like an object.

Text that ends inside a string or with a bracket left open is never completed: it is what a
reply cut off by its token limit looks like, and completing it would run the tool on
invented values (`{"path": "/home/us` becoming a real path). It raises `ToolArgumentsError`
saying the arguments were cut off.

Nothing is silently dropped either: text after the object's closing brace (`{"amount": 1}00`,
a second object, a trailing sentence) raises `ToolArgumentsError` instead of running the tool
on the first part.

The work is bounded and linear: repairs 1-4 run only on strings of at most
`REPAIR_MAX_BYTES` (64 KiB), the general fixer (5, slow per character) only on strings of at
most `GENERAL_REPAIR_MAX_BYTES` (4 KiB). A longer string must be strict JSON; that check, and
telling a cut-off string from a malformed one, run at C speed. Async tool calls parse strings
longer than `PARSE_OFF_LOOP_BYTES` (256 KiB) in a worker thread, so the event loop is not
held. Messages for the model are at most a few KB whatever the input.

A valid JSON string whose content is itself a JSON object (double encoding) is decoded once
more. Anything that is still not a JSON object raises `ToolArgumentsError` with a message the
model can act on.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from .._utils.jsondepth import MAX_JSON_DEPTH, nested_deeper_than
from ..errors import ToolArgumentsError

__all__ = [
    "GENERAL_REPAIR_MAX_BYTES",
    "MAX_ARGUMENTS_BYTES",
    "PARSE_OFF_LOOP_BYTES",
    "REPAIR_MAX_BYTES",
    "parse_arguments",
    "repair_arguments",
]

MAX_ARGUMENTS_BYTES = 4 * 1024 * 1024
"""Argument strings longer than this are refused before parsing."""
REPAIR_MAX_BYTES = 64 * 1024
"""Argument strings longer than this that are not strict JSON are not repaired."""
GENERAL_REPAIR_MAX_BYTES = 4 * 1024
"""The general fixer (`json_repair`: unquoted keys, mixed quotes) runs only up to this."""
PARSE_OFF_LOOP_BYTES = 256 * 1024
"""Async tool calls parse and validate argument strings longer than this off the loop."""

_FENCE = re.compile(r"^\s*```[a-zA-Z0-9_-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return type(value).__name__


def _decode(raw: str | bytes | bytearray, tool_name: str | None) -> str:
    if isinstance(raw, (bytes, bytearray)):
        try:
            return bytes(raw).decode("utf-8")
        except UnicodeDecodeError as e:
            raise ToolArgumentsError(
                f"The arguments are not valid UTF-8 text (byte {e.start}). "
                "Send the arguments as a JSON object in UTF-8.",
                tool_name=tool_name,
            ) from None
    return raw


def _loads(text: str) -> Any:
    if len(text) > MAX_JSON_DEPTH and nested_deeper_than(text):
        raise _too_deep()
    try:
        return json.loads(text)
    except RecursionError:  # only when called with little stack left
        raise _too_deep() from None
    except json.JSONDecodeError:
        raise
    except ValueError:  # an integer over Python's digit limit (4,300 by default)
        raise ToolArgumentsError(
            "The arguments hold a number with too many digits to read. Send it as a string."
        ) from None


def _too_deep() -> ToolArgumentsError:
    return ToolArgumentsError(
        "The arguments are nested too deeply to parse. Send a flatter JSON object."
    )


def _join_surrogates(value: Any) -> Any:
    """Combine UTF-16 surrogate pairs left as two characters by `ast.literal_eval` and
    `json_repair` (which, unlike `json.loads`, do not pair `\\ud83d\\ude00` escapes)."""
    if isinstance(value, str):
        if any("\ud800" <= ch <= "\udfff" for ch in value):
            return value.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return value
    if isinstance(value, dict):
        return {_join_surrogates(k): _join_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_join_surrogates(v) for v in value]
    return value


def repair_arguments(text: str) -> dict[str, Any] | None:
    """Try the repair pass on `text`; return the object, or None when nothing works (text
    after the object included: it is never dropped)."""
    try:
        return _repaired(text)
    except _Trailing:
        return None


def _repaired(text: str) -> dict[str, Any] | None:
    repaired = _repair(text)
    return _join_surrogates(repaired) if repaired is not None else None


def _drop_trailing_commas(text: str) -> str:
    """Remove commas directly before `}` or `]`, outside string literals (JSON escapes kept
    exact, which `json_repair` does not always do)."""
    out: list[str] = []
    in_string = escaped = False
    n = len(text)
    for i, ch in enumerate(text):
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
        elif ch == '"':
            in_string = True
        elif ch == ",":
            j = i + 1
            while j < n and text[j] in " \t\r\n":
                j += 1
            if j < n and text[j] in "}]":
                continue
        out.append(ch)
    return "".join(out)


def _scan(text: str, *, first_only: bool = False) -> tuple[bool, int]:
    """One pass over `text`: whether it ends inside a string (double- or single-quoted) or
    with a bracket left open, and, with `first_only`, where the first top-level bracketed
    value ends (the scan stops there; `len(text)` when it does not end)."""
    depth = 0
    quote = ""
    escaped = False
    for i, ch in enumerate(text):
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = ""
        elif ch == '"' or ch == "'":
            quote = ch
        elif ch == "{" or ch == "[":
            depth += 1
        elif ch == "}" or ch == "]":
            depth -= 1
            if first_only and depth == 0:
                return False, i + 1
    return bool(quote) or depth > 0, len(text)


def _cut_off(text: str) -> bool:
    """Whether `text` ends inside a string or with a bracket left open."""
    return _scan(text)[0]


def _trailing_error(tool_name: str | None) -> ToolArgumentsError:
    return ToolArgumentsError(
        "The arguments are not a single JSON object: more text follows the object's closing "
        "brace (a second object, extra digits or words). Send exactly one JSON object and "
        "nothing after it.",
        tool_name=tool_name,
    )


class _Trailing(Exception):
    """The repair pass found text after the object."""


def _repair(text: str) -> dict[str, Any] | None:
    candidate = text.strip()
    fenced = _FENCE.match(candidate)
    if fenced:
        candidate = fenced.group(1).strip()
        try:
            value = _loads(candidate)
            if isinstance(value, dict):
                return value
        except ValueError:
            pass
    if len(candidate) >= 2 and candidate[0] == '"' and candidate[-1] == '"':
        inner = candidate[1:-1].replace('\\"', '"').strip()
        try:
            value = _loads(inner)
            if isinstance(value, dict):
                return value
        except ValueError:
            pass
        candidate = inner
    if not candidate.startswith("{") or nested_deeper_than(candidate):
        return None
    cut_off, end = _scan(candidate, first_only=True)
    if cut_off:
        return None
    if candidate[end:].strip():
        raise _Trailing
    without_commas = _drop_trailing_commas(candidate)
    if without_commas != candidate:
        try:
            value = _loads(without_commas)
            if isinstance(value, dict):
                return value
        except ValueError:
            pass
    try:
        value = ast.literal_eval(candidate)
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            json.dumps(value)  # only JSON-representable values
            return value
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        pass
    if len(candidate) > GENERAL_REPAIR_MAX_BYTES:
        return None
    import json_repair  # loaded when first needed (import time)

    try:
        value = json_repair.loads(candidate)
    except Exception:
        return None
    if isinstance(value, dict) and (value or candidate.replace(" ", "") in ("{}", "{")):
        return value
    return None


def _unrepaired(text: str, error: json.JSONDecodeError, tool_name: str | None) -> Exception:
    """The error for a string too long to repair, from the strict parser's verdict."""
    if error.msg.startswith("Extra data"):
        return _trailing_error(tool_name)
    if error.msg.startswith("Unterminated string") or error.pos >= len(text.rstrip()):
        return ToolArgumentsError(
            "The arguments are not valid JSON: they stop before the object is complete, as "
            "if cut off. Send the whole object again; if it is long, make it shorter.",
            tool_name=tool_name,
        )
    return ToolArgumentsError(
        f"The arguments are not valid JSON ({error.msg} at character {error.pos}), and at "
        f"{len(text)} characters they are too long to be repaired (limit "
        f"{REPAIR_MAX_BYTES}). Send strict JSON: one object, double-quoted keys and strings.",
        tool_name=tool_name,
    )


def parse_arguments(
    raw: str | bytes | bytearray | None, *, tool_name: str | None = None
) -> dict[str, Any]:
    """Parse a tool call's raw arguments into a dict.

    Empty, blank or `null` arguments give `{}`. See the module docstring for the repair
    rules. Raises `ToolArgumentsError` when the result is not a JSON object.
    """
    if raw is None:
        return {}
    if len(raw) > MAX_ARGUMENTS_BYTES:
        raise ToolArgumentsError(
            f"The arguments are too large ({len(raw)} bytes; the limit is "
            f"{MAX_ARGUMENTS_BYTES}). Send a smaller JSON object.",
            tool_name=tool_name,
        )
    text = _decode(raw, tool_name)
    if not text.strip():
        return {}
    try:
        value = _loads(text)
    except ToolArgumentsError as e:  # before ValueError: it is a subclass
        e.tool_name = tool_name
        raise
    except json.JSONDecodeError as e:
        if len(text) > REPAIR_MAX_BYTES:
            raise _unrepaired(text, e, tool_name) from None
        try:
            repaired = _repaired(text)
        except _Trailing:
            raise _trailing_error(tool_name) from None
        if repaired is None and _cut_off(_FENCE.sub(r"\1", text.strip())):
            raise ToolArgumentsError(
                "The arguments are not valid JSON: they stop before the object is complete "
                "(a string or a bracket is left open), as if cut off. Send the whole object "
                "again; if it is long, make it shorter.",
                tool_name=tool_name,
            ) from None
        if repaired is None:
            raise ToolArgumentsError(
                "The arguments are not valid JSON. Send a single JSON object, for example "
                '{"name": "value"}, with double-quoted keys and no trailing text.',
                tool_name=tool_name,
            ) from None
        return repaired
    if isinstance(value, str) and value.strip().startswith("{"):
        try:
            inner = _loads(value)
        except ToolArgumentsError as e:
            e.tool_name = tool_name
            raise
        except ValueError:
            inner = None
        if isinstance(inner, dict):
            return inner
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ToolArgumentsError(
            f"The arguments must be a JSON object, but a JSON {_json_type(value)} was sent. "
            'Wrap the values in an object keyed by parameter name, e.g. {"city": "Paris"}.',
            tool_name=tool_name,
        )
    return value
