"""Round trips as properties: a tool declared in toolweave, exported to a framework and
imported back, has the same card (name, description, JSON Schema), for generated
signatures."""

from __future__ import annotations

import inspect
import json
import keyword
from typing import Any, Literal

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolweave import DefaultToolExecutor, LocalFunction, ToolExecutionRequest, tool
from toolweave.dialects import openai_tool

TYPES: list[tuple[Any, st.SearchStrategy[Any]]] = [
    (str, st.text(max_size=5)),
    (int, st.integers(-5, 5)),
    (float, st.floats(-1, 1, allow_nan=False)),
    (bool, st.booleans()),
    (list[int], st.lists(st.integers(0, 3), max_size=2)),
    (dict[str, str], st.dictionaries(st.sampled_from("ab"), st.sampled_from("xy"), max_size=1)),
    (Literal["red", "green"], st.sampled_from(["red", "green"])),
    (int | None, st.none() | st.integers(0, 3)),
]

names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: not keyword.iskeyword(n) and n not in ("self", "cls")
)


@st.composite
def declared_tools(draw: st.DrawFn) -> LocalFunction:
    """A `@tool` over a generated signature: 0-5 parameters of assorted types, some with
    defaults, some described, and a generated name and description."""
    params = draw(st.lists(names, max_size=5, unique=True))
    annotations: dict[str, Any] = {}
    signature: list[inspect.Parameter] = []
    described: list[str] = []
    with_default = False
    for param in params:
        annotation, values = draw(st.sampled_from(TYPES))
        annotations[param] = annotation
        # a parameter without a default cannot follow one with a default
        with_default = with_default or draw(st.booleans())
        default = draw(values) if with_default else inspect.Parameter.empty
        signature.append(inspect.Parameter(param, inspect.Parameter.KEYWORD_ONLY, default=default))
        if draw(st.booleans()):
            described.append(f"    {param}: the {param.replace('_', ' ')}")

    def function(**kwargs: Any) -> dict[str, Any]:
        return kwargs

    summary = draw(st.text(st.characters(categories=["L", "N", "Zs"]), min_size=1, max_size=30))
    docstring = summary.strip() or "A tool."
    if described:
        docstring += "\n\nArgs:\n" + "\n".join(described)
    function.__name__ = draw(names)
    function.__doc__ = docstring
    function.__signature__ = inspect.Signature(signature)  # type: ignore[attr-defined]
    function.__annotations__ = {**annotations, "return": dict[str, Any]}
    return tool(function)


SETTINGS = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _same_card(original: LocalFunction, back: Any, schema: dict[str, Any] | None = None) -> None:
    assert back.card.name == original.card.name
    assert back.card.description == original.card.description
    assert back.card.input_params == (schema or original.card.input_params)


@SETTINGS
@given(declared_tools())
def test_langchain_round_trip(declared: LocalFunction) -> None:
    interop = pytest.importorskip("toolweave.interop.langchain")
    _same_card(declared, interop.from_langchain(interop.to_langchain(declared)))


@SETTINGS
@given(declared_tools())
def test_pydantic_ai_round_trip(declared: LocalFunction) -> None:
    interop = pytest.importorskip("toolweave.interop.pydantic_ai")
    _same_card(declared, interop.from_pydantic_ai(interop.to_pydantic_ai(declared)))


@SETTINGS
@given(declared_tools())
def test_openai_agents_round_trip(declared: LocalFunction) -> None:
    interop = pytest.importorskip("toolweave.interop.openai_agents")
    loose = interop.to_openai_agents(declared, strict=False)
    _same_card(declared, interop.from_openai_agents(loose))
    # by default the tool goes out as toolweave sends it to OpenAI: strict when it can be
    back = interop.from_openai_agents(interop.to_openai_agents(declared))
    sent = openai_tool(declared.card)["function"]
    _same_card(declared, back, sent["parameters"])
    assert back.card.strict is bool(sent.get("strict"))


@SETTINGS
@given(declared_tools())
def test_llamaindex_round_trip(declared: LocalFunction) -> None:
    interop = pytest.importorskip("toolweave.interop.llamaindex")
    _same_card(declared, interop.from_llamaindex(interop.to_llamaindex(declared)))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    declared_tools(), st.sampled_from(["langchain", "pydantic_ai", "openai_agents", "llamaindex"])
)
def test_a_round_tripped_tool_answers_as_the_original(declared: LocalFunction, via: str) -> None:
    """Called with a value for each required parameter (the others left to their defaults),
    the tool that went out and came back gives the same text as the original. (OpenAI Agents
    non-strict: strict mode makes every parameter required.)"""
    interop = pytest.importorskip(f"toolweave.interop.{via}")
    options = {"strict": False} if via == "openai_agents" else {}
    out = getattr(interop, f"to_{via}")(declared, **options)
    back = getattr(interop, f"from_{via}")(out)
    required = declared.card.input_params.get("required", [])
    props = declared.card.input_params.get("properties", {})
    args = {name: _sample(props[name]) for name in required}

    request = ToolExecutionRequest(id="c1", name=declared.name, arguments=json.dumps(args))
    expected = DefaultToolExecutor(declared).execute_with_result(request)
    got = DefaultToolExecutor(back).execute_with_result(request)
    assert got.is_error == expected.is_error
    assert json.loads(got.text) == json.loads(expected.text)


def _sample(schema: dict[str, Any]) -> Any:
    """A value `schema` accepts (for the generated types above)."""
    if "enum" in schema:
        return schema["enum"][0]
    if "anyOf" in schema:
        return None
    return {
        "string": "s",
        "integer": 1,
        "number": 0.5,
        "boolean": True,
        "array": [],
        "object": {},
    }[schema["type"]]
