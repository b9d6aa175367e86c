"""`JsonSchemaArgumentsValidator`'s fast path for flat schemas of scalars: for every input it
returns exactly what the general path (coercion, jsonschema, defaults) returns, or leaves
the input to it."""

from __future__ import annotations

import enum
import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolweave import ToolArgumentsError
from toolweave.schema import JsonSchemaArgumentsValidator

LOOKUP = {
    "properties": {
        "key": {"title": "Key", "type": "string"},
        "limit": {"default": 10, "title": "Limit", "type": "integer"},
    },
    "required": ["key"],
    "type": "object",
    "title": "lookupArguments",
}

RICH = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "title": "richArguments",
    "description": "every keyword the fast path takes",
    "examples": [{"s": "a@b.c", "r": 1, "t": "x"}],
    "$comment": "flat scalars only",
    "properties": {
        "s": {"type": "string", "format": "email", "examples": ["a@b.c"]},
        "i": {"type": "integer", "default": 3},
        "n": {"type": "number", "default": 0.5, "description": "ratio"},
        "b": {"type": "boolean", "default": False},
        "e": {"type": "string", "enum": ["c", "f"], "default": "kelvin"},  # outside its enum
        "r": {"type": "integer", "default": 7},  # required with a default
        "t": {"type": "string", "enum": ["x", "y"], "default": "x"},  # required, enum
        "any": {"title": "Anything", "default": {"deep": [1, 2]}},
        "tags": {"default": ["a"]},
        "none": {"type": "string", "default": None},
    },
    "required": ["s", "r", "t"],
    "additionalProperties": False,
}


class Colour(enum.IntEnum):
    RED = 1


class Tag(str):
    pass


class MyInt(int):
    pass


class MyFloat(float):
    pass


SCALARS: list[Any] = [
    "alpha",
    "",
    " 3 ",
    "3",
    "2.5",
    "c",
    "f",
    "x",
    "kelvin",
    "a@b.c",
    "not an email",
    Tag("c"),
    0,
    3,
    -7,
    10**30,
    MyInt(3),
    Colour.RED,
    True,
    False,
    0.5,
    2.0,
    -0.0,
    math.nan,
    math.inf,
    -math.inf,
    MyFloat(1.5),
    None,
    [],
    [1, "a"],
    {},
    {"deep": None},
    ("t",),
]


def _same(a: Any, b: Any) -> bool:
    """Equal, of the same types all the way down, and NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    return bool(a == b)


def _outcome(call: Any, data: Any) -> tuple[str, Any]:
    try:
        return "ok", call(data)
    except ToolArgumentsError as e:
        return "error", (e.message, e.errors)


def _assert_equivalent(validator: JsonSchemaArgumentsValidator, data: Any) -> bool:
    """Asserts both paths agree on `data`; whether the fast path answered it alone."""
    fast = _outcome(validator.validate_python, data)
    slow = _outcome(validator._validate_slow, {} if data is None else data)
    assert fast[0] == slow[0], (data, fast, slow)
    if fast[0] == "ok":
        assert _same(fast[1], slow[1]), (data, fast, slow)
    else:
        assert fast[1][0] == slow[1][0]
        assert len(fast[1][1]) == len(slow[1][1])
    plain = validator._plain
    return (
        plain is not None
        and type(data) is dict
        and plain.validate(data, validator._extra_allowed) is not None
    )


def test_the_lookup_schema_is_plain_and_answered_fast() -> None:
    v = JsonSchemaArgumentsValidator(LOOKUP, tool_name="lookup")
    assert v._plain is not None
    assert _assert_equivalent(v, {"key": "alpha", "limit": 3})
    assert _assert_equivalent(v, {"key": "alpha"})
    assert v.validate_python({"key": "alpha"}) == {"key": "alpha", "limit": 10}
    assert v.validate_json('{"key": "alpha"}') == {"key": "alpha", "limit": 10}
    # coercion, nulls, missing and unknown keys: the general path, unchanged
    assert not _assert_equivalent(v, {"key": "alpha", "limit": "3"})
    assert v.validate_python({"key": "alpha", "limit": "3"}) == {"key": "alpha", "limit": 3}
    assert v.validate_python({"key": "alpha", "limit": 2.0}) == {"key": "alpha", "limit": 2}
    assert v.validate_python({"key": 12}) == {"key": "12", "limit": 10}
    assert v.validate_python({"key": "alpha", "limit": None}) == {"key": "alpha", "limit": 10}
    for bad in ({"limit": 3}, {"key": "a", "lim": 3}, {"key": "a", "limit": True}, {"key": None}):
        assert not _assert_equivalent(v, bad)
        with pytest.raises(ToolArgumentsError):
            v.validate_python(bad)


def test_defaults_keep_the_general_paths_order() -> None:
    # a required default is filled before validation, the others after: the order shows it
    v = JsonSchemaArgumentsValidator(
        {
            "type": "object",
            "properties": {
                "a": {"type": "integer", "default": 1},
                "b": {"type": "integer", "default": 2},
                "c": {"type": "string"},
            },
            "required": ["b"],
        },
        tool_name="t",
    )
    assert _assert_equivalent(v, {"c": "x"})
    assert list(v.validate_python({"c": "x"}).items()) == [("c", "x"), ("b", 2), ("a", 1)]


def test_mutable_defaults_are_copied_on_the_fast_path() -> None:
    v = JsonSchemaArgumentsValidator(RICH, tool_name="t")
    first = v.validate_python({"s": "a@b.c"})
    assert _assert_equivalent(v, {"s": "a@b.c"})
    assert first["tags"] == ["a"] and first["any"] == {"deep": [1, 2]}
    first["tags"].append("mutated")
    first["any"]["deep"].append(3)
    again = v.validate_python({"s": "a@b.c"})
    assert again["tags"] == ["a"] and again["any"] == {"deep": [1, 2]}
    assert RICH["properties"]["tags"]["default"] == ["a"]  # type: ignore[index]


@pytest.mark.parametrize("value", SCALARS, ids=repr)
@pytest.mark.parametrize("key", ["s", "i", "n", "b", "e", "t", "any", "tags", "none", "zz"])
def test_every_value_in_every_property_agrees_with_the_general_path(key: str, value: Any) -> None:
    v = JsonSchemaArgumentsValidator(RICH, tool_name="t")
    assert v._plain is not None
    _assert_equivalent(v, {"s": "a@b.c", key: value})
    _assert_equivalent(v, {key: value, "s": "a@b.c", "r": 1})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object"},
        {"type": "object", "additionalProperties": True},
        {"type": "object", "additionalProperties": False},
        {"type": "object", "properties": {}},
        {
            "type": "object",
            "properties": {"a": {"type": "integer"}},
            "additionalProperties": True,
            "required": ["a", "extra"],
        },
        {"$schema": "http://json-schema.org/draft-04/schema#", **LOOKUP},
        {"$schema": "http://json-schema.org/draft-07/schema#", **LOOKUP},
    ],
    ids=repr,
)
@pytest.mark.parametrize(
    "data",
    [
        {},
        {"a": 1},
        {"a": "1"},
        {"a": None},
        {"a": True},
        {"extra": None},
        {"a": 1, "extra": [1, {"x": None}]},
        {"key": "k", "limit": 1.0},
        {"key": "k", "limit": 5},
    ],
    ids=repr,
)
def test_extra_keys_and_drafts_agree_with_the_general_path(
    schema: dict[str, Any], data: dict[str, Any]
) -> None:
    v = JsonSchemaArgumentsValidator(schema, tool_name="t")
    assert v._plain is not None
    _assert_equivalent(v, data)


@pytest.mark.parametrize(
    "data",
    [None, [], "text", 3, {"key": "a"}.items()],
    ids=repr,
)
def test_non_dict_arguments_take_the_general_path(data: Any) -> None:
    v = JsonSchemaArgumentsValidator(LOOKUP, tool_name="t")
    _assert_equivalent(v, data)


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "object", "properties": {"a": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}},
        {"type": "object", "properties": {"a": {"$ref": "#/$defs/A"}}, "$defs": {"A": {}}},
        {"type": "object", "properties": {"a": {"type": "integer", "minimum": 0}}},
        {"type": "object", "properties": {"a": {"type": "string", "pattern": "^x"}}},
        {"type": "object", "properties": {"a": {"type": "string", "minLength": 1}}},
        {"type": "object", "properties": {"a": {"type": "object"}}},
        {"type": "object", "properties": {"a": {"type": "array"}}},
        {"type": "object", "properties": {"a": {"type": "null"}}},
        {"type": "object", "properties": {"a": {"type": ["integer", "null"]}}},
        {"type": "object", "properties": {"a": {"type": "integer", "enum": [1, 2]}}},
        {"type": "object", "properties": {"a": {"type": "string", "enum": ["x", 1]}}},
        {"type": "object", "properties": {"a": {"enum": ["x"]}}},
        {"type": "object", "properties": {"a": {"const": "x"}}},
        {"type": "object", "properties": {"a": {"type": "integer", "format": "int32"}}},
        {"type": "object", "properties": {"a": True}},
        {"type": "object", "properties": {}, "patternProperties": {"^x_": {"type": "integer"}}},
        {"type": "object", "additionalProperties": {"type": "integer"}},
        {"type": "object", "minProperties": 1},
        {"properties": {"a": {"type": "integer"}}},
        {"$schema": "http://json-schema.org/draft-03/schema#", "type": "object"},
        # a required default is coerced before validation: only the general path does that
        {
            "type": "object",
            "properties": {"a": {"type": "integer", "default": "5"}},
            "required": ["a"],
        },
        {
            "type": "object",
            "properties": {"a": {"type": "string", "enum": ["x"], "default": "y"}},
            "required": ["a"],
        },
    ],
    ids=repr,
)
def test_schemas_beyond_flat_scalars_take_the_general_path(schema: dict[str, Any]) -> None:
    v = JsonSchemaArgumentsValidator(schema, tool_name="t")
    assert v._plain is None
    for data in ({}, {"a": "5"}, {"a": 5}, {"a": None}, {"x_1": 2}, {"b": 1}):
        _assert_equivalent(v, data)


def test_required_default_that_needs_coercion_is_still_coerced() -> None:
    v = JsonSchemaArgumentsValidator(
        {
            "type": "object",
            "properties": {"a": {"type": "integer", "default": "5"}},
            "required": ["a"],
        },
        tool_name="t",
    )
    assert v.validate_python({}) == {"a": 5}


# --- property: random flat schemas, random arguments ------------------------------------------

_TYPES = ("string", "integer", "number", "boolean", None)
_values = st.one_of(
    st.sampled_from(SCALARS),
    st.text(max_size=4),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
)


@st.composite
def _plain_schemas(draw: st.DrawFn) -> dict[str, Any]:
    names = draw(st.lists(st.sampled_from("abcdef"), unique=True, max_size=5))
    props: dict[str, Any] = {}
    for name in names:
        kind = draw(st.sampled_from(_TYPES))
        sub: dict[str, Any] = {"title": name.upper()}
        if kind is not None:
            sub["type"] = kind
        if kind == "string" and draw(st.booleans()):
            sub["enum"] = draw(st.lists(st.sampled_from(["x", "y", "3", ""]), min_size=1))
        if draw(st.booleans()):
            sub["default"] = draw(st.one_of(st.none(), _values, st.just([1]), st.just({"k": 1})))
        props[name] = sub
    schema: dict[str, Any] = {"type": "object", "properties": props}
    if names:
        schema["required"] = draw(st.lists(st.sampled_from(names), unique=True))
    extra = draw(st.sampled_from([None, True, False]))
    if extra is not None:
        schema["additionalProperties"] = extra
    if not names and draw(st.booleans()):
        del schema["properties"]
    return schema


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    _plain_schemas(),
    st.dictionaries(st.sampled_from("abcdefz"), st.one_of(st.none(), _values), max_size=6),
)
def test_random_flat_schemas_agree_with_the_general_path(
    schema: dict[str, Any], data: dict[str, Any]
) -> None:
    v = JsonSchemaArgumentsValidator(schema, tool_name="t")
    _assert_equivalent(v, data)
