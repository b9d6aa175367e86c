"""Hypothesis strategies shared by the property tests."""

from __future__ import annotations

from typing import Any, Literal, Optional

import pydantic
from hypothesis import strategies as st

json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=20)
)

json_values = st.recursive(
    json_scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=20,
)

json_objects = st.dictionaries(st.text(max_size=10), json_values, max_size=6)

_leaf_types = st.sampled_from([int, str, float, bool, Literal["a", "b"], Literal[1, 2]])


def _wrap(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.one_of(
        children.map(lambda t: list[t]),  # type: ignore[valid-type]
        children.map(lambda t: dict[str, t]),  # type: ignore[valid-type]
        children.map(lambda t: Optional[t]),  # noqa: UP045
        st.tuples(children, children).map(lambda ts: ts[0] | ts[1]),
        st.lists(children, min_size=1, max_size=3).map(_model_of),
    )


_counter = iter(range(10**9))


def _model_of(types: list[Any]) -> type[pydantic.BaseModel]:
    fields = {f"f{i}": (t, ...) for i, t in enumerate(types)}
    return pydantic.create_model(f"M{next(_counter)}", **fields)  # type: ignore[call-overload,no-any-return]


python_types = st.recursive(_leaf_types, _wrap, max_leaves=6)
