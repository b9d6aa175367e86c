"""Whole tool lists per dialect: per-card strictness and the cache keyed by the card tuple."""

from __future__ import annotations

from toolweave import ToolCard, ToolParameters
from toolweave.dialects import (
    anthropic_tool,
    anthropic_tools,
    gemini_function_declaration,
    gemini_function_declarations,
    openai_tool,
    openai_tools,
)


def _cards(n: int) -> tuple[ToolCard, ...]:
    params = ToolParameters().add("q", "string", required=True).to_schema()
    return tuple(
        ToolCard(
            name=f"t{i}",
            description=f"tool {i}",
            input_params=params,
            strict=(False if i == 0 else None),
        )
        for i in range(n)
    )


def test_lists_match_the_per_card_functions_with_card_strictness_winning() -> None:
    cards = _cards(3)
    assert openai_tools(cards, True) == [
        openai_tool(cards[0], False),
        openai_tool(cards[1], True),
        openai_tool(cards[2], True),
    ]
    assert "strict" not in openai_tools(cards, True)[0]["function"]
    assert anthropic_tools(cards) == [anthropic_tool(c, c.strict) for c in cards]
    assert gemini_function_declarations(cards, "json_schema") == [
        gemini_function_declaration(c, "json_schema") for c in cards
    ]


def test_the_list_is_cached_per_tuple_and_returned_as_a_fresh_list() -> None:
    cards = _cards(1000)
    first = openai_tools(cards)
    second = openai_tools(cards)
    assert first == second and first is not second
    assert all(
        a is b for a, b in zip(first, second, strict=True)
    )  # the entries come from the cache
    second.append({"mutated": True})
    assert len(openai_tools(cards)) == 1000  # callers may change their copy
    other = tuple(cards)  # the same tuple object (tuple() of a tuple)
    assert openai_tools(other)[0] is first[0]
    listed = list(cards)
    assert openai_tools(listed) == first  # lists are not cached but give the same entries
