"""`FunctionToolset`: tools registered in code (what `ToolService.tools(...)` registers)."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from ..errors import ToolCardError, ToolweaveError
from ..execution.executor import DefaultToolExecutor, as_executor
from ..execution.results import ToolExecutionResult
from ..tools.base import Tool
from ..tools.card import ToolCard, ToolInfo
from ..tools.decorator import tool as make_tool
from ..tools.decorator import tools_from
from ..tools.local_function import LocalFunction
from ..tools.source import ToolSource
from .abstract import Toolset, ToolsetTool, same_or_new
from .step import StepContext

__all__ = ["FunctionToolset", "card_of"]

Options = tuple[int | None, bool | None, Any]
"""A registration's (max_concurrency, parallel_safe, requires_approval)."""


class FunctionToolset(Toolset):
    """Tools registered in code: `Tool`s, plain functions, objects (or classes) with `@tool`
    methods, cards with executors, and deferred tools (docs/loop.md, Registration).

    A `Tool` registered without options is kept as it is (registering thousands of tools
    does no per-tool work) and becomes a `ToolsetTool` when it is first offered or called.
    The same tuple is offered every step until a registration changes it."""

    def __init__(self, *objects: Any, label: str | None = None, **options: Any) -> None:
        self._entries: dict[str, ToolsetTool | Tool] = {}
        self._label = label
        self._offered: tuple[ToolsetTool, ...] | None = None
        self._cards: tuple[ToolCard, ...] | None = None
        self._switched: bool | None = None
        self._step: tuple[ToolsetTool, ...] | None = None
        self.wrap: Callable[[Any], Any] = _same
        """Applied to each executor registered (a `ToolService` subclass's hook)."""
        self.reserved: Callable[[], str | None] = _none
        """A name no tool may take (the service's search tool)."""
        self.on_source: Callable[[list[Any], ToolSource, Options], None] | None = None
        """Takes a live listing (a list whose `tool_source` is a `ToolSource`); without it
        the listing's tools are registered as they are now."""
        if objects:
            self.tools(*objects, **options)

    @property
    def label(self) -> str:
        return self._label or "FunctionToolset"

    # what is registered ---------------------------------------------------------------------
    def changed(self) -> None:
        """Forget what was offered (called after every registration change)."""
        self._offered = None
        self._cards = None
        self._switched = None

    @property
    def tool_cards(self) -> tuple[ToolCard, ...]:
        """The cards of every registered tool, in registration order."""
        if self._cards is None:
            self._cards = tuple(e.card for e in self._entries.values())
        return self._cards

    def __len__(self) -> int:
        return len(self._entries)

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def entry(self, name: str, entries: dict[str, ToolsetTool | Tool] | None = None) -> Any:
        """The tool registered under `name` (made from a bare `Tool` on first use), looked
        up in `entries` when given (a round's copy), else in the registry."""
        entries = self._entries if entries is None else entries
        value = entries.get(name)
        if value is None or type(value) is ToolsetTool:
            return value
        assert isinstance(value, Tool)
        made = ToolsetTool.of(
            value.card, self.wrap(DefaultToolExecutor(value, propagate_errors=True))
        )
        entries[name] = made
        if entries is not self._entries and self._entries.get(name) is value:
            self._entries[name] = made  # the tool is still registered: one entry for both
        return made

    async def get_tools(self, ctx: StepContext) -> Sequence[ToolsetTool]:
        offered = self._offered
        if offered is None:
            offered = self._offered = tuple(self.entry(name) for name in list(self._entries))
            self._switched = any(t.card.enabled is not True for t in offered)
        if not self._switched:
            return offered
        kept = [t for t in offered if _enabled(t.card.enabled, ctx)]
        self._step = same_or_new(self._step, kept)
        return self._step

    @property
    def dynamic(self) -> bool:
        """Whether a registered card's `enabled` is not simply True (asked per step)."""
        if self._switched is None:
            self._switched = any(c.enabled is not True for c in self.tool_cards)
        return self._switched

    # registering ----------------------------------------------------------------------------
    def check_new(self, name: str) -> None:
        """Raise `ToolCardError` when `name` is taken."""
        if name in self._entries or name == self.reserved():
            raise ToolCardError(
                f"duplicate tool name {name!r}: a tool with this name is already registered"
            )

    def made(self, t: Tool, options: Options = (None, None, None)) -> ToolsetTool | Tool:
        """What the registry holds for `t`: the tool itself without options (its executor
        is made on first use), else its `ToolsetTool`."""
        max_concurrency, parallel_safe, requires_approval = options
        if max_concurrency is None and parallel_safe is None and requires_approval is None:
            return t
        return ToolsetTool.of(
            t.card,
            self.wrap(DefaultToolExecutor(t, propagate_errors=True)),
            max_concurrency=max_concurrency,
            parallel_safe=parallel_safe,
            requires_approval=requires_approval,
        )

    def add(self, value: ToolsetTool | Tool) -> None:
        """Register one `Tool` or `ToolsetTool` under its card's name."""
        self.check_new(value.card.name)
        self._entries[value.card.name] = value
        self.changed()

    def tools(
        self,
        *objects: Any,
        max_concurrency: int | None = None,
        parallel_safe: bool | None = None,
        requires_approval: Any = None,
    ) -> FunctionToolset:
        """Register tools: `Tool`s, plain functions, objects (or classes) with `@tool`
        methods, `{card_or_name: executor}` mappings, or iterables of these; options as
        for `ToolService.tools`."""
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1 (or None: no bound)")
        options: Options = (max_concurrency, parallel_safe, requires_approval)
        plain = max_concurrency is None and parallel_safe is None and requires_approval is None
        entries = self._entries
        if plain and _add_bulk(entries, objects, self.reserved()):
            self.changed()  # `tools(*many)` takes the path `tools(many)` takes
            return self
        for obj in objects:
            source = getattr(obj, "tool_source", None) if isinstance(obj, list) else None
            if source is not None and isinstance(source, ToolSource) and self.on_source:
                self.on_source(obj, source, options)
            elif isinstance(obj, (list, tuple)) and plain:
                if not _add_bulk(entries, obj, self.reserved()):
                    for item in obj:  # mixed items, or a duplicate to report
                        if isinstance(item, Tool):
                            self.check_new(item.card.name)
                            entries[item.card.name] = item
                        else:
                            self.tools(item)
                self.changed()
            elif isinstance(obj, Tool):
                self.add(self.made(obj, options))
            elif isinstance(obj, Mapping):
                for key, executor in obj.items():
                    self.tool(
                        key,
                        executor,
                        max_concurrency=max_concurrency,
                        parallel_safe=parallel_safe,
                        requires_approval=requires_approval,
                    )
            elif isinstance(obj, (list, tuple, set, frozenset)):
                self.tools(
                    *obj,
                    max_concurrency=max_concurrency,
                    parallel_safe=parallel_safe,
                    requires_approval=requires_approval,
                )
            elif inspect.isfunction(obj) or inspect.ismethod(obj) or inspect.isbuiltin(obj):
                self.add(self.made(make_tool(obj), options))
            else:
                found = tools_from(obj)
                if not found:
                    raise ToolCardError(
                        f"{type(obj).__name__} has no @tool methods and is not a tool, a "
                        "function, or a mapping of cards to executors"
                    )
                for t in found:
                    self.add(self.made(t, options))
        return self

    def tool(
        self,
        obj: Any,
        method_or_executor: Any,
        *,
        max_concurrency: int | None = None,
        parallel_safe: bool | None = None,
        requires_approval: Any = None,
    ) -> FunctionToolset:
        """Register one tool: `tool(obj, "method_name")`, or `tool(spec, executor)` with
        `spec` a `ToolCard`, a `ToolInfo`, a function descriptor or a name (as for
        `ToolService.tool`)."""
        if max_concurrency is not None and max_concurrency < 1:
            raise ValueError("max_concurrency must be at least 1 (or None: no bound)")
        options: Options = (max_concurrency, parallel_safe, requires_approval)
        if isinstance(method_or_executor, str):
            attr = getattr(obj, method_or_executor, None)
            if attr is None:
                raise ToolCardError(f"{type(obj).__name__} has no method {method_or_executor!r}")
            made = attr if isinstance(attr, LocalFunction) else make_tool(attr)
            self.add(self.made(made, options))
            return self
        card = card_of(obj)
        executor = method_or_executor
        if isinstance(executor, Tool):
            executor = DefaultToolExecutor(executor, propagate_errors=True)
        self.add(
            ToolsetTool.of(
                card,
                self.wrap(as_executor(executor)),
                max_concurrency=max_concurrency,
                parallel_safe=parallel_safe,
                requires_approval=requires_approval,
            )
        )
        return self

    def deferred(self, *specs: Any) -> FunctionToolset:
        """Register deferred tools: offered like any tool, answered by the caller (as for
        `ToolService.deferred`)."""
        for spec in specs:
            self.add(ToolsetTool.of(card_of(spec), NOT_RUN, deferred=True))
        return self

    def remove(self, name: str) -> None:
        """Unregister the tool called `name`."""
        del self._entries[name]
        self.changed()


def _enabled(enabled: Any, ctx: StepContext) -> bool:
    if enabled is True or enabled is False:
        return enabled
    return bool(enabled(ctx))


def _same(executor: Any) -> Any:
    return executor


def _none() -> str | None:
    return None


def _add_bulk(
    entries: dict[str, Any], tools: list[Any] | tuple[Any, ...], reserved: str | None
) -> bool:
    """Register a list of `Tool`s in one pass (W8: 10,000 tools); False, with nothing
    registered, when an item is not a `Tool` or a name is taken (the caller goes one by one)."""
    try:
        new = {t._card.name: t for t in tools if isinstance(t, Tool)}
    except AttributeError:  # pragma: no cover - a Tool subclass without a card
        return False
    if len(new) != len(tools) or (reserved is not None and reserved in new):
        return False
    if entries and not new.keys().isdisjoint(entries):
        return False
    entries.update(new)
    return True


def card_of(spec: Any) -> ToolCard:
    """A card for `tool(spec, executor)`: a `ToolCard`, a `ToolInfo`, a function descriptor
    (`{"name", "description", "parameters"}` or OpenAI's `{"type": "function", ...}`) or a
    name."""
    if isinstance(spec, ToolCard):
        return spec
    if isinstance(spec, ToolInfo):
        spec = spec.model_dump()
    if isinstance(spec, Mapping):
        fn = spec.get("function") if spec.get("type") == "function" else None
        desc = fn if isinstance(fn, Mapping) else spec
        if "name" not in desc:
            raise ToolCardError("a tool specification needs a 'name'")
        params = desc.get("parameters")
        return ToolCard(
            name=desc["name"],
            description=desc.get("description") or "",
            **({"input_params": params} if params else {}),
        )
    if isinstance(spec, str):
        return ToolCard(name=spec)
    raise ToolCardError(
        f"cannot make a tool card from {type(spec).__name__}: pass a ToolCard, a ToolInfo, a "
        "function descriptor dict or a name"
    )


class _NotRun:
    """The executor of a deferred tool: the loop never calls it."""

    async def aexecute_with_result(self, *args: Any, **kwargs: Any) -> ToolExecutionResult:
        raise ToolweaveError("a deferred tool is answered by the caller, not run by toolweave")

    def execute_with_result(self, *args: Any, **kwargs: Any) -> ToolExecutionResult:
        raise ToolweaveError("a deferred tool is answered by the caller, not run by toolweave")


NOT_RUN = _NotRun()
"""The executor of every deferred tool."""
