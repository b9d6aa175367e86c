"""Invariants of the argument repair pass and the OpenAPI import under arbitrary input, shared
by the atheris targets (tests/fuzz/fuzz_targets.py) and the hypothesis properties
(tests/fuzz/test_hardening_properties.py).

Each check takes raw fuzz bytes. `amplify` can blow a short pattern up to the size limits
(4 MiB for arguments), so both small and limit-sized inputs are reached. Only the documented
typed error may escape (`ToolArgumentsError`; `ToolCardError`), and each input must finish
within a generous time budget.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import Iterator
from typing import Any

from toolweave import ToolArgumentsError, ToolCardError, tool
from toolweave.http import tools_from_openapi
from toolweave.schema import JsonSchemaArgumentsValidator, parse_arguments
from toolweave.schema.arguments import MAX_ARGUMENTS_BYTES

ARGUMENTS_BUDGET = 5.0
"""Seconds one argument input may take through all entry points (instrumented code)."""
OPENAPI_BUDGET = 10.0
"""Seconds one OpenAPI document may take to import."""
OPENAPI_TEXT_LIMIT = 256 * 1024


@tool
def _sample(name: str, count: int, ratio: float = 1.0, tags: list[str] | None = None) -> str:
    """Fuzzed tool."""
    return name


_VALIDATOR = JsonSchemaArgumentsValidator(
    {
        "type": "object",
        "properties": {"q": {"type": "string"}, "n": {"type": "integer", "default": 3}},
        "required": ["q"],
        "additionalProperties": False,
    },
    tool_name="search",
)


def amplify(data: bytes, limit: int) -> bytes:
    """`data` as is (first byte even), or prefix + pattern * count + suffix, at most
    `limit` + 64 bytes (first byte odd): the layout is read from the next bytes."""
    if len(data) < 6 or not data[0] & 1:
        return data
    size = data[1] % 32 + 1
    pattern = data[2 : 2 + size] or b"{"
    count = int.from_bytes(data[2 + size : 5 + size] or b"\x01", "big")
    count = count % (limit // len(pattern) + 2)
    rest = data[5 + size :]
    half = len(rest) // 2
    return rest[:half] + pattern * count + rest[half:]


REPAIR_LIMITS = tuple(
    n.to_bytes(3, "big") for n in (1, 700, 4000, 16_000, 60_000, 2_000_000, 8_000_000)
)
"""Repetition counts for `amplify` around the repair limits (4 KiB, 64 KiB) and 4 MiB."""


class BudgetExceeded(AssertionError):
    """One input took longer than its budget."""


def _timed(budget: float, label: str, size: int, started: float) -> None:
    spent = time.monotonic() - started
    if spent > budget:
        raise BudgetExceeded(f"{label}: {size} bytes took {spent:.2f} s (budget {budget} s)")


def check_arguments(data: bytes) -> None:
    """Raw argument bytes (amplified up to the 4 MiB limit) through every parsing entry
    point: a dict or `ToolArgumentsError` with a short message, within the budget."""
    raw = amplify(data, MAX_ARGUMENTS_BYTES)
    started = time.monotonic()
    inputs: list[Any] = [raw]
    try:
        inputs.append(raw.decode("utf-8"))
    except UnicodeDecodeError:
        pass
    for value in inputs:
        for call in (parse_arguments, _sample.prepare_inputs, _VALIDATOR.validate_json):
            try:
                out = call(value)
            except ToolArgumentsError as e:
                assert e.message and len(e.message) <= ToolArgumentsError.max_message_chars
            else:
                assert isinstance(out, dict)
    _timed(ARGUMENTS_BUDGET, "arguments", len(raw), started)


def _ref_bomb(data: bytes) -> dict[str, Any]:
    """A document whose schemas refer to each other `fanout` times per level."""
    levels = data[1] % 12 if len(data) > 1 else 3
    fanout = data[2] % 16 if len(data) > 2 else 3
    shape = data[3] if len(data) > 3 else 0
    schemas: dict[str, Any] = {f"L{levels}": {"type": "string"}}
    for n in range(levels):
        ref = {"$ref": f"#/components/schemas/L{n + 1}"}
        if shape % 3 == 0:
            node: dict[str, Any] = {
                "type": "object",
                "properties": {f"p{i}": ref for i in range(fanout)},
            }
        elif shape % 3 == 1:
            node = {"allOf": [ref] * max(fanout, 1)}
        else:
            node = {"type": "array", "items": {"anyOf": [ref] * max(fanout, 1)}}
        schemas[f"L{n}"] = node
    if shape & 8:  # a cycle back to the top
        schemas[f"L{levels}"] = {"$ref": "#/components/schemas/L0"}
    body = {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/L0"}}}}
    parameter = {"name": "q", "in": "query", "schema": {"$ref": "#/components/schemas/L0"}}
    return {
        "openapi": "3.0.3",
        "servers": [{"url": "https://api.example.com"}],
        "paths": {"/x": {"post": {"requestBody": body, "parameters": [parameter]}}},
        "components": {"schemas": schemas},
    }


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """The import logs a warning per skipped part; fuzzed documents skip many."""
    log = logging.getLogger(name)
    was, log.disabled = log.disabled, True
    try:
        yield
    finally:
        log.disabled = was


def check_openapi(data: bytes) -> None:
    """Bytes as an OpenAPI document (JSON or YAML text, the parsed dict, or a generated
    `$ref` bomb): a list of tools or `ToolCardError`, within the budget."""
    started = time.monotonic()
    candidates: list[Any] = []
    if data[:1] == b"\x00":
        candidates.append(_ref_bomb(data))
    else:
        text = data[:OPENAPI_TEXT_LIMIT].decode("utf-8", errors="replace")
        candidates.append(text if "\n" in text or text.lstrip()[:1] in "{[" else text + "\n")
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict):
            parsed.setdefault("openapi", "3.0.3")
            candidates.append(parsed)
    for doc in candidates:
        try:
            with _quiet("toolweave.http"):
                tools = tools_from_openapi(doc, base_url="https://api.example.com")
        except ToolCardError as e:
            assert e.message
        else:
            for t in tools:
                json.dumps(t.card.input_params)
    _timed(OPENAPI_BUDGET, "openapi", len(data), started)
