"""`Tool`: the base class every tool kind (local, MCP, HTTP) derives from.

The base class owns input preparation, callbacks, timeouts, tracing and output transforms;
a tool kind implements one or more of the public extension points (docs/custom-tools.md):

- `invoke_internal(inputs, **kwargs)` (sync) and/or `async ainvoke_internal(inputs, **kwargs)`;
- `stream_internal(inputs, **kwargs)` (iterator) and/or `astream_internal(inputs, **kwargs)`
  (async iterator).

The public entry points pick whichever is implemented: a sync implementation runs in a worker
thread when called from async code; an async one runs on a private loop when called from sync
code. A kind without an invoke (stream) implementation raises `ToolNotSupportedError` (182011
invoke / 182010 stream) when invoked (streamed); a subclass implementing none of the four is
a `TypeError` when the class is created (`abstract=True` exempts a base meant for further
subclassing).

Event order for invoke: input transform → `tool_invoke_input` → `tool_call_started` →
`tool_parse_started` → `tool_parse_finished` → `tool_call_finished` | `tool_call_error` →
output transform → `tool_invoke_output`. For streams, per chunk: `tool_result_received` →
output transform → `tool_stream_output`.

Timeouts (the card's `timeout`, or per call `timeout=` / `operation_timeout=`): `invoke` and
`ainvoke` cancel the call; a stream gets the timeout as a total budget for the time spent
inside the tool (see `Tool.stream` / `Tool.astream`), past which its source is closed and
`ToolTimeoutError` (182013) is raised from the stream. Either way `tool_call_error` fires
with that error, as for any other failure.

The pieces live beside this module, each readable alone: `_preparation` (options, defaults),
`_deadline` (timeouts and stream budgets) and `_observation` (callback events and the span).
This module holds the template: which implementation runs, and the order of the steps.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, AsyncIterator, Generator, Iterator, Mapping
from typing import Any

from .._utils.sync import iterate_sync, run_sync
from .._utils.threads import to_thread
from ..callbacks.events import ToolCallEvents as E
from ..callbacks.framework import CallbackFramework, callback_framework
from ..callbacks.otel import record_tool_content, tracing_enabled
from ..errors import ErrorCode, ToolCardError, ToolNotSupportedError
from ..schema.arguments import PARSE_OFF_LOOP_BYTES, parse_arguments
from ..schema.validation import ArgumentsValidator, JsonSchemaArgumentsValidator
from . import _deadline
from ._observation import SILENT, Observation, tool_span
from ._preparation import OPTION_KEYS, drop_none, fill_defaults, pop_timeout, split_options
from .card import ToolCard, ToolInfo

__all__ = ["EXTENSION_POINTS", "Tool", "pop_timeout"]


EXTENSION_POINTS = ("invoke_internal", "ainvoke_internal", "stream_internal", "astream_internal")
"""The methods a tool kind implements (at least one); see docs/custom-tools.md."""

# names a subclass may define meaning one of the extension points (other libraries', ours of old)
_NEAR_MISSES = {
    "invokeInternal": "invoke_internal",
    "streamInternal": "stream_internal",
    "_invoke": "invoke_internal",
    "_ainvoke": "ainvoke_internal",
    "_stream": "stream_internal",
    "_astream": "astream_internal",
    "_run": "invoke_internal",
    "_arun": "ainvoke_internal",
    "run": "invoke_internal",
    "arun": "ainvoke_internal",
    "invoke": "invoke_internal",
    "ainvoke": "ainvoke_internal",
    "stream": "stream_internal",
    "astream": "astream_internal",
}


_NO_OPTIONS: dict[str, Any] = {}
"""The preparation options of a call that gives none (never mutated)."""


_RAW = (str, bytes, bytearray)
"""Raw inputs: the model's argument string."""


class Tool:
    """Base class of all tools; see the module docstring for the contract.

    A tool kind subclasses `Tool` and implements at least one of `EXTENSION_POINTS`;
    `invoke`/`ainvoke`/`stream`/`astream` then add validation, callbacks, timeouts and tracing
    around it. A subclass implementing none of them is a `TypeError` at class creation unless
    declared `class Base(Tool, abstract=True)`.
    """

    _sync_impl: bool = False
    """Whether the class implements `invoke_internal` (set per class, read per call)."""
    _async_impl: bool = False
    """Whether the class implements `ainvoke_internal`."""

    def __init_subclass__(cls, abstract: bool = False, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._sync_impl = cls.invoke_internal is not Tool.invoke_internal
        cls._async_impl = cls.ainvoke_internal is not Tool.ainvoke_internal
        if abstract or any(getattr(cls, m) is not getattr(Tool, m) for m in EXTENSION_POINTS):
            return
        own = [k for k in cls.__mro__ if k is not Tool and k is not object]
        defined = [n for n in _NEAR_MISSES if any(n in vars(k) for k in own)]
        hint = "".join(f"; it defines {n}(): implement {_NEAR_MISSES[n]}()" for n in defined)
        raise TypeError(
            f"{cls.__name__} subclasses Tool but implements none of "
            f"{', '.join(EXTENSION_POINTS)}{hint}. Implement at least one (the base class adds "
            "validation, callbacks, timeouts and tracing around it; see docs/custom-tools.md), "
            f"or declare a base meant for further subclassing as "
            f"`class {cls.__name__}(Tool, abstract=True)`."
        )

    def __init__(self, card: ToolCard, *, callbacks: CallbackFramework | None = None) -> None:
        if card is None:
            raise ToolCardError("card is None", code=ErrorCode.TOOL_CARD_INVALID)
        if not card.id:
            raise ToolCardError("card id is None or empty", code=ErrorCode.TOOL_CARD_INVALID)
        self._card = card
        self._callbacks = callbacks
        self._validator: ArgumentsValidator | None = None
        self._tool_info: ToolInfo | None = None

    @property
    def card(self) -> ToolCard:
        """The tool's card (read-only)."""
        return self._card

    @property
    def name(self) -> str:
        """Shortcut for `card.name`."""
        return self._card.name

    @property
    def callbacks(self) -> CallbackFramework:
        """The callback framework this tool reports to (the global one by default); settable
        after construction (openJiuwen's `setCallbackFramework`), `None` restoring the
        global one."""
        return self._callbacks if self._callbacks is not None else callback_framework

    @callbacks.setter
    def callbacks(self, framework: CallbackFramework | None) -> None:
        if framework is not None and not isinstance(framework, CallbackFramework):
            raise TypeError(
                f"callbacks must be a CallbackFramework or None, not {type(framework).__name__}"
            )
        self._callbacks = framework

    def tool_info(self) -> ToolInfo:
        """The card's flat descriptor (computed once)."""
        if self._tool_info is None:
            self._tool_info = self._card.tool_info()
        return self._tool_info

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self._card.name!r})"

    # input preparation ----------------------------------------------------------------------
    @property
    def validator(self) -> ArgumentsValidator:
        """The compiled validator of the card's schema (built on first use, then reused)."""
        if self._validator is None:
            self._validator = JsonSchemaArgumentsValidator(
                self._card.input_params, tool_name=self._card.name
            )
        return self._validator

    def prepare_inputs(
        self,
        inputs: Mapping[str, Any] | str | bytes | None,
        *,
        skip_none_value: bool = False,
        skip_inputs_validate: bool = False,
    ) -> dict[str, Any]:
        """Turn raw inputs (a dict, or the model's JSON string) into validated arguments."""
        if isinstance(inputs, _RAW):
            if not skip_none_value and not skip_inputs_validate:
                return self.validator.validate_json(
                    bytes(inputs) if isinstance(inputs, bytearray) else inputs
                )
            inputs = parse_arguments(inputs, tool_name=self._card.name)
        data: Mapping[str, Any] = inputs if inputs is not None else {}
        if skip_none_value:
            data = drop_none(dict(data))
        if skip_inputs_validate:
            return self._fill_defaults(dict(data))
        return self.validator.validate_python(data)

    async def _aprepare_inputs(self, inputs: Any, prep: dict[str, Any]) -> dict[str, Any]:
        """`prepare_inputs` for async callers: a long raw argument string is parsed and
        validated in a worker thread, so the event loop is not held."""
        if isinstance(inputs, _RAW) and len(inputs) > PARSE_OFF_LOOP_BYTES:
            return await to_thread(self.prepare_inputs, inputs, **prep)
        return self.prepare_inputs(inputs, **prep)

    def _fill_defaults(self, data: dict[str, Any]) -> dict[str, Any]:
        return fill_defaults(self._card.input_params, data)

    # extension points -----------------------------------------------------------------------
    def invoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        """Run the call synchronously and return its raw result (extension point).

        `inputs` are the validated arguments (defaults filled); `kwargs` are the call's other
        keyword arguments (`tool_context`, injected values). Raise to fail the call."""
        raise NotImplementedError

    async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        """Run the call from async code and return its raw result (extension point); it is
        cancelled at the call's deadline."""
        raise NotImplementedError

    def stream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Iterator[Any]:
        """Yield the call's chunks synchronously (extension point; usually a generator)."""
        raise NotImplementedError

    def astream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> AsyncIterator[Any]:
        """Yield the call's chunks asynchronously (extension point; usually an async
        generator)."""
        raise NotImplementedError

    def _implements(self, method: str) -> bool:
        if method == "invoke_internal":
            return self._sync_impl
        if method == "ainvoke_internal":
            return self._async_impl
        return getattr(type(self), method) is not getattr(Tool, method)

    def _async_first(self) -> bool:
        """Whether the sync faces should run the async implementation (on a private loop)
        when both exist: then the call's deadline cancels it. Kinds whose work is async
        underneath (an `async def` function) say so."""
        return False

    def supports_invoke(self) -> bool:
        """Whether `invoke`/`ainvoke` can be used on this tool."""
        return self._implements("invoke_internal") or self._implements("ainvoke_internal")

    def supports_stream(self) -> bool:
        """Whether `stream`/`astream` can be used on this tool."""
        return self._implements("stream_internal") or self._implements("astream_internal")

    def _not_supported(self, what: str) -> ToolNotSupportedError:
        code = (
            ErrorCode.TOOL_STREAM_NOT_SUPPORTED
            if what == "stream"
            else ErrorCode.TOOL_INVOKE_NOT_SUPPORTED
        )
        return ToolNotSupportedError(
            f"tool {self._card.name!r} ({type(self).__name__}) does not support {what}",
            code=code,
        )

    # invoke ---------------------------------------------------------------------------------
    handles_timeout: bool = False
    """Set by tool kinds that enforce the per-call timeout themselves (HTTP tools report it
    with their own error code): the base class then passes it on as `timeout=` to the
    template method instead of cancelling the call itself."""

    def _split(self, kwargs: dict[str, Any]) -> tuple[dict[str, Any], float | None]:
        if not self.handles_timeout and OPTION_KEYS.isdisjoint(kwargs):
            return _NO_OPTIONS, self._card.timeout  # the common call: no options given
        return split_options(kwargs, self._card.timeout, self.handles_timeout)

    def _observation(self, kwargs: dict[str, Any]) -> Observation:
        return Observation(self.callbacks, self._card, self.tool_info, kwargs)

    def _call_sync(
        self, args: dict[str, Any], timeout: float | None, kwargs: dict[str, Any]
    ) -> Any:
        if self._implements("invoke_internal") and not (
            timeout is not None and self._async_first()
        ):
            if timeout is None:
                return self.invoke_internal(args, **kwargs)
            return _deadline.call_within(
                self.invoke_internal, args, kwargs, timeout, self._card.name
            )
        if self._implements("ainvoke_internal"):
            return run_sync(self._call_async(args, timeout, kwargs))
        raise self._not_supported("invoke")

    async def _call_async(
        self, args: dict[str, Any], timeout: float | None, kwargs: dict[str, Any]
    ) -> Any:
        if self._implements("ainvoke_internal"):
            call = self.ainvoke_internal(args, **kwargs)
        elif self._implements("invoke_internal"):
            call = to_thread(self.invoke_internal, args, **kwargs)
        else:
            raise self._not_supported("invoke")
        if timeout is None:
            return await call
        return await _deadline.await_within(call, timeout, self._card.name)

    def _check_invoke(self) -> None:
        if not self.supports_invoke():
            raise self._not_supported("invoke")

    def invoke(self, inputs: Mapping[str, Any] | str | None = None, **kwargs: Any) -> Any:
        """Run the tool synchronously and return its raw result.

        `inputs` is a dict of arguments or the model's raw JSON string. Options:
        `skip_none_value`, `skip_inputs_validate`, `timeout` (seconds; also
        `operation_timeout`); other keyword arguments reach the implementation (for example
        `tool_context` or injected values).
        """
        prep, timeout = self._split(kwargs)
        if self.callbacks.count == 0 and not tracing_enabled():
            self._check_invoke()
            args = self.prepare_inputs(inputs, **prep) if prep else self.prepare_inputs(inputs)
            if timeout is None and self._sync_impl:
                return self.invoke_internal(args, **kwargs)
            return self._call_sync(args, timeout, kwargs)
        obs = self._observation(kwargs)
        with tool_span(self._card, kwargs) as s:
            inputs = obs.received(E.TOOL_INVOKE_INPUT, inputs)
            self._check_invoke()
            obs.started(inputs)
            try:
                obs.parse_started(inputs)
                args = self.prepare_inputs(inputs, **prep)
                obs.parse_finished(args)
                result = self._call_sync(args, timeout, kwargs)
            except Exception as e:
                obs.failed(e)
                raise
            obs.finished(inputs=args, result=result)
            record_tool_content(s, args, result)
            return obs.returned(E.TOOL_INVOKE_OUTPUT, result)

    async def ainvoke(self, inputs: Mapping[str, Any] | str | None = None, **kwargs: Any) -> Any:
        """Run the tool from async code and return its raw result (see `invoke`)."""
        prep, timeout = self._split(kwargs)
        if self.callbacks.count == 0 and not tracing_enabled():
            self._check_invoke()
            if isinstance(inputs, _RAW) and len(inputs) > PARSE_OFF_LOOP_BYTES:
                args = await to_thread(self.prepare_inputs, inputs, **prep)
            else:
                args = self.prepare_inputs(inputs, **prep) if prep else self.prepare_inputs(inputs)
            if timeout is None and self._async_impl:
                return await self.ainvoke_internal(args, **kwargs)
            return await self._call_async(args, timeout, kwargs)
        obs = self._observation(kwargs)
        with tool_span(self._card, kwargs) as s:
            inputs = await obs.areceived(E.TOOL_INVOKE_INPUT, inputs)
            self._check_invoke()
            await obs.astarted(inputs)
            try:
                await obs.aparse_started(inputs)
                args = await self._aprepare_inputs(inputs, prep)
                await obs.aparse_finished(args)
                result = await self._call_async(args, timeout, kwargs)
            except Exception as e:
                await obs.afailed(e)
                raise
            await obs.afinished(inputs=args, result=result)
            record_tool_content(s, args, result)
            return await obs.areturned(E.TOOL_INVOKE_OUTPUT, result)

    # stream ---------------------------------------------------------------------------------
    def stream(self, inputs: Mapping[str, Any] | str | None = None, **kwargs: Any) -> Iterator[Any]:
        """Run the tool as a stream and iterate its chunks synchronously.

        Options as for `invoke`. `timeout` is a total budget, in seconds, for the time spent
        inside the tool: starting the stream and every wait for its next chunk add up, from the
        first iteration on; the caller's own time between chunks, and callbacks, do not count.
        A sync implementation (`stream_internal`, a generator) runs in the caller's thread and a
        running `next()` cannot be pre-empted: the budget is checked each time `next()`
        returns, and once it is used up the late chunk (or late end of stream) is dropped, the
        generator is closed (its `finally` blocks run) and `ToolTimeoutError` is raised; a
        single slow step can thus overrun by up to its own length. A tool with only an async
        implementation (and an `async def` or async-generator `LocalFunction`) is driven
        through the async path, where the wait is cancelled at the deadline as in `astream`.
        An implementation that returns `None` is an empty stream.
        """
        if not self.supports_stream():
            raise self._not_supported("stream")
        return self._stream_observed(inputs, kwargs)

    def _sync_chunks(
        self, args: dict[str, Any], kwargs: dict[str, Any], timeout: float | None
    ) -> Generator[Any, None, None]:
        if not self._implements("stream_internal") or (
            self._async_first() and self._implements("astream_internal")
        ):
            return iterate_sync(self._async_chunks(args, kwargs, timeout))
        return _deadline.sync_chunks(
            lambda: self.stream_internal(args, **kwargs), timeout, self._card.name
        )

    def _stream_observed(self, inputs: Any, kwargs: dict[str, Any]) -> Iterator[Any]:
        prep, timeout = self._split(kwargs)
        obs = self._observation(kwargs) if self.callbacks.count > 0 else SILENT
        inputs = obs.received(E.TOOL_STREAM_INPUT, inputs)
        obs.started(inputs)
        try:
            obs.parse_started(inputs)
            args = self.prepare_inputs(inputs, **prep)
            obs.parse_finished(args)
            with contextlib.closing(self._sync_chunks(args, kwargs, timeout)) as chunks:
                for chunk in chunks:
                    yield obs.chunk(args, chunk)
        except Exception as e:
            obs.failed(e)
            raise
        obs.finished()

    def astream(
        self, inputs: Mapping[str, Any] | str | None = None, **kwargs: Any
    ) -> AsyncIterator[Any]:
        """Run the tool as a stream and iterate its chunks asynchronously.

        Options as for `invoke`. `timeout` is a total budget, in seconds, for the time spent
        waiting on the tool: starting the stream and every wait for its next chunk add up, from
        the first iteration on; the consumer's time between chunks, and callbacks, do not
        count. Each wait is cancelled when the budget runs out: the source is then closed
        (`aclose`; an async generator gets `CancelledError` at its pending `await`, so its
        `finally` blocks run) and `ToolTimeoutError` is raised from the stream. A tool with only
        a sync implementation is pulled in worker threads: the wait is abandoned at the
        deadline just the same, but a running `next()` cannot be stopped, so its generator is
        closed as soon as that `next()` returns. An implementation that returns `None` (or an
        `async def` one that returns `None` instead of yielding) is an empty stream.
        """
        if not self.supports_stream():
            raise self._not_supported("stream")
        return self._astream_observed(inputs, kwargs)

    def _async_chunks(
        self, args: dict[str, Any], kwargs: dict[str, Any], timeout: float | None
    ) -> AsyncGenerator[Any, None]:
        if not self._implements("astream_internal"):
            return _deadline.threaded_chunks(
                lambda: self.stream_internal(args, **kwargs), timeout, self._card.name
            )
        return _deadline.async_chunks(
            lambda: self.astream_internal(args, **kwargs), timeout, self._card.name
        )

    async def _astream_observed(self, inputs: Any, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        prep, timeout = self._split(kwargs)
        obs = self._observation(kwargs) if self.callbacks.count > 0 else SILENT
        inputs = await obs.areceived(E.TOOL_STREAM_INPUT, inputs)
        await obs.astarted(inputs)
        try:
            await obs.aparse_started(inputs)
            args = await self._aprepare_inputs(inputs, prep)
            await obs.aparse_finished(args)
            async with contextlib.aclosing(self._async_chunks(args, kwargs, timeout)) as chunks:
                async for chunk in chunks:
                    yield await obs.achunk(args, chunk)
        except Exception as e:
            await obs.afailed(e)
            raise
        await obs.afinished()
