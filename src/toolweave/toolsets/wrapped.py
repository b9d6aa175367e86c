"""`WrappedToolset`: a function around every call of a set's tools."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from .._utils.sync import run_sync
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecutionResult
from .abstract import Toolset, ToolsetTool
from .wrapper import WrapperToolset

__all__ = ["WrappedToolset"]

CallNext = Callable[[ToolExecutionRequest], Awaitable[ToolExecutionResult]]


class _AroundExecutor:
    """Runs a call through `around(request, call_next)`; `inner` is the tool's executor
    (the loop looks through it, e.g. for the object a method tool belongs to)."""

    __slots__ = ("around", "inner")

    def __init__(self, inner: Any, around: Callable[..., Any]) -> None:
        self.inner = inner
        self.around = around

    async def aexecute_with_result(
        self,
        request: ToolExecutionRequest,
        memory_id: Any = None,
        **kwargs: Any,
    ) -> ToolExecutionResult:
        inner = self.inner

        async def call_next(given: ToolExecutionRequest) -> ToolExecutionResult:
            result: ToolExecutionResult = await inner.aexecute_with_result(
                given, memory_id, **kwargs
            )
            return result

        out = await self.around(request, call_next)
        if not isinstance(out, ToolExecutionResult):
            raise TypeError(
                f"a .wrapped() function must return the ToolExecutionResult of call_next "
                f"(or one of its own), got {type(out).__name__}"
            )
        return out

    def execute_with_result(
        self, request: ToolExecutionRequest, memory_id: Any = None, **kwargs: Any
    ) -> ToolExecutionResult:
        return run_sync(self.aexecute_with_result(request, memory_id, **kwargs))


class WrappedToolset(WrapperToolset):
    """Runs every call of `inner`'s tools through `await around(request, call_next)`:
    `await call_next(request)` runs the call (pass a changed request to change its
    arguments) and returns its `ToolExecutionResult`; return it, or a result of your own
    (e.g. to refuse, cache, time or log the call). A tool's argument errors and failures
    propagate through `call_next` to the loop's handlers, as without the wrapper."""

    def __init__(self, inner: Toolset, around: Callable[..., Any]) -> None:
        super().__init__(inner)
        self.around = around

    @property
    def label(self) -> str:
        return f"{self.inner.label}.wrapped(...)"

    def transform(self, tools: Sequence[ToolsetTool]) -> Sequence[ToolsetTool]:
        out = []
        for t in tools:
            kept = self._copies.get(id(t))
            if kept is not None and kept[0] is t:
                out.append(kept[2])
            else:
                out.append(
                    self.derived(t, t.card, executor=_AroundExecutor(t.executor, self.around))
                )
        return out


Toolset._transforms["wrapped"] = WrappedToolset
