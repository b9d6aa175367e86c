"""Result to text: any value becomes text without raising; numbers stay numbers; only a
failing str() is an error, naming the leaf's path."""

from __future__ import annotations

import dataclasses
import decimal
import fractions
import json
import logging
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from toolweave.errors import ToolExecutionError
from toolweave.execution import result_to_text


class NumpyLikeInt:
    """Like numpy.int64: integral through __index__, not a Python int."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


class MpfLike:
    """Like mpmath.mpf: a real number through __float__ only."""

    def __init__(self, value: float) -> None:
        self.value = value

    def __float__(self) -> float:
        return self.value

    def __str__(self) -> str:
        return f"mpf('{self.value}')"


class ArrayLike:
    """Like a numpy array: tolist() gives the values."""

    def __init__(self, values: list[Any]) -> None:
        self.values = values

    def tolist(self) -> list[Any]:
        return list(self.values)


class Opaque:
    """No JSON form at all."""

    def __init__(self, tag: int) -> None:
        self.tag = tag

    def __repr__(self) -> str:
        return f"Opaque({self.tag})"


@dataclasses.dataclass
class Point:
    x: Any
    y: Any


class Box(BaseModel):
    value: Any
    label: str = "box"


json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=10),
)
odd_leaf = st.one_of(
    st.integers().map(NumpyLikeInt),
    st.floats(allow_nan=False, allow_infinity=False).map(MpfLike),
    st.lists(st.integers(), max_size=3).map(ArrayLike),
    st.decimals(allow_nan=False, allow_infinity=False),
    st.fractions(),
    st.binary(max_size=8),
    st.integers().map(Opaque),
    st.complex_numbers(allow_nan=False, allow_infinity=False),
)


def _containers(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    keys = st.one_of(st.text(max_size=5), st.integers(), st.tuples(st.integers()))
    return st.one_of(
        st.lists(children, max_size=4),
        st.tuples(children, children),
        st.dictionaries(keys, children, max_size=4),
        st.frozensets(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
        st.builds(Point, children, children),
        st.builds(Box, value=children),
    )


values = st.recursive(st.one_of(json_leaf, odd_leaf), _containers, max_leaves=12)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(values)
def test_any_value_becomes_text(value: Any) -> None:
    text = result_to_text(value, tool_name="t")
    assert isinstance(text, str)
    if not isinstance(value, str) and value is not None:
        json.loads(text)  # always JSON (a str() leaf is a JSON string)


def test_numbers_of_any_kind_are_json_numbers() -> None:
    text = result_to_text(
        {
            "np_int": NumpyLikeInt(7),
            "mpf": MpfLike(2.5),
            "fraction": fractions.Fraction(1, 4),
            "array": ArrayLike([1, 2.5]),
            "nested": [Point(NumpyLikeInt(1), MpfLike(0.5))],
        }
    )
    assert json.loads(text) == {
        "np_int": 7,
        "mpf": 2.5,
        "fraction": 0.25,
        "array": [1, 2.5],
        "nested": [{"x": 1, "y": 0.5}],
    }


def test_pydantic_rules_are_kept() -> None:
    assert result_to_text({"n": decimal.Decimal("1.5"), "s": {3}}) == '{"n":"1.5","s":[3]}'
    assert result_to_text(b"hi") == '"hi"'
    assert result_to_text(b"\xff\xfe") == '"//4="'  # not UTF-8: base64
    assert result_to_text(Box(value=MpfLike(1.0))) == '{"value":1.0,"label":"box"}'
    # a model holding non-UTF-8 bytes under a key JSON cannot take: still JSON
    assert json.loads(result_to_text(Box(value={(0,): b"\x80"}))) == {
        "value": {"(0,)": "gA=="},
        "label": "box",
    }


def test_other_values_become_their_str_logged_once_per_type(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Gadget:
        def __str__(self) -> str:
            return "gadget!"

    with caplog.at_level(logging.INFO, logger="toolweave.execution"):
        assert result_to_text([Gadget(), Gadget()]) == '["gadget!","gadget!"]'
        assert result_to_text({"again": Gadget()}) == '{"again":"gadget!"}'
    assert len([r for r in caplog.records if "Gadget" in r.getMessage()]) == 1
    cyclic: list[Any] = [1]
    cyclic.append(cyclic)
    assert result_to_text(cyclic) == "[1, [...]]"


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text")


@pytest.mark.parametrize(
    ("value", "path"),
    [
        ({"items": [1, 2, 3, _Unprintable()]}, 'result["items"][3]'),
        ([Point(1, {"deep": _Unprintable()})], 'result[0].y["deep"]'),
        (Box(value=[_Unprintable()]), "result.value[0]"),
        (_Unprintable(), "result"),
    ],
)
def test_a_failing_str_names_the_leaf(value: Any, path: str) -> None:
    with pytest.raises(ToolExecutionError) as info:
        result_to_text(value, tool_name="t")
    assert info.value.details["path"] == path
    assert path in info.value.message and "_Unprintable" in info.value.message
    assert isinstance(info.value.cause, RuntimeError)


json_values = st.recursive(
    json_leaf,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=12,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_json_data_becomes_exactly_what_json_dumps_gives(value: Any) -> None:
    if isinstance(value, str) or value is None:
        return  # sent as is / "Success"
    assert result_to_text(value) == json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def test_threads_encoding_the_same_value_at_once_all_get_its_json() -> None:
    import concurrent.futures

    shared = {"items": [{"n": i, "tags": ["a", "b"]} for i in range(50)], "more": {"x": [1, 2]}}
    expected = json.dumps(shared, separators=(",", ":"))

    def encode_many() -> set[str]:
        return {result_to_text(shared) for _ in range(300)}

    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        outcomes = set().union(*pool.map(lambda _: encode_many(), range(8)))
    assert outcomes == {expected}


def test_a_result_whose_parts_are_all_for_the_user_tells_the_model_so() -> None:
    from toolweave.execution.content import Annotations, ImageContent, TextContent
    from toolweave.execution.results import USER_ONLY_TEXT, ToolExecutionResult

    user = Annotations(audience=("user",))
    note = TextContent(text="for your eyes", annotations=user)
    image = ImageContent(data="iVBORw0KGgo=", mime_type="image/png")
    # all for the user: a note, never an empty tool result (some APIs refuse one)
    assert ToolExecutionResult(text="", contents=(note,)).result_text() == USER_ONLY_TEXT
    # structured data next to them is still the model's
    both = ToolExecutionResult(text="", contents=(note,), structured={"a": 1})
    assert json.loads(both.result_text()) == {"a": 1}
    # media for the model carries the result: no note
    assert ToolExecutionResult(text="", contents=(note, image)).result_text() == ""
    assert ToolExecutionResult(text="", contents=()).result_text() == ""
