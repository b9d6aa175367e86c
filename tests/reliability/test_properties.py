"""Property-based tests: parsing, validation, dialects and stream aggregation never break
their contracts, whatever the input."""

from __future__ import annotations

import inspect
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import TypeAdapter

from toolweave import (
    AiMessage,
    SchemaError,
    ScriptedChatModel,
    ToolArgumentsError,
    ToolCardError,
    ToolExecutionRequest,
    ToolService,
    tool,
)
from toolweave.chat import StreamAccumulator
from toolweave.dialects import (
    anthropic_tool,
    gemini_function_declaration,
    openai_responses_tool,
    openai_tool,
)
from toolweave.schema import JsonSchemaArgumentsValidator, parse_arguments

from .strategies import json_objects, python_types

PROFILE = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


# --- argument parsing -------------------------------------------------------------------------


@PROFILE
@given(json_objects)
def test_valid_json_objects_round_trip(obj: dict[str, Any]) -> None:
    text = json.dumps(obj)
    assert parse_arguments(text) == obj
    assert parse_arguments(f"```json\n{text}\n```") == obj
    assert parse_arguments(json.dumps(text)) == obj  # doubly encoded
    assert parse_arguments(text.encode()) == obj


@PROFILE
@given(st.text(max_size=200) | st.binary(max_size=200))
def test_any_input_gives_a_dict_or_a_typed_error(raw: str | bytes) -> None:
    try:
        value = parse_arguments(raw)
    except ToolArgumentsError as e:
        assert e.message and e.code == 189001
    else:
        assert isinstance(value, dict)


@PROFILE
@given(
    st.dictionaries(
        st.from_regex(r"[a-z]{1,6}", fullmatch=True),
        st.integers() | st.text(max_size=5) | st.booleans() | st.none(),
        min_size=1,
        max_size=5,
    )
)
def test_python_literal_and_trailing_comma_repairs(obj: dict[str, Any]) -> None:
    assert parse_arguments(repr(obj)) == obj
    text = json.dumps(obj)
    assert parse_arguments(text[:-1] + ",}") == obj


# --- validation ------------------------------------------------------------------------------------


@tool
def sample(
    name: str, count: int, ratio: float = 1.0, flags: list[bool] | None = None, mode: str = "x"
) -> str:
    """A tool with mixed parameters."""
    return f"{name}{count}{ratio}{flags}{mode}"


@PROFILE
@given(json_objects)
def test_function_validator_accepts_or_explains(obj: dict[str, Any]) -> None:
    for raw in (json.dumps(obj), obj):
        try:
            kwargs = sample.prepare_inputs(raw)
        except ToolArgumentsError as e:
            assert (
                e.message.startswith("Invalid arguments for tool 'sample':") or "JSON" in e.message
            )
            assert (
                e.message.endswith("Fix these arguments and call the tool again.")
                or "JSON" in e.message
            )
        else:
            assert set(kwargs) == {"name", "count", "ratio", "flags", "mode"}
            assert isinstance(kwargs["count"], int) and not isinstance(kwargs["count"], bool)


SCHEMA = {
    "type": "object",
    "properties": {
        "q": {"type": "string"},
        "n": {"type": "integer", "default": 3},
        "tags": {"type": "array", "items": {"type": "string"}},
        "nested": {"type": "object", "properties": {"x": {"type": "number"}}},
    },
    "required": ["q"],
}


@PROFILE
@given(json_objects)
def test_json_schema_validator_accepts_or_explains(obj: dict[str, Any]) -> None:
    validator = JsonSchemaArgumentsValidator(SCHEMA, tool_name="search")
    try:
        out = validator.validate_python(obj)
    except ToolArgumentsError as e:
        assert e.errors
    else:
        assert isinstance(out["q"], str) and isinstance(out["n"], int)


# --- dialects ------------------------------------------------------------------------------------


def _check_openai(entry: dict[str, Any]) -> None:
    from openai.types.chat import ChatCompletionFunctionToolParam

    TypeAdapter(ChatCompletionFunctionToolParam).validate_python(entry)
    fn = entry["function"]
    if fn.get("strict"):
        _assert_strict(fn["parameters"])


def _assert_strict(schema: Any) -> None:
    if isinstance(schema, dict):
        if schema.get("type") == "object" or "properties" in schema:
            assert schema.get("additionalProperties") is False
            assert sorted(schema.get("required", [])) == sorted(schema.get("properties", {}))
        assert "default" not in schema and "oneOf" not in schema
        for value in schema.values():
            _assert_strict(value)
    elif isinstance(schema, list):
        for value in schema:
            _assert_strict(value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(python_types, min_size=1, max_size=3))
def test_every_schema_is_valid_in_every_dialect_or_refused_clearly(types: list[Any]) -> None:
    from anthropic.types import ToolParam
    from google.genai import types as gtypes
    from openai.types.responses import FunctionToolParam

    params = [
        inspect.Parameter(f"p{i}", inspect.Parameter.KEYWORD_ONLY, annotation=t)
        for i, t in enumerate(types)
    ]

    def fn(**kwargs: Any) -> str:
        return "ok"

    fn.__signature__ = inspect.Signature(params)  # type: ignore[attr-defined]
    fn.__annotations__ = {f"p{i}": t for i, t in enumerate(types)}
    try:
        t = tool(fn, name="generated")
    except ToolCardError:
        return  # a type pydantic cannot describe is refused at declaration
    card = t.card
    for strict in (None, False, True):
        try:
            _check_openai(openai_tool(card, strict))
            TypeAdapter(FunctionToolParam).validate_python(openai_responses_tool(card, strict))
            TypeAdapter(ToolParam).validate_python(anthropic_tool(card, strict))
        except SchemaError as e:
            assert strict is True and "cannot" in e.message
    for mode in ("openapi", "json_schema"):
        try:
            decl = gemini_function_declaration(card, mode)  # type: ignore[arg-type]
        except SchemaError as e:
            assert mode == "openapi" and "recursive" in e.message
        else:
            gtypes.FunctionDeclaration.model_validate(decl)
            if mode == "openapi":
                dumped = json.dumps(decl)
                assert "additionalProperties" not in dumped and '"$ref"' not in dumped


# --- stream aggregation ------------------------------------------------------------------------------


@PROFILE
@given(
    st.lists(json_objects, min_size=1, max_size=3),
    st.lists(st.integers(1, 6), min_size=1, max_size=50),
    st.text(max_size=30),
)
def test_any_chunking_aggregates_to_the_same_message(
    calls: list[dict[str, Any]], cuts: list[int], text: str
) -> None:
    requests = [
        ToolExecutionRequest(id=f"c{i}", name=f"t{i}", arguments=json.dumps(c))
        for i, c in enumerate(calls)
    ]
    acc = StreamAccumulator()
    acc.add_text(text)
    for index, req in enumerate(requests):
        args, pos, k = req.arguments, 0, 0
        while pos < len(args):
            step = cuts[k % len(cuts)]
            acc.add_tool_fragment(
                index,
                req.id if pos == 0 else None,
                req.name if pos == 0 else None,
                args[pos : pos + step],
            )
            pos += step
            k += 1
    message = acc.ai_message()
    assert message.tool_execution_requests == tuple(requests)
    assert message.text == (text or None)


# --- loop invariants ------------------------------------------------------------------------------------

CALL_KINDS = st.sampled_from(["ok", "bad_json", "wrong_type", "unknown", "raises", "non_object"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.lists(st.lists(CALL_KINDS, min_size=1, max_size=4), min_size=1, max_size=4),
    st.sampled_from(["sync", "async"]),
)
def test_history_stays_valid_and_tools_run_at_most_once(rounds: list[list[str]], face: str) -> None:
    import asyncio

    from tests.service.helpers import assert_history_valid

    executed: list[str] = []

    @tool
    def ok(n: int) -> int:
        """Fine."""
        executed.append(f"ok{n}")
        return n

    @tool
    def raises(n: int) -> int:
        """Fails."""
        executed.append(f"raises{n}")
        raise RuntimeError("nope")

    arguments = {
        "ok": ("ok", '{"n": 1}'),
        "bad_json": ("ok", "n: 1 (not json)"),
        "wrong_type": ("ok", '{"n": "x"}'),
        "unknown": ("ghost", "{}"),
        "raises": ("raises", '{"n": 1}'),
        "non_object": ("ok", "[1]"),
    }
    script: list[Any] = []
    n = 0
    for round_kinds in rounds:
        calls = []
        for kind in round_kinds:
            name, args = arguments[kind]
            if kind in ("ok", "raises"):
                args = json.dumps({"n": n})
            calls.append(ToolExecutionRequest(id=f"id{n}", name=name, arguments=args))
            n += 1
        script.append(AiMessage(tool_execution_requests=calls))
    script.append(AiMessage("done"))
    service = ToolService(max_argument_retries=100).tools(ok, raises)
    model = ScriptedChatModel(script)
    if face == "sync":
        result = service.chat(model, None, "go")
    else:
        result = asyncio.run(service.achat(model, None, "go"))
    assert result.text == "done"
    assert_history_valid(result.messages)
    assert len(executed) == len(set(executed))
    assert len(result.tool_executions) == n


@pytest.mark.parametrize("depth", [50, 1000, 100_000])
def test_deep_nesting_is_a_typed_error(depth: int) -> None:
    raw = "[" * depth + "]" * depth
    with pytest.raises(ToolArgumentsError):
        parse_arguments('{"a": ' + raw + "}") if depth > 5000 else sample.prepare_inputs(
            '{"name": ' + raw + "}"
        )
