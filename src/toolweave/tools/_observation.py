"""Observation of a `Tool` call: its callback events and its tracing span.

An `Observation` reports one call to the callback framework, one method per step, so the
call's template (in `tools.base`) reads as the list of steps and this module holds what each
step reports. Every method has a sync form and an async one (`a` prefix). A stream whose
tool has no callbacks registered uses `SILENT`, which reports nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from typing import Any

from ..callbacks.events import ToolCallEvents as E
from ..callbacks.framework import CallbackFramework
from ..callbacks.otel import span, tool_span_attributes
from .card import ToolCard, ToolInfo

__all__ = ["SILENT", "Observation", "tool_span"]


def tool_span(card: ToolCard, kwargs: Mapping[str, Any]) -> contextlib.AbstractContextManager[Any]:
    """The `execute_tool` span of one call (nothing when tracing is off)."""
    ctx = kwargs.get("tool_context")
    attrs = tool_span_attributes(
        card.name, getattr(ctx, "request_id", None), card.description or None
    )
    return span(f"execute_tool {card.name}", attrs)


class Observation:
    """The callback events of one tool call.

    `received` (input transform, then the input event) → `started` → `parse_started` →
    `parse_finished` → `failed` | `finished`; then `returned` (output transform, then the
    output event) for invoke, or `chunk` per chunk for a stream.
    """

    __slots__ = ("_cb", "_ids", "_kwargs", "_schema", "_tool_info")

    def __init__(
        self,
        cb: CallbackFramework,
        card: ToolCard,
        tool_info: Callable[[], ToolInfo],
        kwargs: dict[str, Any],
    ) -> None:
        self._cb = cb
        self._ids = {"tool_name": card.name, "tool_id": card.id}
        self._schema = card.input_params
        self._tool_info = tool_info
        self._kwargs = kwargs

    # sync -----------------------------------------------------------------------------------
    def received(self, event: str, inputs: Any) -> Any:
        cb, ids, kwargs = self._cb, self._ids, self._kwargs
        inputs = cb.transform_sync(event, inputs, inputs=inputs, **ids, **kwargs)
        cb.trigger_sync(event, **kwargs, inputs=inputs, tool_info=self._tool_info(), **ids)
        return inputs

    def started(self, inputs: Any) -> None:
        self._cb.trigger_sync(E.TOOL_CALL_STARTED, **self._ids, inputs=inputs)

    def parse_started(self, inputs: Any) -> None:
        self._cb.trigger_sync(
            E.TOOL_PARSE_STARTED, **self._ids, raw_inputs=inputs, schema=self._schema
        )

    def parse_finished(self, args: dict[str, Any]) -> None:
        self._cb.trigger_sync(E.TOOL_PARSE_FINISHED, **self._ids, formatted_inputs=args)

    def failed(self, error: Exception) -> None:
        self._cb.trigger_sync(E.TOOL_CALL_ERROR, **self._ids, error=error)

    def finished(self, **payload: Any) -> None:
        self._cb.trigger_sync(E.TOOL_CALL_FINISHED, **self._ids, **payload)

    def returned(self, event: str, result: Any) -> Any:
        cb, ids, kwargs = self._cb, self._ids, self._kwargs
        result = cb.transform_sync(event, result, result=result, **ids)
        cb.trigger_sync(event, **kwargs, result=result, tool_info=self._tool_info(), **ids)
        return result

    def chunk(self, args: dict[str, Any], chunk: Any) -> Any:
        self._cb.trigger_sync(E.TOOL_RESULT_RECEIVED, **self._ids, inputs=args, result=chunk)
        return self.returned(E.TOOL_STREAM_OUTPUT, chunk)

    # async ----------------------------------------------------------------------------------
    async def areceived(self, event: str, inputs: Any) -> Any:
        cb, ids, kwargs = self._cb, self._ids, self._kwargs
        inputs = await cb.transform(event, inputs, inputs=inputs, **ids, **kwargs)
        await cb.trigger(event, **kwargs, inputs=inputs, tool_info=self._tool_info(), **ids)
        return inputs

    async def astarted(self, inputs: Any) -> None:
        await self._cb.trigger(E.TOOL_CALL_STARTED, **self._ids, inputs=inputs)

    async def aparse_started(self, inputs: Any) -> None:
        await self._cb.trigger(
            E.TOOL_PARSE_STARTED, **self._ids, raw_inputs=inputs, schema=self._schema
        )

    async def aparse_finished(self, args: dict[str, Any]) -> None:
        await self._cb.trigger(E.TOOL_PARSE_FINISHED, **self._ids, formatted_inputs=args)

    async def afailed(self, error: Exception) -> None:
        await self._cb.trigger(E.TOOL_CALL_ERROR, **self._ids, error=error)

    async def afinished(self, **payload: Any) -> None:
        await self._cb.trigger(E.TOOL_CALL_FINISHED, **self._ids, **payload)

    async def areturned(self, event: str, result: Any) -> Any:
        cb, ids, kwargs = self._cb, self._ids, self._kwargs
        result = await cb.transform(event, result, result=result, **ids)
        await cb.trigger(event, **kwargs, result=result, tool_info=self._tool_info(), **ids)
        return result

    async def achunk(self, args: dict[str, Any], chunk: Any) -> Any:
        await self._cb.trigger(E.TOOL_RESULT_RECEIVED, **self._ids, inputs=args, result=chunk)
        return await self.areturned(E.TOOL_STREAM_OUTPUT, chunk)


class _Silent(Observation):
    """Reports nothing: a stream of a tool with no callbacks registered."""

    __slots__ = ()

    def __init__(self) -> None:
        pass

    def received(self, event: str, inputs: Any) -> Any:
        return inputs

    def started(self, inputs: Any) -> None:
        pass

    def parse_started(self, inputs: Any) -> None:
        pass

    def parse_finished(self, args: dict[str, Any]) -> None:
        pass

    def failed(self, error: Exception) -> None:
        pass

    def finished(self, **payload: Any) -> None:
        pass

    def chunk(self, args: dict[str, Any], chunk: Any) -> Any:
        return chunk

    async def areceived(self, event: str, inputs: Any) -> Any:
        return inputs

    async def astarted(self, inputs: Any) -> None:
        pass

    async def aparse_started(self, inputs: Any) -> None:
        pass

    async def aparse_finished(self, args: dict[str, Any]) -> None:
        pass

    async def afailed(self, error: Exception) -> None:
        pass

    async def afinished(self, **payload: Any) -> None:
        pass

    async def achunk(self, args: dict[str, Any], chunk: Any) -> Any:
        return chunk


SILENT: Observation = _Silent()
