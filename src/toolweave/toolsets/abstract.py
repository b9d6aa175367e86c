"""`Toolset`: what offers tools for one step, and `ToolsetTool`, one tool it offers.

A `ToolService` asks each of its toolsets, before every model request, for the tools of
that step (`Toolset.get_tools`) and for text to add to the system message
(`Toolset.instructions`); it offers the union and runs each call with the executor of the
tool that was offered. Transforms wrap a toolset and are reached through fluent methods on
the base (`.filtered`, `.prefixed`, `.renamed`, `.prepared`, `.with_approval`, `.wrapped`,
`.guarded`),
each returning a new toolset and leaving the original as it was.

Request building stays cached while nothing changes: a toolset whose tools did not change
returns the very tuple it returned before (transforms keep that identity too), so the loop
compares identities, not cards.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from .._utils.limit import Limit
from ..errors import ToolCardError
from ..tools.card import ToolCard
from .step import StepContext

if TYPE_CHECKING:
    from ..chat.request import ToolChoice

__all__ = ["ToolNameConflictError", "Toolset", "ToolsetTool", "same_or_new"]


class _Unknown:
    __slots__ = ()

    def __repr__(self) -> str:
        return "<unknown>"


UNKNOWN: Any = _Unknown()
"""`ToolsetTool.instance` before it is looked up."""


@dataclass(slots=True, eq=False)
class ToolsetTool:
    """One tool a toolset offers: its card, what runs its calls and its registration options.

    Build one with `ToolsetTool.of(card, executor, ...)`; a transform that changes the card
    makes a copy with `dataclasses.replace`, which keeps the concurrency `limit` (shared by
    every conversation and every step)."""

    card: ToolCard
    executor: Any
    """Runs the calls: has `aexecute_with_result(request, memory_id, *, context, injected)`
    (a `DefaultToolExecutor`, or `as_executor(...)` of an executor of yours)."""
    limit: Limit | None = None
    """At most this many calls of the tool at once (from `max_concurrency`)."""
    parallel_safe: bool | None = None
    """The registration's `parallel_safe`, else the card's when it was given explicitly."""
    instance: Any = UNKNOWN
    """The object whose bound method the tool is (None when there is none), found lazily."""
    deferred: bool = False
    """Calls are answered by the caller (`ToolService.deferred`), never run here."""
    validator: Any = None
    """The card's argument validator, for an approval policy of a tool run by an executor of
    the caller's (built on first use)."""
    max_result_chars: int | None = None
    """The toolset's result cap in characters (`.limited(...)`); the card's own wins."""
    max_result_tokens: int | None = None
    """The toolset's result cap in tokens; the card's own wins."""
    max_argument_retries: int | None = None
    """The toolset's argument-retry budget; the card's own wins."""

    @classmethod
    def of(
        cls,
        card: ToolCard,
        executor: Any,
        *,
        max_concurrency: int | None = None,
        parallel_safe: bool | None = None,
        requires_approval: Any = None,
        deferred: bool = False,
    ) -> ToolsetTool:
        """A tool for `card` run by `executor`; the options left None are the card's."""
        if requires_approval is not None and requires_approval is not card.requires_approval:
            card = card.model_copy(update={"requires_approval": requires_approval})
        if max_concurrency is None:
            max_concurrency = card.max_concurrency
        if parallel_safe is None and (
            card.parallel_safe is False or "parallel_safe" in card.model_fields_set
        ):
            parallel_safe = card.parallel_safe
        limit = Limit(max_concurrency) if max_concurrency is not None else None
        return cls(card, executor, limit, parallel_safe, deferred=deferred)

    @property
    def name(self) -> str:
        """The name the model sees."""
        return self.card.name

    @property
    def barrier(self) -> bool:
        """Whether a call of this tool runs alone in its round (`parallel_safe=False`)."""
        return self.parallel_safe is False


class ToolNameConflictError(ToolCardError):
    """Two toolsets (or one, twice) offer a tool of the same name in one step; raised before
    the request is sent. `name` is the tool's name, `toolsets` the labels of both sets."""

    def __init__(self, name: str, first: str, second: str) -> None:
        where = f"{first} and {second}" if first != second else f"{first} (twice)"
        super().__init__(
            f"tool name {name!r} is offered by {where} in the same step; rename or filter "
            "one of them (e.g. .prefixed(...), .renamed({...}), .filtered(...))",
            details={"name": name, "toolsets": [first, second]},
        )
        self.name = name
        self.toolsets = (first, second)


_Transform = Callable[..., "Toolset"]


class Toolset(ABC):
    """Offers tools for one step of a conversation and runs their calls.

    Subclasses implement `get_tools`; `instructions` and `label` have defaults. A toolset
    whose tools do not change between steps should return the same tuple object each time
    (the loop then reuses the request it built)."""

    _transforms: ClassVar[dict[str, _Transform]] = {}
    # the transforms' modules import this one, so they register here instead of being
    # imported by it (which would be an import circle)

    @property
    def label(self) -> str:
        """How errors name this toolset."""
        return type(self).__name__

    @abstractmethod
    async def get_tools(self, ctx: StepContext) -> Sequence[ToolsetTool]:
        """The tools to offer in the step `ctx` (names unique within the set)."""

    async def instructions(self, ctx: StepContext) -> str | None:
        """Text to add to the system message of the step `ctx` (None: nothing)."""
        return None

    async def tool_choice(self, ctx: StepContext) -> ToolChoice | None:
        """Which of the set's tools the model may call in the step `ctx` (asked after
        `get_tools` with the same `ctx`); None: any of them, as the request says."""
        return None

    def __repr__(self) -> str:
        return self.label

    # fluent transforms (docs/toolsets.md) ---------------------------------------------------
    def _transform(self, kind: str, *args: Any, **kwargs: Any) -> Toolset:
        return Toolset._transforms[kind](self, *args, **kwargs)

    def filtered(self, predicate: Callable[[StepContext, ToolCard], bool]) -> Toolset:
        """Offer only the tools for which `predicate(ctx, card)` is true, asked every step."""
        return self._transform("filtered", predicate)

    def prefixed(self, prefix: str, *, separator: str = "_") -> Toolset:
        """Offer every tool as `prefix + separator + name`."""
        return self._transform("prefixed", prefix, separator=separator)

    def renamed(self, names: Mapping[str, str]) -> Toolset:
        """Offer the tools named in `names` (old -> new) under their new names."""
        return self._transform("renamed", names)

    def prepared(self, prepare: Callable[..., Any]) -> Toolset:
        """Per step, `prepare(ctx, cards)` (sync or async) returns the cards to offer: a
        subset (hide tools), possibly changed (a description, a narrower schema), names kept."""
        return self._transform("prepared", prepare)

    def with_approval(self, policy: Any = True) -> Toolset:
        """Every call of the set waits for approval: `policy` is True, or a function of the
        arguments and the `ToolContext` (docs/approvals.md); False lifts the cards' own."""
        return self._transform("with_approval", policy)

    def choosing(self, choose: Callable[..., Any]) -> Toolset:
        """Per step, `choose(ctx, cards)` (sync or async) returns a `ToolChoice` naming which
        of the set's tools the model may call (`ToolChoice.allowed_tools([...])`), while all
        stay offered; None: no restriction (docs/toolsets.md)."""
        return self._transform("choosing", choose)

    def searchable(self, strategy: Any = None) -> Toolset:
        """Tool search over the set: the model sees a search tool plus the tools found so
        far; `strategy` is a `ToolSearchStrategy` (`KeywordToolSearch()` by default, or
        `EmbeddingToolSearch(embed)` with your embedding function; docs/toolsets.md)."""
        return self._transform("searchable", strategy)

    def wrapped(self, around: Callable[..., Any]) -> Toolset:
        """Run every call of the set through `await around(request, call_next)`, where
        `await call_next(request)` runs it (with the request as given, or a changed one) and
        returns its `ToolExecutionResult`."""
        return self._transform("wrapped", around)

    def limited(
        self,
        *,
        max_result_chars: int | None = None,
        max_result_tokens: int | None = None,
        max_argument_retries: int | None = None,
    ) -> Toolset:
        """Cap the result text of every tool of the set (characters, or tokens counted by
        the service's `result_token_counter`) and set their argument-retry budget; a card's
        own values win, and these win over the service's (docs/policies.md)."""
        return self._transform(
            "limited",
            max_result_chars=max_result_chars,
            max_result_tokens=max_result_tokens,
            max_argument_retries=max_argument_retries,
        )

    def guarded(self, *guardrails: Any) -> Toolset:
        """Run `guardrails` (`InputGuardrail`s, `OutputGuardrail`s) around every call of the
        set, after the service's and before the tools' own (docs/policies.md)."""
        return self._transform("guarded", *guardrails)


def same_or_new(
    previous: tuple[ToolsetTool, ...] | None, tools: Sequence[ToolsetTool]
) -> tuple[ToolsetTool, ...]:
    """`previous` when `tools` holds the same objects in the same order, else a new tuple:
    a set whose tools did not change hands back the object it handed back before."""
    if (
        previous is not None
        and len(previous) == len(tools)
        and all(a is b for a, b in zip(previous, tools, strict=True))
    ):
        return previous
    return tuple(tools)
