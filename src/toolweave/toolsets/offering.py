"""`Offering`: what one conversation offers at each step, over its toolsets."""

from __future__ import annotations

from collections.abc import Sequence

from ..chat.messages import ChatMessage, SystemMessage
from ..chat.request import ToolChoice
from ..tools.card import ToolCard
from .abstract import Toolset, ToolsetTool
from .choosing import merge_choices
from .combined import check_unique
from .step import StepContext

__all__ = ["Offering", "with_instructions"]


class Offering:
    """The union of `toolsets`' tools for the current step of one conversation, checked
    for names offered twice (`ToolNameConflictError`, before the request is sent), and
    their instructions. `step` rebuilds `tools` and `cards` only when a set answered with
    other tools than at the step before (by identity)."""

    __slots__ = ("_answers", "cards", "instructions", "tool_choice", "tools", "toolsets")

    def __init__(self, toolsets: Sequence[Toolset]) -> None:
        self.toolsets = tuple(toolsets)
        self._answers: tuple[Sequence[ToolsetTool], ...] | None = None
        self.tools: dict[str, ToolsetTool] = {}
        """The step's tools by the name the model sees."""
        self.cards: tuple[ToolCard, ...] = ()
        """The step's cards, in order: each set's in the order of `toolsets`."""
        self.instructions: str | None = None
        """The step's instructions, joined (None: none)."""
        self.tool_choice: ToolChoice | None = None
        """The step's choice from the sets' `tool_choice` (None: no set restricts)."""

    async def step(self, ctx: StepContext) -> bool:
        """Ask every toolset for the step `ctx`; whether its tools or its tool choice
        changed."""
        answers = tuple([await t.get_tools(ctx) for t in self.toolsets])
        texts = [await t.instructions(ctx) for t in self.toolsets]
        self.instructions = "\n\n".join(t for t in texts if t) or None
        choices = [await t.tool_choice(ctx) for t in self.toolsets]
        choice = (
            None
            if all(c is None for c in choices)
            else merge_choices(
                [
                    (c, [t.card.name for t in tools])
                    for c, tools in zip(choices, answers, strict=True)
                ]
            )
        )
        chose = choice != self.tool_choice
        self.tool_choice = choice
        previous = self._answers
        if previous is not None and all(a is b for a, b in zip(previous, answers, strict=True)):
            return chose
        check_unique(list(zip(self.toolsets, answers, strict=True)))
        self._answers = answers
        self.tools = {t.card.name: t for tools in answers for t in tools}
        self.cards = tuple(t.card for t in self.tools.values())
        return True


def with_instructions(messages: Sequence[ChatMessage], text: str | None) -> tuple[ChatMessage, ...]:
    """`messages` with `text` added to the system text: appended to a leading
    `SystemMessage`, or sent as one before them."""
    if not text:
        return tuple(messages)
    first = messages[0] if messages else None
    if isinstance(first, SystemMessage):
        joined = f"{first.text}\n\n{text}" if first.text else text
        return (first.model_copy(update={"text": joined}), *messages[1:])
    return (SystemMessage(text), *messages)
