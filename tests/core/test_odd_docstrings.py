"""A docstring never prevents declaring a tool: a style that cannot read it gives way to the
next (AUTO detection), and a text no style reads is the description as it is."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from toolweave import tool
from toolweave.dialects import openai_tool
from toolweave.schema import parse_docstring

ODD_DOCSTRINGS = {
    "args-none": "Fetch the rows.\n\nArgs:\n    None\n",
    "args-none-returns": "Fetch the rows.\n\nArgs:\n    None\n\nReturns:\n    The rows.\n",
    "raises-none": "Fetch the rows.\n\nRaises:\n    None\n",
    "args-empty": "Fetch the rows.\n\nArgs:\n\nReturns:\n    The rows.\n",
    "args-empty-at-end": "Fetch the rows.\n\nArgs:\n",
    "args-no-colon": "Fetch the rows.\n\nArgs:\n    city the city\n",
    "args-unindented": "Fetch the rows.\n\nArgs:\ncity: the city\n  limit: how many\n",
    "args-over-indented": "Fetch the rows.\n\n    Args:\n            city: the city\n  limit: x\n",
    "args-tabs": "Fetch the rows.\n\nArgs:\n\tcity: the city\n  \tlimit: how many\n",
    "mixed-google-rest": "Fetch the rows.\n\nArgs:\n    None\n\n:param city: the city\n",
    "mixed-rest-numpy": (
        "Fetch the rows.\n\n:param city: the city\n\nParameters\n----------\nNone\n"
    ),
    "rest-no-name": "Fetch the rows.\n\n:param: the city\n:returns\n",
    "rest-bad-field": "Fetch the rows.\n\n:param city the city\n:type: str\n",
    "numpy-short-underline": "Fetch the rows.\n\nParameters\n---\ncity\n",
    "numpy-none": "Fetch the rows.\n\nParameters\n----------\nNone\n",
    "epydoc-bad": "Fetch the rows.\n\n@param\n@type city\n",
    "only-colons": ":::\n::\n:",
    "only-title": "Args:",
    "title-then-colon": "Args:\n    :",
    "yields-none": "Stream the rows.\n\nYields:\n    None\n",
    "examples": "Fetch the rows.\n\nExamples:\n    >>> fetch(None)\n    []\n",
    "unicode": "Fetch — the rows ✓.\n\nArgs:\n    city: Zürich\n    None\n",
}


def _declare(doc: str) -> object:
    def fetch(city: str = "Paris", limit: int = 1) -> str:
        return f"{city}:{limit}"

    fetch.__doc__ = doc
    return tool(fetch)


@pytest.mark.parametrize("doc", list(ODD_DOCSTRINGS.values()), ids=list(ODD_DOCSTRINGS))
def test_an_odd_docstring_never_prevents_declaration(doc: str) -> None:
    declared = _declare(doc)
    card = declared.card  # type: ignore[attr-defined]
    spec = openai_tool(card)
    assert spec["function"]["name"] == "fetch"
    assert isinstance(card.description, str)
    if doc.startswith("Fetch"):
        assert card.description.startswith("Fetch")
    assert declared.invoke('{"city": "Oslo"}') == "Oslo:1"  # type: ignore[attr-defined]


def test_a_method_with_args_none_declares_and_keeps_its_summary() -> None:
    """The case of the report: a method whose `Args:` section holds just `None`."""

    class Repo:
        def rows(self, limit: int = 10) -> list[int]:
            """Return the first rows.

            Args:
                None
            """
            return list(range(limit))

    declared = tool(Repo().rows)
    assert declared.card.description.startswith("Return the first rows.")
    assert declared.invoke({"limit": 2}) == [0, 1]


def test_the_next_style_reads_what_google_cannot() -> None:
    """Google fails on `None` under `Args:`; the reST fields after it are still read."""
    parsed = parse_docstring(ODD_DOCSTRINGS["mixed-google-rest"])
    assert parsed.description.startswith("Fetch the rows.")
    assert parsed.params == {"city": "the city"}


@given(st.text(max_size=300))
@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_text_as_a_docstring_declares(doc: str) -> None:
    parsed = parse_docstring(doc)
    assert isinstance(parsed.description, str)
    _declare(doc)


_LINES = st.sampled_from(
    [
        "Args:", "Returns:", "Raises:", "Yields:", "Parameters", "----------", "---",
        "None", "    None", "city: the city", "    city: the city", "\tcity (str): x",
        "  limit: how many", ":param city: the city", ":param:", ":returns", "@param city",
        ".. note::", "=====", "", "Summary.", "    >>> f(None)",
    ]
)  # fmt: skip


@given(st.lists(_LINES, max_size=12))
@settings(max_examples=300, deadline=None)
def test_any_mix_of_section_lines_declares(lines: list[str]) -> None:
    doc = "\n".join(lines)
    assert isinstance(parse_docstring(doc).description, str)
    _declare(doc)
