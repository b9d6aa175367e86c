"""The callback framework: one registry of observers and transforms per event.

Rules:
- callbacks run by priority, highest first; ties run in registration order;
- a callback may be sync or async, and receives only the keyword arguments its signature
  names (all of them if it takes `**kwargs`);
- `once=True` callbacks are removed after their first run;
- an observer that raises is logged and skipped, so a broken observer never breaks a tool;
  raising `AbortError` vetoes the call instead (its `cause`, when set, is raised);
- transforms (`on_transform`) run in priority order, each receiving the value returned by
  the previous one (`None` keeps the value); their exceptions propagate.
"""

from __future__ import annotations

import inspect
import itertools
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._utils.sync import run_sync
from ..errors import AbortError

__all__ = ["Callback", "CallbackFramework", "callback_framework"]

logger = logging.getLogger("toolweave.callbacks")

F = TypeVar("F", bound=Callable[..., Any])
_seq = itertools.count()


@dataclass(slots=True)
class Callback:
    """One registered callback."""

    event: str
    func: Callable[..., Any]
    priority: int = 0
    once: bool = False
    transform: bool = False
    order: int = field(default_factory=lambda: next(_seq))
    accepts_all: bool = False
    names: frozenset[str] = frozenset()
    is_async: bool = False

    def __post_init__(self) -> None:
        try:
            params = inspect.signature(self.func).parameters.values()
        except (TypeError, ValueError):
            self.accepts_all = True
        else:
            self.accepts_all = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params)
            self.names = frozenset(
                p.name
                for p in params
                if p.kind
                in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
            )
        self.is_async = inspect.iscoroutinefunction(self.func)

    def arguments(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        if self.accepts_all:
            return kwargs
        return {k: v for k, v in kwargs.items() if k in self.names}


class CallbackFramework:
    """A registry of callbacks keyed by event name."""

    def __init__(self) -> None:
        self._observers: dict[str, list[Callback]] = {}
        self._transforms: dict[str, list[Callback]] = {}
        self.count = 0
        """Number of registered callbacks; 0 lets tools skip the whole mechanism."""

    # registration ---------------------------------------------------------------------------
    def register(
        self,
        event: str,
        func: Callable[..., Any],
        *,
        priority: int = 0,
        once: bool = False,
        transform: bool = False,
    ) -> Callback:
        """Register `func` for `event` and return its handle (for `unregister`)."""
        cb = Callback(event, func, priority, once, transform)
        table = self._transforms if transform else self._observers
        entries = table.setdefault(event, [])
        entries.append(cb)
        entries.sort(key=lambda c: (-c.priority, c.order))
        self.count += 1
        return cb

    def on(self, event: str, *, priority: int = 0, once: bool = False) -> Callable[[F], F]:
        """Decorator form of `register` for observers."""

        def deco(func: F) -> F:
            self.register(event, func, priority=priority, once=once)
            return func

        return deco

    def on_transform(
        self, event: str, *, priority: int = 0, once: bool = False
    ) -> Callable[[F], F]:
        """Decorator registering an input/output transform for `event`."""

        def deco(func: F) -> F:
            self.register(event, func, priority=priority, once=once, transform=True)
            return func

        return deco

    def unregister(self, event: str, func_or_handle: Callable[..., Any] | Callback) -> bool:
        """Remove a callback; returns whether one was found."""
        for table in (self._observers, self._transforms):
            entries = table.get(event, [])
            for cb in entries:
                if cb is func_or_handle or cb.func is func_or_handle:
                    entries.remove(cb)
                    self.count -= 1
                    return True
        return False

    def clear(self, event: str | None = None) -> None:
        """Remove every callback, or those of one event."""
        if event is None:
            self._observers.clear()
            self._transforms.clear()
            self.count = 0
            return
        self.count -= len(self._observers.pop(event, [])) + len(self._transforms.pop(event, []))

    def has(self, event: str) -> bool:
        """Whether anything listens to `event`."""
        return bool(self._observers.get(event) or self._transforms.get(event))

    def _take(self, table: dict[str, list[Callback]], event: str) -> list[Callback]:
        entries = table.get(event)
        if not entries:
            return []
        snapshot = list(entries)
        for cb in snapshot:
            if cb.once:
                entries.remove(cb)
                self.count -= 1
        return snapshot

    # triggering -----------------------------------------------------------------------------
    @staticmethod
    def _handle_failure(cb: Callback, error: Exception) -> None:
        if isinstance(error, AbortError):
            if error.cause is not None:
                raise error.cause from error
            raise error
        logger.warning(
            "callback %r for event %r failed: %s: %s",
            getattr(cb.func, "__qualname__", cb.func),
            cb.event,
            type(error).__name__,
            error,
        )

    async def trigger(self, event: str, **kwargs: Any) -> list[Any]:
        """Run the observers of `event`; returns their results (failed ones omitted)."""
        results: list[Any] = []
        for cb in self._take(self._observers, event):
            try:
                out = cb.func(**cb.arguments(kwargs))
                if inspect.isawaitable(out):
                    out = await out
                results.append(out)
            except Exception as e:
                self._handle_failure(cb, e)
        return results

    def trigger_sync(self, event: str, **kwargs: Any) -> list[Any]:
        """`trigger` for synchronous code; async observers run to completion on a private loop."""
        results: list[Any] = []
        for cb in self._take(self._observers, event):
            try:
                out = cb.func(**cb.arguments(kwargs))
                if inspect.isawaitable(out):
                    out = run_sync(_await(out))
                results.append(out)
            except Exception as e:
                self._handle_failure(cb, e)
        return results

    async def transform(self, event: str, value: Any, **kwargs: Any) -> Any:
        """Pass `value` through the transforms of `event`, in priority order."""
        for cb in self._take(self._transforms, event):
            out = cb.func(**cb.arguments({**kwargs, "value": value}))
            if inspect.isawaitable(out):
                out = await out
            if out is not None:
                value = out
        return value

    def transform_sync(self, event: str, value: Any, **kwargs: Any) -> Any:
        """`transform` for synchronous code."""
        for cb in self._take(self._transforms, event):
            out = cb.func(**cb.arguments({**kwargs, "value": value}))
            if inspect.isawaitable(out):
                out = run_sync(_await(out))
            if out is not None:
                value = out
        return value


async def _await(aw: Awaitable[Any]) -> Any:
    return await aw


callback_framework = CallbackFramework()
"""The process-wide default framework used by tools and services unless given another."""
