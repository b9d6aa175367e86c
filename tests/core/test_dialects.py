"""Provider dialects, validated against the official SDK types, and the strict/Gemini failure
cases from the peers' bug reports."""

from __future__ import annotations

import datetime
import enum
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from anthropic.types import ToolParam
from google.genai import types as gtypes
from openai.types.chat import ChatCompletionToolParam
from openai.types.responses import FunctionToolParam
from pydantic import BaseModel, Field, TypeAdapter

from toolweave import (
    DefaultToolExecutor,
    LocalFunction,
    SchemaError,
    ToolArgumentsError,
    ToolCard,
    ToolExecutionRequest,
    ToolParameters,
    tool,
)
from toolweave.dialects import (
    anthropic_tool,
    gemini_function_declaration,
    openai_responses_tool,
    openai_tool,
    to_gemini_openapi,
    to_openai_strict,
)

OPENAI = TypeAdapter(ChatCompletionToolParam)
RESPONSES = TypeAdapter(FunctionToolParam)
ANTHROPIC = TypeAdapter(ToolParam)


class Level(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Address(BaseModel):
    street: str
    zip: Annotated[str, Field(min_length=5, max_length=5)]


class Cat(BaseModel):
    kind: Literal["cat"]


class Dog(BaseModel):
    kind: Literal["dog"]
    barks: bool = True


class Node(BaseModel):
    value: int
    children: list[Node] = []


def t_simple(city: str, days: int = 1) -> str:
    """Weather forecast."""
    return city


def t_rich(
    a: int,
    color: Color = Color.RED,
    level: Level = Level.LOW,
    address: Optional[Address] = None,  # noqa: UP045
    pet: Union[Cat, Dog, None] = None,  # noqa: UP007
    when: datetime.datetime | None = None,
    tags: list[str] = [],  # noqa: B006
    mode: Literal[1, 2] = 1,
    scores: Annotated[list[float], Field(min_length=1)] = [1.0],  # noqa: B006
) -> str:
    """A tool with many kinds of parameters."""
    return "x"


def t_empty() -> str:
    return "e"


def t_free(data: dict[str, Any]) -> str:
    return "f"


def t_tree(root: Node) -> int:
    return root.value


def t_tuple(span: tuple[int, int]) -> str:
    return "t"


ALL = [t_simple, t_rich, t_empty, t_free, t_tree, t_tuple]


@pytest.mark.parametrize("func", ALL, ids=lambda f: f.__name__)
@pytest.mark.parametrize("strict", [None, False])
def test_openai_and_anthropic_validate_against_sdk(func: Any, strict: bool | None) -> None:
    card = tool(func).card
    chat = openai_tool(card, strict=strict)
    OPENAI.validate_python(chat)
    assert chat["type"] == "function" and chat["function"]["name"] == card.name
    assert chat["function"]["parameters"]["type"] == "object"
    responses = openai_responses_tool(card, strict=strict)
    RESPONSES.validate_python(responses)
    assert responses["name"] == card.name and isinstance(responses["strict"], bool)
    anth = anthropic_tool(card, strict=strict)
    ANTHROPIC.validate_python(anth)
    assert anth["input_schema"]["type"] == "object"


@pytest.mark.parametrize(
    "func", [t_simple, t_rich, t_empty, t_free, t_tuple], ids=lambda f: f.__name__
)
@pytest.mark.parametrize("mode", ["openapi", "json_schema"])
def test_gemini_validates_against_sdk(func: Any, mode: Any) -> None:
    decl = gemini_function_declaration(tool(func).card, mode=mode)
    parsed = gtypes.FunctionDeclaration.model_validate(decl)
    assert parsed.name == func.__name__


def test_openai_strict_shape() -> None:
    card = tool(t_simple).card
    fn = openai_tool(card)["function"]
    assert fn["strict"] is True
    assert fn["description"] == "Weather forecast."
    assert fn["parameters"] == {
        "type": "object",
        "properties": {
            "city": {"type": "string"},
            "days": {
                "type": ["integer", "null"],
                "description": "Default: 1; null uses the default.",
            },
        },
        "required": ["city", "days"],
        "additionalProperties": False,
    }
    assert openai_tool(card, strict=False)["function"]["parameters"] is card.input_params
    assert "strict" not in openai_tool(card, strict=False)["function"]


def test_strict_with_defaults_executor_applies_default() -> None:
    t = tool(t_rich)
    params = openai_tool(t.card)["function"]["parameters"]
    assert params["required"] == list(params["properties"])
    assert params["properties"]["tags"] == {
        "items": {"type": "string"},
        "type": ["array", "null"],
        "description": "Default: []; null uses the default.",
    }
    assert params["properties"]["color"] == {
        "anyOf": [{"$ref": "#/$defs/Color"}, {"type": "null"}],
        "description": 'Default: "red"; null uses the default.',
    }
    assert params["properties"]["scores"]["minItems"] == 1  # supported by strict mode
    # every object, nested ones too, is closed
    assert params["$defs"]["Address"]["additionalProperties"] is False
    assert params["$defs"]["Dog"]["required"] == ["kind", "barks"]
    # the model fills every key, with null where it has nothing: defaults apply
    seen: list[Any] = []
    lf = LocalFunction(t.card, lambda **kw: seen.append(kw) or "ok", schema=t.function_schema)
    request = ToolExecutionRequest(
        name="t_rich",
        arguments='{"a": 1, "color": null, "level": null, "address": null, "pet": null,'
        ' "when": null, "tags": null, "mode": null, "scores": null}',
    )
    assert DefaultToolExecutor(lf).execute(request) == "ok"
    assert seen[0] == {
        "a": 1,
        "color": Color.RED,
        "level": Level.LOW,
        "address": None,
        "pet": None,
        "when": None,
        "tags": [],
        "mode": 1,
        "scores": [1.0],
    }


def test_strict_moves_unsupported_keywords_to_description() -> None:
    schema = (
        ToolParameters().add("code", "string", "zip code", required=True, minLength=5).to_schema()
    )
    strict = to_openai_strict(schema)
    assert strict["properties"]["code"] == {
        "type": "string",
        "description": "zip code (minLength=5)",
    }


def test_free_form_dict_strict_true_is_error_naming_property() -> None:
    card = tool(t_free, strict=True).card
    with pytest.raises(SchemaError) as e:
        openai_tool(card)
    assert e.value.message == (
        "tool 't_free': the schema cannot be made strict: data: a free-form object "
        "(dict[str, ...] or **kwargs) cannot be strict"
    )
    with pytest.raises(SchemaError, match="data"):
        openai_responses_tool(tool(t_free).card, strict=True)
    with pytest.raises(SchemaError, match="free-form object cannot be strict for Anthropic"):
        anthropic_tool(card)


def test_free_form_dict_strict_none_is_non_strict() -> None:
    card = tool(t_free).card
    fn = openai_tool(card)["function"]
    assert "strict" not in fn
    assert fn["parameters"] is card.input_params
    assert openai_responses_tool(card)["strict"] is False


def test_kwargs_tool_cannot_be_strict() -> None:
    def f(a: int, **kwargs: Any) -> None: ...

    with pytest.raises(SchemaError, match=r"\(root\): a free-form object"):
        openai_tool(tool(f).card, strict=True)


def test_recursive_model() -> None:
    card = tool(t_tree).card
    strict = openai_tool(card)["function"]
    assert strict["strict"] is True
    node = strict["parameters"]["$defs"]["Node"]
    assert node["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    with pytest.raises(SchemaError) as e:
        gemini_function_declaration(card)
    assert e.value.message == (
        "tool 't_tree': root.children[]: the recursive type 'Node' cannot be expressed in "
        "Gemini's OpenAPI schema subset; use mode='json_schema'"
    )
    decl = gemini_function_declaration(card, mode="json_schema")
    gtypes.FunctionDeclaration.model_validate(decl)
    assert decl["parametersJsonSchema"]["$defs"]["Node"]["properties"]["children"]["items"] == {
        "$ref": "#/$defs/Node"
    }
    assert "title" not in decl["parametersJsonSchema"]["$defs"]["Node"]


@pytest.mark.parametrize(
    "call",
    [
        lambda c: openai_tool(c),
        lambda c: openai_tool(c, strict=False),
        lambda c: openai_responses_tool(c),
        lambda c: anthropic_tool(c),
        lambda c: gemini_function_declaration(c),
        lambda c: gemini_function_declaration(c, mode="json_schema"),
    ],
)
def test_root_any_of_is_an_error(call: Any) -> None:
    card = ToolCard(
        name="u",
        input_params={
            "anyOf": [
                {"type": "object", "properties": {"a": {"type": "string"}}},
                {"type": "object"},
            ]
        },
    )
    with pytest.raises(
        SchemaError,
        match="needs an object schema at the root of the parameters, but the schema has a root 'anyOf'",
    ):
        call(card)


def test_empty_schema() -> None:
    card = tool(t_empty).card
    assert gemini_function_declaration(card) == {"name": "t_empty"}
    assert gemini_function_declaration(card, mode="json_schema") == {"name": "t_empty"}
    assert anthropic_tool(card)["input_schema"] == {
        "type": "object",
        "properties": {},
        "additionalProperties": False,
    }
    assert openai_tool(card)["function"]["parameters"]["properties"] == {}
    bare = ToolCard(name="bare", input_params={})
    assert anthropic_tool(bare)["input_schema"] == {"type": "object", "properties": {}}
    assert openai_tool(bare, strict=False)["function"]["parameters"] == {
        "type": "object",
        "properties": {},
    }


def test_gemini_openapi_rules() -> None:
    decl = gemini_function_declaration(tool(t_rich).card)
    params = decl["parameters"]
    props = params["properties"]
    assert decl["description"] == "A tool with many kinds of parameters."
    assert "additionalProperties" not in params and "$defs" not in params
    assert props["color"] == {
        "enum": ["red", "blue"],
        "type": "string",
        "format": "enum",
        "description": 'Default: "red".',
    }
    # numeric enums keep their type: a string "1" would fail validation
    assert props["level"] == {
        "type": "integer",
        "description": "Default: 1. allowed values: 1, 2",  # the property's, then the enum's
    }
    assert props["mode"] == {
        "type": "integer",
        "description": "Default: 1. (allowed values: 1, 2)",
    }
    assert props["address"]["nullable"] is True
    assert props["address"]["properties"]["street"] == {"type": "string"}
    # a real union stays a union (never collapsed to its first branch)
    assert len(props["pet"]["anyOf"]) == 2 and props["pet"]["nullable"] is True
    assert props["pet"]["anyOf"][0]["properties"]["kind"] == {
        "type": "string",
        "enum": ["cat"],
        "format": "enum",
    }
    assert props["when"] == {"format": "date-time", "type": "string", "nullable": True}
    assert "default" not in props["tags"]
    tuple_decl = gemini_function_declaration(tool(t_tuple).card)["parameters"]["properties"]["span"]
    assert tuple_decl == {
        "maxItems": 2,
        "minItems": 2,
        "type": "array",
        "items": {"anyOf": [{"type": "integer"}, {"type": "integer"}]},
    }


def test_gemini_numeric_enum_value_validates_after_round_trip() -> None:
    t = tool(t_rich)
    assert t.invoke({"a": 1, "level": 2, "mode": 2}) == "x"


def test_to_gemini_openapi_rejects_non_object() -> None:
    with pytest.raises(SchemaError, match="must be an object schema"):
        to_gemini_openapi({"type": "string"})


def test_anthropic_strict() -> None:
    card = tool(t_simple, strict=True).card
    out = anthropic_tool(card)
    assert out["strict"] is True
    assert out["input_schema"]["additionalProperties"] is False
    assert out["input_schema"]["required"] == ["city"]  # kept as is
    ANTHROPIC.validate_python(out)
    assert "strict" not in anthropic_tool(tool(t_simple).card)


class Box(BaseModel):
    side: Annotated[float, Field(gt=0, multiple_of=0.5)] = 1.0


def t_bounded(
    city: Annotated[str, Field(min_length=2, max_length=40, pattern="^[A-Z]")],
    n: Annotated[int, Field(ge=1, le=10)] = 3,
    tags: Annotated[list[str], Field(min_length=2, max_length=5)] = ["a", "b"],  # noqa: B006
    one: Annotated[list[int], Field(min_length=1)] = [1],  # noqa: B006
    link: Annotated[str, Field(json_schema_extra={"format": "uri-reference"})] = "/x",
    when: datetime.date | None = None,
    boxes: list[Box] | None = None,
) -> str:
    """Search.

    Args:
        n: How many.
    """
    return city


_ANTHROPIC_UNSUPPORTED = {
    "default",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "maxItems",
    "uniqueItems",
}


def _keywords(schema: Any) -> set[str]:
    """Every keyword used anywhere in `schema` (property names excluded)."""
    found: set[str] = set()
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, list):
            stack.extend(node)
        elif isinstance(node, dict):
            for key, value in node.items():
                if key in ("properties", "$defs"):
                    stack.extend(value.values())
                else:
                    found.add(key)
                    stack.append(value)
    return found


def test_anthropic_strict_moves_unsupported_keywords_into_descriptions() -> None:
    t = tool(t_bounded, strict=True)
    out = anthropic_tool(t.card)
    ANTHROPIC.validate_python(out)
    schema = out["input_schema"]
    assert not _keywords(schema) & _ANTHROPIC_UNSUPPORTED, _keywords(schema)
    props = schema["properties"]
    assert props["city"]["pattern"] == "^[A-Z]"  # supported: kept
    assert props["city"]["description"] == "minLength=2, maxLength=40"
    assert props["n"]["description"] == "How many. Default: 3. (minimum=1, maximum=10)"
    assert "maxItems=5" in props["tags"]["description"]
    assert "minItems=2" in props["tags"]["description"]
    assert props["one"]["minItems"] == 1  # 0 and 1 are supported
    assert "format" not in props["link"] and "format=uri-reference" in props["link"]["description"]
    assert props["when"]["anyOf"][0]["format"] == "date"
    assert "exclusiveMinimum=0" in schema["$defs"]["Box"]["properties"]["side"]["description"]
    assert schema["required"] == ["city"]
    # the tool itself still enforces every constraint the schema no longer carries
    with pytest.raises(ToolArgumentsError):
        t.invoke({"city": "Paris", "n": 11})
    # not strict: the canonical schema, untouched
    assert anthropic_tool(tool(t_bounded).card)["input_schema"]["properties"]["n"]["maximum"] == 10


def test_dialects_are_cached_per_card() -> None:
    card = tool(t_rich).card
    assert openai_tool(card) is openai_tool(card)
    assert openai_tool(card, strict=False) is openai_tool(card, strict=False)
    assert openai_tool(card) is not openai_tool(card, strict=False)
    assert openai_responses_tool(card) is openai_responses_tool(card)
    assert anthropic_tool(card) is anthropic_tool(card)
    assert gemini_function_declaration(card) is gemini_function_declaration(card)
    assert gemini_function_declaration(card, mode="json_schema") is not gemini_function_declaration(
        card
    )
    # the canonical schema is never modified by a transform
    before = tool(t_rich).card.input_params
    assert card.input_params == before


def test_gemini_bad_mode() -> None:
    with pytest.raises(ValueError, match="mode must be"):
        gemini_function_declaration(tool(t_simple).card, mode="xml")  # type: ignore[arg-type]


def t_units(city: str, unit: Literal["c", "f"] = "c", note: str | None = None) -> str:
    """Weather.

    Args:
        unit: Temperature unit.
    """
    return city


def test_defaults_said_in_description_where_the_dialect_drops_them() -> None:
    # strict: `unit` becomes required and nullable and loses `default`, so the description
    # tells the model what null (or leaving it out) means; a null default says nothing new
    card = tool(t_units).card
    for params in (
        openai_tool(card)["function"]["parameters"],
        openai_responses_tool(card)["parameters"],
    ):
        unit = params["properties"]["unit"]
        assert "default" not in unit
        assert unit["description"] == 'Temperature unit. Default: "c"; null uses the default.'
        assert "description" not in params["properties"]["note"]
    # Gemini's OpenAPI subset drops `default` too (the property stays optional there)
    gemini = gemini_function_declaration(card)["parameters"]["properties"]["unit"]
    assert gemini["description"] == 'Temperature unit. Default: "c".'
    # dialects that carry `default` keep it and say nothing extra
    kept = anthropic_tool(card)["input_schema"]["properties"]["unit"]
    assert kept["default"] == "c" and kept["description"] == "Temperature unit."
    kept = gemini_function_declaration(card, "json_schema")["parametersJsonSchema"]
    assert kept["properties"]["unit"]["default"] == "c"
    assert (
        openai_tool(card, strict=False)["function"]["parameters"]["properties"]["unit"]["default"]
        == "c"
    )
