"""@tool and schema extraction (openJiuwen test_tool_decorator.py, LangChain4j
ToolSpecificationsTest), descriptions precedence, P, Injected, *args/**kwargs."""

from __future__ import annotations

import datetime
import decimal
import enum
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from toolweave import (
    Injected,
    LocalFunction,
    P,
    ReturnBehavior,
    ToolArgumentsError,
    ToolCard,
    ToolCardError,
    ToolContext,
    ToolInfo,
    tool,
    tools_from,
)


def test_prebuilt_card_is_used_unchanged() -> None:
    card = ToolCard(
        id="add_id",
        name="add",
        description="add two numbers",
        input_params={
            "type": "object",
            "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            "required": ["a", "b"],
        },
    )

    @tool(card=card)
    def add(a: int, b: int) -> int:
        return a + b

    assert add.card is card
    assert add.invoke({"a": 1, "b": 3}) == 4
    assert add.card.tool_info() == ToolInfo(
        name="add", description="add two numbers", parameters=card.input_params
    )


def test_options_given_with_a_card_override_it_in_a_new_card() -> None:
    """openJiuwen: when an explicit card disagrees with the decorator's options, a new card
    is built with them; the prebuilt card is left as it was."""
    card = ToolCard(
        name="get_weather",
        description="Weather.",
        input_params={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
        metadata={"team": "x"},
    )

    def weather(city: str) -> str:
        return city

    t = tool(
        weather,
        card=card,
        name="weather_now",
        description="Current weather.",
        idempotent=True,
        parallel_safe=False,
        timeout=5,
        metadata={"tier": "free"},
    )
    assert (t.card.name, t.card.description) == ("weather_now", "Current weather.")
    assert t.card.idempotent and not t.card.parallel_safe and t.card.timeout == 5
    assert t.card.metadata == {"team": "x", "tier": "free"}
    assert t.card.input_params == card.input_params and t.card.id != card.id
    assert (card.name, card.idempotent, card.metadata) == ("get_weather", False, {"team": "x"})
    assert t.invoke({"city": "Paris"}) == "Paris"
    # options equal to the card's (or left at their defaults) keep the very same card
    assert tool(weather, card=card, name="get_weather").card is card


class Item(BaseModel):
    name: str
    price: float


def test_annotated_basemodel_list_parameter() -> None:
    @tool
    def summarize(items: list[Item], currency: str = "EUR") -> float:
        """Sum the prices.

        Args:
            items: the items to sum
            currency: currency code
        """
        return sum(i.price for i in items)

    assert summarize.card.description == "Sum the prices."
    assert summarize.card.input_params == {
        "type": "object",
        "properties": {
            "items": {
                "description": "the items to sum",
                "items": {"$ref": "#/$defs/Item"},
                "type": "array",
            },
            "currency": {"default": "EUR", "description": "currency code", "type": "string"},
        },
        "required": ["items"],
        "$defs": {
            "Item": {
                "properties": {"name": {"type": "string"}, "price": {"type": "number"}},
                "required": ["name", "price"],
                "title": "Item",
                "type": "object",
            }
        },
        "additionalProperties": False,
    }
    result = summarize.invoke({"items": [{"name": "a", "price": 3}, {"name": "b", "price": 4}]})
    assert result == 7.0


def test_literal_mode_param() -> None:
    @tool
    def open_file(path: str, mode: Literal["r", "w"] = "r") -> str:
        return mode

    assert open_file.card.input_params["properties"]["mode"] == {
        "default": "r",
        "enum": ["r", "w"],
        "type": "string",
    }
    with pytest.raises(ToolArgumentsError):
        open_file.invoke({"path": "x", "mode": "a"})


def test_optional_params_without_defaults_are_not_required() -> None:
    @tool
    def write(path: str, content: str, encoding: str | None, mode: int | None) -> str:
        return f"{path}|{content}|{encoding}|{mode}"

    schema = write.card.input_params
    assert schema["required"] == ["path", "content"]
    assert schema["properties"]["encoding"]["anyOf"] == [{"type": "string"}, {"type": "null"}]
    assert write.invoke({"path": "p", "content": "c"}) == "p|c|None|None"


def test_union_str_bytes_param() -> None:
    @tool
    def store(data: str | bytes) -> str:
        return type(data).__name__

    assert store.card.input_params["properties"]["data"] == {
        "anyOf": [{"type": "string"}, {"format": "binary", "type": "string"}]
    }
    assert store.invoke({"data": "text"}) == "str"
    assert store.invoke({"data": b"raw"}) == "bytes"


def test_tuple_line_range_param() -> None:
    @tool
    def read(path: str, line_range: tuple[int, int]) -> str:
        return f"{path}:{line_range[0]}-{line_range[1]}"

    prop = read.card.input_params["properties"]["line_range"]
    assert prop["prefixItems"] == [{"type": "integer"}, {"type": "integer"}]
    assert prop["minItems"] == prop["maxItems"] == 2
    assert read.invoke({"path": "a.py", "line_range": [3, 9]}) == "a.py:3-9"
    with pytest.raises(ToolArgumentsError):
        read.invoke({"path": "a.py", "line_range": [1, 2, 3]})


def test_var_positional() -> None:
    @tool
    def total(a: int, *args: int, k: int = 0) -> int:
        return a + sum(args) + k

    props = total.card.input_params["properties"]
    assert props["args"]["type"] == "array"
    assert props["args"]["items"] == {"type": "integer"}
    assert total.card.input_params["required"] == ["a"]
    assert total.invoke({"a": 1, "args": [2, 3]}) == 6
    assert total.invoke({"a": 1, "args": [2, 3], "k": 3}) == 9
    assert total.invoke({"a": 1, "args": [2, 3, 4], "k": 3}) == 13


def test_var_keywords_pass_through() -> None:
    @tool
    def echo(a: int, **kwargs: Any) -> dict[str, Any]:
        return {"a": a, **kwargs}

    assert echo.card.input_params["additionalProperties"] is True
    assert echo.invoke({"a": 1, "x": "y", "z": [1]}) == {"a": 1, "x": "y", "z": [1]}


def test_mixed_var_params() -> None:
    @tool
    def mix(a: int, *args: int, b: int = 1, **kwargs: int) -> int:
        return a + sum(args) + b + sum(kwargs.values())

    assert mix.invoke({"a": 1, "args": [2, 3], "b": 4, "c": 6}) == 16


def test_function_stays_callable_with_original_signature() -> None:
    @tool
    def mul(a: int, b: int = 2) -> int:
        return a * b

    assert isinstance(mul, LocalFunction)
    assert mul(3) == 6
    assert mul(3, b=3) == 9
    assert mul.__name__ == "mul"


def test_call_form_and_options() -> None:
    def ping() -> str:
        """Ping."""
        return "pong"

    t = tool(
        ping,
        name="ping2",
        description="custom",
        return_behavior="immediate",
        parallel_safe=False,
        stateless=True,
        idempotent=True,
        timeout=5,
        metadata={"k": "v"},
        strict=True,
    )
    card = t.card
    assert (card.name, card.description) == ("ping2", "custom")
    assert card.return_behavior is ReturnBehavior.IMMEDIATE
    assert (card.parallel_safe, card.stateless, card.idempotent) == (False, True, True)
    assert (card.timeout, card.metadata, card.strict) == (5, {"k": "v"}, True)


def test_invalid_tool_name_says_which_rule() -> None:
    with pytest.raises(ToolCardError, match=r"\^\[a-zA-Z0-9_-\]\{1,64\}\$"):

        @tool(name="get weather")
        def f() -> None: ...

    with pytest.raises(ToolCardError, match="65 characters long"):
        tool(lambda: None, name="x" * 65)
    with pytest.raises(ToolCardError, match="invalid tool name"):
        ToolCard(name="bad.name")


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Point(BaseModel):
    x: int
    y: int


class Address(TypedDict):
    street: str


def test_type_matrix() -> None:
    @tool
    def every(
        s: str,
        i: int,
        f: float,
        b: bool,
        raw: bytes,
        ints: list[int],
        tags: set[str],
        fixed: tuple[int, str],
        var: tuple[int, ...],
        mapping: dict[str, int],
        lit: Literal["a", "b"],
        color: Color,
        point: Point,
        address: Address,
        day: datetime.date,
        moment: datetime.datetime,
        clock: datetime.time,
        ident: uuid.UUID,
        amount: decimal.Decimal,
        path: Path,
        maybe: int | None,
        bounded: Annotated[int, Field(ge=1, le=10)],
    ) -> None:
        return None

    props = every.card.input_params["properties"]
    assert props["s"] == {"type": "string"}
    assert props["i"] == {"type": "integer"}
    assert props["f"] == {"type": "number"}
    assert props["b"] == {"type": "boolean"}
    assert props["raw"] == {"format": "binary", "type": "string"}
    assert props["ints"] == {"items": {"type": "integer"}, "type": "array"}
    assert props["tags"] == {"items": {"type": "string"}, "type": "array", "uniqueItems": True}
    assert props["fixed"]["prefixItems"] == [{"type": "integer"}, {"type": "string"}]
    assert props["var"] == {"items": {"type": "integer"}, "type": "array"}
    assert props["mapping"] == {"additionalProperties": {"type": "integer"}, "type": "object"}
    assert props["lit"] == {"enum": ["a", "b"], "type": "string"}
    assert props["color"] == {"$ref": "#/$defs/Color"}
    assert props["point"] == {"$ref": "#/$defs/Point"}
    assert props["address"] == {"$ref": "#/$defs/Address"}
    assert props["day"] == {"format": "date", "type": "string"}
    assert props["moment"] == {"format": "date-time", "type": "string"}
    assert props["clock"] == {"format": "time", "type": "string"}
    assert props["ident"] == {"format": "uuid", "type": "string"}
    assert props["path"] == {"format": "path", "type": "string"}
    assert props["maybe"] == {"anyOf": [{"type": "integer"}, {"type": "null"}], "default": None}
    assert props["bounded"] == {"maximum": 10, "minimum": 1, "type": "integer"}
    defs = every.card.input_params["$defs"]
    assert defs["Color"]["enum"] == ["red", "green"]
    # the required list keeps parameter order, and leaves out the Optional one
    names = list(props)
    assert every.card.input_params["required"] == [n for n in names if n != "maybe"]


def test_descriptions_precedence() -> None:
    @tool
    def f(
        a: Annotated[int, P("from P"), Field(description="from Field"), "from str"],
        b: Annotated[int, Field(description="from Field"), "from str"],
        c: Annotated[int, "from str"],
        d: int,
        e: int = Field(1, description="from Field default"),
    ) -> None:
        """Summary line.

        Args:
            a: doc a
            b: doc b
            c: doc c
            d (int): doc d that
                continues on the next line
            e: doc e
        """

    props = f.card.input_params["properties"]
    assert props["a"]["description"] == "from P"
    assert props["b"]["description"] == "from Field"
    assert props["c"]["description"] == "from str"
    assert props["d"]["description"] == "doc d that continues on the next line"
    assert props["e"]["description"] == "from Field default"
    assert props["e"]["default"] == 1
    assert f.card.description == "Summary line."


@pytest.mark.parametrize(
    "doc",
    [
        "Do it.\n\nArgs:\n    city (str): the city\n        name\n",
        "Do it.\n\nParameters\n----------\ncity : str\n    the city\n    name\n",
        "Do it.\n\n:param city: the city\n    name\n:type city: str\n",
    ],
    ids=["google", "numpy", "sphinx"],
)
def test_docstring_styles(doc: str) -> None:
    def weather(city: str) -> str:
        return city

    weather.__doc__ = doc
    t = tool(weather)
    assert t.card.description == "Do it."
    assert t.card.input_params["properties"]["city"]["description"] == "the city name"


def test_explicit_description_and_auto_extract_off() -> None:
    def f(x: int) -> int:
        """Doc summary.

        Args:
            x: doc x
        """
        return x

    assert tool(f, description="explicit").card.description == "explicit"
    bare = tool(f, auto_extract=False)
    assert bare.card.description == ""
    assert "description" not in bare.card.input_params["properties"]["x"]


def test_p_renames_parameter_for_the_model() -> None:
    @tool
    def weather(city_name: Annotated[str, P("the city", name="city")]) -> str:
        return city_name.upper()

    props = weather.card.input_params["properties"]
    assert list(props) == ["city"]
    assert props["city"]["description"] == "the city"
    assert weather.invoke({"city": "paris"}) == "PARIS"
    with pytest.raises(ToolArgumentsError, match="city_name: unknown argument"):
        weather.invoke({"city_name": "paris"})


def test_p_required_flags() -> None:
    @tool
    def f(a: Annotated[int | None, P(required=True)], b: Annotated[int, P(required=False)]) -> str:
        return f"{a}/{b}"

    assert f.card.input_params["required"] == ["a"]
    assert f.invoke({"a": None}) == "None/None"
    with pytest.raises(ToolArgumentsError, match="a: missing required argument"):
        f.invoke({"b": 1})


def test_field_default_keeps_constraints() -> None:
    @tool
    def f(s: str = Field("x", min_length=2, max_length=4)) -> str:
        return s

    assert f.card.input_params["properties"]["s"] == {
        "default": "x",
        "maxLength": 4,
        "minLength": 2,
        "type": "string",
    }
    assert f.invoke({}) == "x"
    assert f.invoke({"s": "abc"}) == "abc"
    with pytest.raises(ToolArgumentsError):
        f.invoke({"s": "abcdef"})


def test_context_and_injected_are_hidden() -> None:
    @tool
    def f(
        x: int,
        ctx: ToolContext,
        user: Annotated[str, Injected()],
        db: Annotated[Any, Injected("database")] = None,
    ) -> str:
        return f"{x}/{ctx.tool_name}/{user}/{db}"

    props = f.card.input_params["properties"]
    assert list(props) == ["x"]
    assert f.invoke({"x": 1}, user="ann", database="pg") == "1/f/ann/pg"
    assert f.invoke({"x": 1}, user="ann") == "1/f/ann/None"
    assert f.invoke({"x": 1}, injected={"user": "bob"}) == "1/f/bob/None"
    # the model cannot supply an injected value
    with pytest.raises(ToolArgumentsError, match="user: unknown argument"):
        f.invoke({"x": 1, "user": "mallory"}, user="ann")


def test_unresolvable_type_hint_is_a_card_error() -> None:
    def f(x: NotDefinedAnywhere) -> None:  # type: ignore[name-defined]  # noqa: F821
        return None

    with pytest.raises(ToolCardError, match="cannot resolve the type hints of tool 'f'"):
        tool(f)


# tools_from ---------------------------------------------------------------------------------
class Base:
    @tool
    def greet(self, name: str) -> str:
        """Greet someone."""
        return f"hello {name}"

    @tool
    def bye(self) -> str:
        return "bye"

    def helper(self) -> str:
        return "not a tool"


class Child(Base):
    def __init__(self, suffix: str = "!") -> None:
        self.suffix = suffix

    @tool
    def greet(self, name: str, loud: bool = False) -> str:
        """Greet someone, maybe loudly."""
        text = f"hi {name}{self.suffix}"
        return text.upper() if loud else text

    @tool
    @staticmethod
    def static_add(a: int, b: int) -> int:
        return a + b

    def bye(self) -> str:  # an override without @tool removes the tool
        return "plain"


def test_tools_from_instance_inheritance_and_override() -> None:
    tools = {t.name: t for t in tools_from(Child("?"))}
    assert set(tools) == {"greet", "static_add"}
    assert tools["greet"].card.description == "Greet someone, maybe loudly."
    assert "loud" in tools["greet"].card.input_params["properties"]
    assert tools["greet"].invoke({"name": "ann", "loud": True}) == "HI ANN?"
    assert tools["static_add"].invoke({"a": 1, "b": 2}) == 3
    assert "self" not in tools["greet"].card.input_params["properties"]


def test_tools_from_class_and_bound_attribute_access() -> None:
    names = sorted(t.name for t in tools_from(Base))
    assert names == ["bye", "greet"]
    child = Child()
    assert child.greet.invoke({"name": "bo"}) == "hi bo!"
    assert child.greet("bo") == "hi bo!"
    assert Child.static_add(1, 2) == 3
    assert child.static_add.invoke({"a": 2, "b": 2}) == 4


def test_tools_from_duplicate_names_error_names_the_tool() -> None:
    class Dup:
        @tool(name="search")
        def a(self, q: str) -> str:
            return q

        @tool(name="search")
        def b(self, q: str) -> str:
            return q

    with pytest.raises(ToolCardError, match="duplicate tool name 'search' on Dup"):
        tools_from(Dup())


def test_tools_from_class_needing_arguments() -> None:
    class NeedsArg:
        def __init__(self, x: int) -> None:
            self.x = x

    with pytest.raises(ToolCardError, match="needs an instance"):
        tools_from(NeedsArg)


def test_description_given_as_lines_is_joined() -> None:
    """LangChain4j's `@Tool({"line 1", "line 2"})`: the lines joined with newlines."""

    @tool(description=["Weather for a city.", "Use it for forecasts."])
    def weather(city: str) -> str:
        return city

    assert weather.card.description == "Weather for a city.\nUse it for forecasts."


def test_results_are_keyword_only_with_success_and_failure_factories() -> None:
    from toolweave import ToolExecutionResult

    with pytest.raises(TypeError):
        ToolExecutionResult(False, {"a": 1}, "text")  # type: ignore[misc]
    ok = ToolExecutionResult.success("done", result={"a": 1})
    assert (ok.text, ok.result, ok.is_error) == ("done", {"a": 1}, False)
    boom = ValueError("boom")
    failed = ToolExecutionResult.failure("it failed", boom)
    assert failed.is_error and failed.error is boom and failed.text == "it failed"
