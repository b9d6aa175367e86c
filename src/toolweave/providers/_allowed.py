"""An allowed-tools `ToolChoice` for a provider with no field for it (Anthropic, Bedrock):
the request offers only the subset's tools, under the plain choice that stands for it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from ..chat.request import ToolChoice

__all__ = ["check_named", "restrict_to_allowed"]


def check_named(provider: Any, choice: ToolChoice, tools: Iterable[Any]) -> None:
    """Refuse (`UnsupportedOptionError` from `provider`) a `choice` naming a tool, or a subset
    of tools, that is not among `tools` (the cards the request sends)."""
    missing = choice.missing(card.name for card in tools)
    if missing:
        raise provider.unsupported("tool_choice", f"no tool named {missing[0]!r} in the request")


def restrict_to_allowed(
    provider: Any, choice: ToolChoice | None, tools: Sequence[Any]
) -> tuple[tuple[Any, ...], ToolChoice | None]:
    """`tools` and `choice` as sent by `provider` (a `ChatModel` with `unsupported`): for a
    subset, only its cards, with `AUTO`, `REQUIRED` or (a required subset of one)
    `tool(name)`; a name not among `tools` is an `UnsupportedOptionError`."""
    if choice is None or choice.allowed is None:
        return tuple(tools), choice
    check_named(provider, choice, tools)
    allowed = set(choice.allowed)
    kept = tuple(card for card in tools if card.name in allowed)
    if choice.mode == "auto":
        return kept, ToolChoice.AUTO
    return kept, ToolChoice.tool(kept[0].name) if len(kept) == 1 else ToolChoice.REQUIRED
