"""Helpers shared by the core tests (imported as a top-level module)."""

from __future__ import annotations

from typing import Any

from toolweave.callbacks import TOOL_EVENTS, CallbackFramework


class Recorder:
    """Registers an observer on every tool event and records (event, kwargs)."""

    def __init__(self, fw: CallbackFramework) -> None:
        self.fw = fw
        self.events: list[tuple[str, dict[str, Any]]] = []
        for event in sorted(TOOL_EVENTS):
            fw.register(event, self._make(event))

    def _make(self, event: str) -> Any:
        def observer(**kwargs: Any) -> None:
            self.events.append((event, kwargs))

        return observer

    @property
    def names(self) -> list[str]:
        return [name for name, _ in self.events]

    def first(self, event: str) -> dict[str, Any]:
        return next(kw for name, kw in self.events if name == event)
