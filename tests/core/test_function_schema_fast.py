"""The schema of common parameter types is written without pydantic (declaring a tool is
cheap, issue #18 W1); it must be exactly what pydantic writes, key order included."""

from __future__ import annotations

import importlib
import json
from typing import Annotated, Any, Literal, Optional, Union

import pytest
from pydantic import BaseModel, Field

from toolweave import P, ToolArgumentsError, tool
from toolweave.dialects import openai_tool

fs_module = importlib.import_module("toolweave.schema.function_schema")


class Point(BaseModel):
    x: int


def f_scalars(a: str, b: int, c: float, d: bool, e: None = None, f: Any = None) -> None:
    """Scalars.

    Args:
        a: The a.
        b: The b.
    """


def f_containers(
    a: list[str],
    b: dict[str, int],
    c: list = [],  # noqa: B006
    d: dict = {},  # noqa: B006
    e: tuple[int, ...] = (),
    f: set[str] = set(),  # noqa: B006
    g: frozenset[int] = frozenset(),
    h: list[list[int]] | None = None,
    i: dict[str, Any] = {},  # noqa: B006
    j: list[str | None] = [],  # noqa: B006
    k: list[int] = [1, 2],  # noqa: B006
    m: tuple = (),
    n: list[Any] = [],  # noqa: B006
    o: dict[str, list[float]] | None = None,
) -> None:
    """Containers."""


def f_literals_unions(
    a: Literal["x", "y"] = "x",
    b: Literal[1, 2] = 1,
    c: Literal["only"] = "only",
    d: Literal["a", 1] = "a",
    e: Literal[True] = True,
    f: Literal[7] = 7,
    g: str | None = None,
    h: Optional[int] = 3,  # noqa: UP045
    i: Union[int, str] = 1,  # noqa: UP007
    j: int | None = None,
    k: bool | None = None,
    m: None | str = None,  # noqa: RUF036
    n: float = 1,
    o: float = 2.5,
    p: str = "text",
) -> None:
    """Literals and unions."""


def f_markers(
    a: Annotated[str, P("described by P")],
    b: Annotated[int, "a plain string description"] = 0,
    c: Annotated[str, P(name="renamed")] = "",
    d: Annotated[int, P(required=False)] = 0,
    *items: str,
) -> None:
    """Markers."""


def f_kwargs(a: int, **extra: Any) -> None:
    """Extra keys allowed."""


def f_nothing() -> None:
    """No parameters."""


def f_fallback(
    a: Point,
    b: Annotated[int, Field(ge=0)] = 0,
    c: int = Field(3, le=9),
    d: bytes = b"",
    e: tuple[int, str] = (1, "a"),
    f: Literal["a", None] = None,
    g: int | str | None = None,
) -> None:
    """Types pydantic writes (nested models, constraints)."""


def f_mixed(a: str, b: Point | None = None, c: list[str] = ["x"]) -> None:  # noqa: B006
    """One unsupported type sends the whole schema through pydantic."""


CASES = [f_scalars, f_containers, f_literals_unions, f_markers, f_kwargs, f_nothing, f_fallback]
CASES.append(f_mixed)


def _reference(fn: Any, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    def unsupported(tp: Any) -> dict[str, Any]:
        raise fs_module._Unsupported

    with monkeypatch.context() as m:
        m.setattr(fs_module, "_type_schema", unsupported)
        schema: dict[str, Any] = fs_module.function_schema(fn, name=fn.__name__).json_schema
        return schema


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__)
def test_direct_schema_is_exactly_pydantics(fn: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    direct = fs_module.function_schema(fn, name=fn.__name__).json_schema
    reference = _reference(fn, monkeypatch)
    assert json.dumps(direct) == json.dumps(reference)


def test_common_types_build_no_model_until_the_first_call() -> None:
    fs = fs_module.function_schema(f_literals_unions, name="f")
    assert fs._validator is None  # the schema did not need the pydantic model
    assert fs.validator.validate_python({"a": "y", "b": 2, "n": "3"}) == {
        "a": "y",
        "b": 2,
        "c": "only",
        "d": "a",
        "e": True,
        "f": 7,
        "g": None,
        "h": 3,
        "i": 1,
        "j": None,
        "k": None,
        "m": None,
        "n": 3.0,
        "o": 2.5,
        "p": "text",
    }
    fallback = fs_module.function_schema(f_fallback, name="f")
    assert fallback.validator.validate_python({"a": {"x": 1}})["a"] == Point(x=1)


def test_a_lazily_built_tool_validates_like_before() -> None:
    @tool
    def book(city: str, nights: int, tags: list[str] | None = None) -> str:
        """Book a hotel.

        Args:
            city: Where.
            nights: How long.
        """
        return f"{city}:{nights}:{tags}"

    spec = openai_tool(book.card)
    assert spec["function"]["parameters"]["properties"]["city"]["description"] == "Where."
    assert book.invoke('{"city": "Oslo", "nights": "2"}') == "Oslo:2:None"
    with pytest.raises(ToolArgumentsError, match="nights"):
        book.invoke({"city": "Oslo", "nights": True})


DOCSTRINGS = [
    None,
    "",
    "One line.",
    "Summary.\n\nA longer description\nover two lines.",
    "Summary.\n\nArgs:\n    a: The a.\n    b (int): The b,\n        continued.\n\nReturns:\n    A thing.",
    "Summary.\n\nArgs:\n    *items: Items.\n    **extra: Extra.\n\nRaises:\n    ValueError: bad.",
    "Note: a colon inside a line, not a title.\n\nMore text:",
    "Summary ending with a colon:\n\n    an indented block",
    "Summary.\n\n:param a: The a.\n:param b: The b.\n:returns: A thing.",
    "Summary.\n\nParameters\n----------\na : int\n    The a.\nb : str\n    The b.\n\nReturns\n-------\nint\n    A thing.",
    "Summary.\n\n@param a: The a.\n@return: A thing.",
    "Summary.\n\n.. deprecated:: 1.0\n    Use something else.",
    "Summary.\n\nArgs:\n    a: The a.\n\n:param b: Mixed styles.",
    "Summary.\n\nExamples:\n    >>> f(1)\n    2",
    "Title\n=====\n\nText.",
]


@pytest.mark.parametrize("doc", DOCSTRINGS)
def test_docstring_fast_path_matches_auto_detection(doc: str | None) -> None:
    import inspect

    import docstring_parser

    docstrings = importlib.import_module("toolweave.schema.docstrings")
    if not doc:
        return
    cleaned = inspect.cleandoc(doc)
    fast = docstrings._parse(cleaned)
    auto = docstring_parser.parse(cleaned, docstring_parser.DocstringStyle.AUTO)
    assert (fast.short_description, fast.long_description) == (
        auto.short_description,
        auto.long_description,
    )
    assert [(p.arg_name, p.description) for p in fast.params] == [
        (p.arg_name, p.description) for p in auto.params
    ]
    assert (fast.returns and fast.returns.description) == (
        auto.returns and auto.returns.description
    )
    assert len(fast.meta) == len(auto.meta)


class Tree(BaseModel):
    name: str
    children: list[Tree] = []


def f_nested(tree: Tree, at: Point, tags: list[str] | None = None) -> None:
    """A recursive model (its schema has definitions) and a plain one."""


def f_extra(a: Annotated[int, P(name="A")], b: int = Field(3, ge=0), **more: Any) -> None:
    """A renamed parameter, a constrained default and extra keywords."""


@pytest.mark.parametrize(
    ("fn", "inputs"),
    [
        (f_scalars, ['{"a": "x", "b": "2", "c": 1, "d": true}', '{"a": 1, "b": 2.5, "d": "no"}']),
        (
            f_nested,
            [
                '{"tree": {"name": "r", "children": [{"name": "c"}]}, "at": {"x": 1}}',
                '{"tree": {"children": [{}]}, "at": {"x": "one"}, "tags": "a"}',
                '{"tree": {"name": "r"}, "at": {"x": 1}, "tags": null}',
            ],
        ),
        (f_extra, ['{"A": 1, "z": [1]}', '{"A": 1, "b": -1}', '{"a": 1}', "[1]", "{bad"]),
    ],
)
def test_validating_the_fields_alone_gives_what_the_model_gives(
    fn: Any, inputs: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    validation = importlib.import_module("toolweave.schema.validation")
    fast = fs_module.function_schema(fn, name="f").validator
    assert fast._fields_only
    monkeypatch.setattr(validation, "_fields_validator", lambda model: None)
    through_model = fs_module.function_schema(fn, name="f").validator
    assert not through_model._fields_only

    def outcome(validator: Any, raw: str) -> Any:
        try:
            return validator.validate_json(raw), validator.validate_python(json.loads(raw))
        except (ToolArgumentsError, ValueError) as e:
            return type(e), str(e)

    for raw in inputs:
        assert outcome(fast, raw) == outcome(through_model, raw), raw


def test_a_model_with_its_own_validator_is_validated_as_a_model() -> None:
    from pydantic import model_validator

    from toolweave.schema.validation import ModelArgumentsValidator

    class Range(BaseModel):
        low: int
        high: int

        @model_validator(mode="after")
        def ordered(self) -> Range:
            if self.low > self.high:
                raise ValueError("low is above high")
            return self

    validator = ModelArgumentsValidator(
        Range, tool_name="r", field_to_param={"low": "low", "high": "high"}
    )
    assert not validator._fields_only
    assert validator.validate_json('{"low": 1, "high": "2"}') == {"low": 1, "high": 2}
    with pytest.raises(ToolArgumentsError, match="low is above high"):
        validator.validate_json('{"low": 3, "high": 2}')
