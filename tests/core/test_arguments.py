"""Argument parsing and repair (LangChain4j ToolExecutionRequestUtilTest) and bad input that
must end in ToolArgumentsError, never a bare exception."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolweave import (
    DefaultToolExecutor,
    ToolArgumentsError,
    ToolCard,
    ToolExecutionRequest,
    parse_arguments,
    tool,
)
from toolweave.schema import MAX_ARGUMENTS_BYTES, JsonSchemaArgumentsValidator
from toolweave.tools import LocalFunction

NOT_JSON = (
    "The arguments are not valid JSON. Send a single JSON object, for example "
    '{"name": "value"}, with double-quoted keys and no trailing text.'
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("", {}),
        ("   ", {}),
        ("{}", {}),
        ("null", {}),
        (None, {}),
        ('{"a": 1}', {"a": 1}),
        ('{"a": [1, 2,], "b": {"c": 3,},}', {"a": [1, 2], "b": {"c": 3}}),
        ('"{\\"a\\": 1}"', {"a": 1}),
        ('"{"a": 1}"', {"a": 1}),
        ('{"q": "say \\"hi\\"", "n": 1,}', {"q": 'say "hi"', "n": 1}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ('```\n{"a": 1}\n```', {"a": 1}),
        ("{'a': 'x', 'b': 2}", {"a": "x", "b": 2}),
        ("{'a': True, 'b': None, 'c': False}", {"a": True, "b": None, "c": False}),
        (json.dumps(json.dumps({"a": 1})), {"a": 1}),
        (b'{"a": "\xc3\xa9"}', {"a": "é"}),
    ],
    ids=[
        "empty",
        "blank",
        "empty-object",
        "null",
        "none",
        "plain",
        "trailing-commas-nested",
        "quoted-escaped",
        "quoted-unescaped",
        "escaped-quotes-kept",
        "code-fence-json",
        "code-fence",
        "single-quotes",
        "python-literals",
        "doubly-encoded",
        "utf8-bytes",
    ],
)
def test_parse_and_repair(raw: Any, expected: dict[str, Any]) -> None:
    assert parse_arguments(raw) == expected


@pytest.mark.parametrize(
    ("raw", "kind"),
    [("[1, 2]", "array"), ("42", "number"), ('"hello"', "string"), ("true", "boolean")],
)
def test_non_object_json(raw: str, kind: str) -> None:
    with pytest.raises(ToolArgumentsError) as e:
        parse_arguments(raw, tool_name="t")
    assert e.value.message == (
        f"The arguments must be a JSON object, but a JSON {kind} was sent. "
        'Wrap the values in an object keyed by parameter name, e.g. {"city": "Paris"}.'
    )
    assert e.value.tool_name == "t"


@pytest.mark.parametrize("raw", ["not json at all", "]", "```\nnope\n```"])
def test_invalid_json_message(raw: str) -> None:
    with pytest.raises(ToolArgumentsError) as e:
        parse_arguments(raw)
    assert e.value.message == NOT_JSON


CUT_OFF = [
    '{"path": ',
    '{"path": "/home/user/projects/old',
    '{"city": "Paris"',
    '{"items": [1, 2, 3',
    '{"a": 1, "b": ',
    "{'path': '/tmp/x",
    '```json\n{"path": "/ho',
    "{{{{",
]


@pytest.mark.parametrize("raw", CUT_OFF)
def test_cut_off_arguments_are_never_completed(raw: str) -> None:
    """A reply stopped by its token limit must not run a tool on invented values."""
    with pytest.raises(ToolArgumentsError) as e:
        parse_arguments(raw, tool_name="t")
    assert "cut off" in e.value.message and e.value.tool_name == "t"


def test_cut_off_arguments_do_not_run_the_tool() -> None:
    from toolweave import AiMessage, ScriptedChatModel, ToolService

    ran: list[str] = []

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        ran.append(path)
        return "deleted"

    call = ToolExecutionRequest(id="c1", name="delete_file", arguments='{"path": "/home/us')
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[call]), AiMessage("ok")])
    result = ToolService().tools(delete_file).chat(model, None, "clean up")
    assert ran == []
    [execution] = result.tool_executions
    assert execution.result.is_error and "cut off" in execution.result.text


@tool
def target(a: int, items: list[Any] = []) -> int:  # noqa: B006 - copied by pydantic
    return a


JSON_TOOL = LocalFunction(
    ToolCard(
        name="jtarget",
        input_params={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "items": {"type": "array"}},
            "required": ["a"],
        },
    ),
    lambda a, items=None: a,
)

DEEP = '{"a": 1, "items": ' + "[" * 100_000 + "]" * 100_000 + "}"
HUGE = '{"a": 1, "items": ["' + "x" * (MAX_ARGUMENTS_BYTES + 10) + '"]}'


def _all_paths(t: Any, raw: Any) -> list[Any]:
    """Every public way raw model arguments reach a tool."""
    paths: list[Any] = [
        lambda: parse_arguments(raw),
        lambda: t.invoke(raw),
        lambda: t.validator.validate_json(raw),
    ]
    if isinstance(raw, str):
        paths.append(
            lambda: DefaultToolExecutor(t).execute_with_result(
                ToolExecutionRequest(name=t.name, arguments=raw)
            )
        )
    return paths


BAD_INPUTS = {
    "invalid-json": ("bad json", NOT_JSON),
    "cut-off": ('{"a": 1, "items": ["x', "The arguments are not valid JSON: they stop before"),
    "array": ("[1]", "The arguments must be a JSON object, but a JSON array was sent."),
    "number": ("3", "The arguments must be a JSON object, but a JSON number was sent."),
    "string": ('"x"', "The arguments must be a JSON object, but a JSON string was sent."),
    "huge": (
        HUGE,
        f"The arguments are too large ({len(HUGE)} bytes; the limit is {MAX_ARGUMENTS_BYTES}).",
    ),
    "deep": (DEEP, "The arguments are nested too deeply to parse. Send a flatter JSON object."),
    "non-utf8": (b'{"a": "\xff"}', "The arguments are not valid UTF-8 text (byte 7)."),
}


@pytest.mark.parametrize("t", [target, JSON_TOOL], ids=["signature", "json-schema"])
@pytest.mark.parametrize("case", list(BAD_INPUTS))
def test_bad_input_is_always_a_tool_arguments_error(t: Any, case: str) -> None:
    raw, expected = BAD_INPUTS[case]
    for path in _all_paths(t, raw):
        with pytest.raises(ToolArgumentsError) as e:
            path()
        assert e.value.message.startswith(expected), e.value.message


def _nested_arguments(depth: int) -> str:
    """An object holding arrays nested so that the whole text is `depth` levels deep."""
    return '{"a": 1, "items": ' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


@pytest.mark.parametrize("t", [target, JSON_TOOL], ids=["signature", "json-schema"])
@pytest.mark.parametrize(
    "raw",
    [
        _nested_arguments(257),
        _nested_arguments(900),  # under the recursion limit: json.loads alone takes it
        json.dumps(_nested_arguments(300)),  # double-encoded
        "```json\n" + _nested_arguments(300) + "\n```",  # fenced
    ],
    ids=["257", "900", "double-encoded", "fenced"],
)
def test_arguments_nested_past_the_depth_limit_are_refused_before_parsing(t: Any, raw: str) -> None:
    for path in _all_paths(t, raw):
        with pytest.raises(ToolArgumentsError) as e:
            path()
        assert e.value.message.startswith("The arguments are nested too deeply to parse.")


def test_arguments_at_the_depth_limit_and_brackets_in_strings_are_fine() -> None:
    assert parse_arguments(_nested_arguments(256))["a"] == 1
    text = "[{" * 400
    assert parse_arguments(json.dumps({"a": 1, "items": [text]})) == {"a": 1, "items": [text]}
    quoted = '\\"' + text  # an escaped backslash, then the string's end is not escaped
    assert parse_arguments(json.dumps({"a": quoted}))["a"] == quoted


@pytest.mark.parametrize("t", [target, JSON_TOOL], ids=["signature", "json-schema"])
def test_json_text_in_a_string_is_not_coerced_past_the_depth_limit(t: Any) -> None:
    """An array argument sent as JSON text is decoded only within the same depth limit."""
    assert t.invoke({"a": 1, "items": "[[1]]"}) == 1
    for raw in (
        {"a": 1, "items": "[" * 300 + "]" * 300},
        '{"a": 1, "items": "' + "[" * 300 + "]" * 300 + '"}',
    ):
        with pytest.raises(ToolArgumentsError, match="items"):
            t.invoke(raw)


@pytest.mark.parametrize("t", [target, JSON_TOOL], ids=["signature", "json-schema"])
def test_deep_python_value_for_untyped_array_does_not_crash(t: Any) -> None:
    nested: Any = []
    for _ in range(100_000):
        nested = [nested]
    assert t.invoke({"a": 1, "items": nested}) == 1


@pytest.mark.parametrize("t", [target, JSON_TOOL], ids=["signature", "json-schema"])
@pytest.mark.parametrize(
    "raw",
    ['{"a": "x"}', "{}", '{"a": 1, "zz": 2}', '{"a": [1]}', '{"a": null}', '{"a": 1, "items": 5}'],
)
def test_wrong_types_missing_and_unknown(t: Any, raw: str) -> None:
    with pytest.raises(ToolArgumentsError) as e:
        t.invoke(raw)
    assert e.value.message.startswith(f"Invalid arguments for tool {t.name!r}:\n- ")
    assert e.value.message.endswith("Fix these arguments and call the tool again.")
    assert e.value.errors


def test_json_schema_validator_rejects_invalid_schema() -> None:
    from toolweave import ToolCardError

    with pytest.raises(ToolCardError, match="is not valid JSON Schema"):
        JsonSchemaArgumentsValidator(
            {"type": "object", "properties": {"a": {"type": 5}}}, tool_name="t"
        )


def test_json_schema_defaults_are_copied() -> None:
    validator = JsonSchemaArgumentsValidator(
        {"type": "object", "properties": {"tags": {"type": "array", "default": []}}},
        tool_name="t",
    )
    first = validator.validate_python({})
    first["tags"].append("mutated")
    assert validator.validate_python({}) == {"tags": []}


def test_json_schema_coercion_nested() -> None:
    validator = JsonSchemaArgumentsValidator(
        {
            "type": "object",
            "properties": {
                "opts": {
                    "type": "object",
                    "properties": {"n": {"type": "integer", "default": 5}, "x": {"type": "number"}},
                },
                "ids": {"type": "array", "items": {"type": "integer"}},
                "maybe": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            },
        },
        tool_name="t",
    )
    assert validator.validate_python(
        {"opts": {"n": None, "x": "1.5"}, "ids": ["1", 2.0], "maybe": "4"}
    ) == {"opts": {"n": 5, "x": 1.5}, "ids": [1, 2], "maybe": 4}
    assert validator.validate_json('{"opts": "{\\"x\\": 2}"}') == {"opts": {"x": 2}}


# JSON Schema `default` is an annotation: validate what was sent, then fill defaults --------
BAD_DEFAULTS = {
    "type": "object",
    "properties": {
        "city": {"type": "string"},
        "note": {"type": "string", "default": None},  # null default: "absent"
        "unit": {"type": "string", "enum": ["c", "f"], "default": "kelvin"},  # outside enum
        "opts": {
            "type": "object",
            "properties": {"depth": {"type": "integer", "default": 2}},
        },
    },
    "required": ["city"],
}


def test_defaults_are_filled_after_validation() -> None:
    v = JsonSchemaArgumentsValidator(BAD_DEFAULTS, tool_name="t")
    # left out: valid; the null default adds nothing, the other default is filled in as is
    assert v.validate_python({"city": "Oslo"}) == {"city": "Oslo", "unit": "kelvin"}
    # null (strict mode's "not given") means the same as leaving the property out
    assert v.validate_json('{"city": "Oslo", "note": null, "unit": null}') == {
        "city": "Oslo",
        "unit": "kelvin",
    }
    # nested: a null for a defaulted property gets the default after validation
    assert v.validate_python({"city": "Oslo", "opts": {"depth": None}})["opts"] == {"depth": 2}
    # what the model sent is still validated
    with pytest.raises(ToolArgumentsError) as e:
        v.validate_python({"city": "Oslo", "unit": "kelvin"})
    assert e.value.errors[0]["loc"] == ("unit",)


def test_json_schema_card_with_bad_defaults_runs() -> None:
    seen: list[dict[str, Any]] = []
    lf = LocalFunction(
        ToolCard(name="weather", input_params=BAD_DEFAULTS), lambda **kw: seen.append(kw) or "ok"
    )
    request = ToolExecutionRequest(name="weather", arguments='{"city": "Oslo"}')
    assert DefaultToolExecutor(lf).execute(request) == "ok"
    assert seen == [{"city": "Oslo", "unit": "kelvin"}]
    # the unvalidated path fills defaults by the same rule
    assert lf.prepare_inputs({"city": "x"}, skip_inputs_validate=True) == {
        "city": "x",
        "unit": "kelvin",
    }


@pytest.mark.parametrize(
    ("schema", "args", "accepted"),
    [
        # No properties named (many MCP servers declare only this): any key is an argument.
        ({"type": "object"}, {"size": 3, "path": "a"}, True),
        ({"type": "object", "additionalProperties": False}, {"size": 3}, False),
        # Named properties: a key outside them is an error the model can act on.
        ({"type": "object", "properties": {"a": {"type": "integer"}}}, {"b": 1}, False),
        ({"type": "object", "properties": {}}, {"b": 1}, False),
        (
            {"type": "object", "properties": {}, "patternProperties": {"^x_": {"type": "integer"}}},
            {"x_1": 1},
            True,
        ),
        (
            {
                "type": "object",
                "patternProperties": {"^x_": {"type": "integer"}},
                "additionalProperties": False,
            },
            {"y": 1},
            False,
        ),
    ],
)
def test_unknown_keys_are_refused_only_where_the_schema_names_its_keys(
    schema: dict[str, Any], args: dict[str, Any], accepted: bool
) -> None:
    validator = JsonSchemaArgumentsValidator(schema, tool_name="t")
    if accepted:
        assert validator.validate_python(args) == args
    else:
        with pytest.raises(ToolArgumentsError):
            validator.validate_python(args)
