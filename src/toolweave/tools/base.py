"""`Tool`: the base class every tool kind (local, MCP, HTTP) derives from.

The base class owns input preparation, callbacks, timeouts, tracing and output transforms;
subclasses implement one or more template methods:

- `_invoke(inputs, **kwargs)` (sync) and/or `async _ainvoke(inputs, **kwargs)`;
- `_stream(inputs, **kwargs)` (iterator) and/or `_astream(inputs, **kwargs)` (async iterator).

The public entry points pick whichever is implemented: a sync implementation runs in a worker
thread when called from async code; an async one runs on a private loop when called from sync
code. A kind with neither raises `ToolNotSupportedError` (182011 invoke / 182010 stream).

Event order for invoke: input transform → `tool_invoke_input` → `tool_call_started` →
`tool_parse_started` → `tool_parse_finished` → `tool_call_finished` | `tool_call_error` →
output transform → `tool_invoke_output`. For streams, per chunk: `tool_result_received` →
output transform → `tool_stream_output`.

Timeouts (the card's `timeout`, or per call `timeout=` / `operation_timeout=`): `invoke` and
`ainvoke` cancel the call; a stream gets the timeout as a total budget for the time spent
inside the tool (see `Tool.stream` / `Tool.astream`), past which its source is closed and
`ToolTimeoutError` (182013) is raised from the stream. Either way `tool_call_error` fires
with that error, as for any other failure.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import copy
import inspect
import threading
import time
from collections.abc import (
    AsyncGenerator,
    AsyncIterator,
    Awaitable,
    Callable,
    Generator,
    Iterable,
    Iterator,
    Mapping,
)
from typing import Any, TypeVar

from .._utils.sync import iterate_sync, run_sync
from .._utils.threads import to_thread
from ..callbacks.events import ToolCallEvents as E
from ..callbacks.framework import CallbackFramework, callback_framework
from ..callbacks.otel import span, tool_span_attributes, tracing_enabled
from ..errors import ErrorCode, ToolCardError, ToolNotSupportedError, ToolTimeoutError
from ..schema.arguments import parse_arguments
from ..schema.validation import ArgumentsValidator, JsonSchemaArgumentsValidator
from .card import ToolCard, ToolInfo

__all__ = ["Tool", "pop_timeout"]

_PREP_OPTIONS = ("skip_none_value", "skip_inputs_validate")
_TIMEOUT_KEYS = ("timeout", "operation_timeout", "operationTimeout")
_DONE = object()
T = TypeVar("T")


def pop_timeout(kwargs: dict[str, Any], default: float | None) -> float | None:
    """Take the per-call timeout out of `kwargs` (`timeout`, `operation_timeout` or
    `operationTimeout`); a missing or non-positive value falls back to `default`."""
    for key in _TIMEOUT_KEYS:
        value = kwargs.pop(key, None)
        if value is not None and value > 0:
            return float(value)
    return default


def _drop_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_drop_none(v) for v in value if v is not None]
    return value


class _Budget:
    """The time a stream's implementation may still spend producing it.

    Only time spent waiting inside the tool counts (starting it, and each pull of the next
    chunk); the consumer's time between chunks and the callbacks' time do not.
    """

    __slots__ = ("spent", "timeout")

    def __init__(self, timeout: float | None) -> None:
        self.timeout = timeout
        self.spent = 0.0

    def remaining(self) -> float | None:
        return None if self.timeout is None else self.timeout - self.spent

    def exhausted(self) -> bool:
        return self.timeout is not None and self.spent >= self.timeout


class _ThreadedSource:
    """A sync stream pulled one chunk at a time in worker threads (`step` runs there).

    A pull that has started cannot be pre-empted: `close` while a `step` is running only marks
    the source, and that step closes the iterator when its `next()` returns.
    """

    def __init__(self, open_source: Callable[[], Iterable[Any] | None]) -> None:
        self._open = open_source
        self._iterator: Iterator[Any] | None = None
        self._lock = threading.Lock()
        self._busy = False
        self._closing = False

    @property
    def busy(self) -> bool:
        return self._busy

    def step(self) -> Any:
        with self._lock:
            if self._closing:
                return _DONE
            self._busy = True
        try:
            if self._iterator is None:
                source = self._open()
                self._iterator = iter(source) if source is not None else iter(())
            return next(self._iterator, _DONE)
        finally:
            with self._lock:
                self._busy = False
                close_now = self._closing
            if close_now:
                self._close()

    def close(self) -> None:
        with self._lock:
            self._closing = True
            if self._busy:
                return
        self._close()

    def _close(self) -> None:
        with self._lock:
            iterator, self._iterator = self._iterator, None
        _close_sync(iterator)


def _close_sync(iterator: Any) -> None:
    close = getattr(iterator, "close", None)
    if close is not None:
        close()


async def _aclose(iterator: Any) -> None:
    close = getattr(iterator, "aclose", None)
    if close is not None:
        await close()


class Tool:
    """Base class of all tools; see the module docstring for the contract."""

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
        """The callback framework this tool reports to (the global one by default)."""
        return self._callbacks if self._callbacks is not None else callback_framework

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
        if isinstance(inputs, (str, bytes, bytearray)):
            if not skip_none_value and not skip_inputs_validate:
                return self.validator.validate_json(
                    bytes(inputs) if isinstance(inputs, bytearray) else inputs
                )
            inputs = parse_arguments(inputs, tool_name=self._card.name)
        data: Mapping[str, Any] = inputs if inputs is not None else {}
        if skip_none_value:
            data = _drop_none(dict(data))
        if skip_inputs_validate:
            return self._fill_defaults(dict(data))
        return self.validator.validate_python(data)

    def _fill_defaults(self, data: dict[str, Any]) -> dict[str, Any]:
        props = self._card.input_params.get("properties") or {}
        for key, prop in props.items():
            if key not in data and isinstance(prop, dict) and "default" in prop:
                data[key] = copy.deepcopy(prop["default"])
        return data

    # template methods -----------------------------------------------------------------------
    def _invoke(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        raise NotImplementedError

    async def _ainvoke(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        raise NotImplementedError

    def _stream(self, inputs: dict[str, Any], **kwargs: Any) -> Iterator[Any]:
        raise NotImplementedError

    def _astream(self, inputs: dict[str, Any], **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError

    def _implements(self, method: str) -> bool:
        return getattr(type(self), method) is not getattr(Tool, method)

    def supports_invoke(self) -> bool:
        """Whether `invoke`/`ainvoke` can be used on this tool."""
        return self._implements("_invoke") or self._implements("_ainvoke")

    def supports_stream(self) -> bool:
        """Whether `stream`/`astream` can be used on this tool."""
        return self._implements("_stream") or self._implements("_astream")

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
        prep = {k: kwargs.pop(k) for k in _PREP_OPTIONS if k in kwargs}
        timeout = pop_timeout(kwargs, self._card.timeout)
        if self.handles_timeout:
            kwargs["timeout"] = timeout
            return prep, None
        return prep, timeout

    def _timeout_error(self, timeout: float) -> ToolTimeoutError:
        return ToolTimeoutError(
            f"tool {self._card.name!r} did not finish within {timeout:g} s and was cancelled",
            tool_name=self._card.name,
        )

    def _call_sync(
        self, args: dict[str, Any], timeout: float | None, kwargs: dict[str, Any]
    ) -> Any:
        if self._implements("_invoke"):
            if timeout is None:
                return self._invoke(args, **kwargs)
            ctx = contextvars.copy_context()
            # A thread of its own, not the shared worker pool: a call that never returns
            # keeps its thread, and must not take a pool slot from every later sync tool.
            pool = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="toolweave-tool")
            try:
                future = pool.submit(ctx.run, self._invoke, args, **kwargs)  # type: ignore[arg-type]
                try:
                    return future.result(timeout)
                except concurrent.futures.TimeoutError:
                    if future.done():
                        raise  # the tool's own TimeoutError, not our deadline
                    future.cancel()
                    raise self._timeout_error(timeout) from None
            finally:
                pool.shutdown(wait=False)
        if self._implements("_ainvoke"):
            return run_sync(self._call_async(args, timeout, kwargs))
        raise self._not_supported("invoke")

    async def _call_async(
        self, args: dict[str, Any], timeout: float | None, kwargs: dict[str, Any]
    ) -> Any:
        if self._implements("_ainvoke"):
            call = self._ainvoke(args, **kwargs)
        elif self._implements("_invoke"):
            call = to_thread(self._invoke, args, **kwargs)
        else:
            raise self._not_supported("invoke")
        if timeout is None:
            return await call
        deadline = asyncio.timeout(timeout)
        try:
            async with deadline:
                return await call
        except TimeoutError:
            if not deadline.expired():
                raise  # the tool's own TimeoutError, not our deadline
            raise self._timeout_error(timeout) from None

    def _ids(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        return {"tool_name": self._card.name, "tool_id": self._card.id}

    def _span_attrs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        ctx = kwargs.get("tool_context")
        return tool_span_attributes(
            self._card.name, getattr(ctx, "request_id", None), self._card.description or None
        )

    def invoke(self, inputs: Mapping[str, Any] | str | None = None, **kwargs: Any) -> Any:
        """Run the tool synchronously and return its raw result.

        `inputs` is a dict of arguments or the model's raw JSON string. Options:
        `skip_none_value`, `skip_inputs_validate`, `timeout` (seconds; also
        `operation_timeout`); other keyword arguments reach the implementation (for example
        `tool_context` or injected values).
        """
        prep, timeout = self._split(kwargs)
        cb = self.callbacks
        if cb.count == 0 and not tracing_enabled():
            self._check_invoke()
            return self._call_sync(self.prepare_inputs(inputs, **prep), timeout, kwargs)
        with span(f"execute_tool {self._card.name}", self._span_attrs(kwargs)):
            return self._invoke_observed(cb, inputs, prep, timeout, kwargs)

    def _check_invoke(self) -> None:
        if not self.supports_invoke():
            raise self._not_supported("invoke")

    def _invoke_observed(
        self,
        cb: CallbackFramework,
        inputs: Any,
        prep: dict[str, Any],
        timeout: float | None,
        kwargs: dict[str, Any],
    ) -> Any:
        ids = self._ids(kwargs)
        inputs = cb.transform_sync(E.TOOL_INVOKE_INPUT, inputs, inputs=inputs, **ids, **kwargs)
        cb.trigger_sync(
            E.TOOL_INVOKE_INPUT, **kwargs, inputs=inputs, tool_info=self.tool_info(), **ids
        )
        self._check_invoke()
        cb.trigger_sync(E.TOOL_CALL_STARTED, **ids, inputs=inputs)
        try:
            cb.trigger_sync(
                E.TOOL_PARSE_STARTED, **ids, raw_inputs=inputs, schema=self._card.input_params
            )
            args = self.prepare_inputs(inputs, **prep)
            cb.trigger_sync(E.TOOL_PARSE_FINISHED, **ids, formatted_inputs=args)
            result = self._call_sync(args, timeout, kwargs)
        except Exception as e:
            cb.trigger_sync(E.TOOL_CALL_ERROR, **ids, error=e)
            raise
        cb.trigger_sync(E.TOOL_CALL_FINISHED, **ids, inputs=args, result=result)
        result = cb.transform_sync(E.TOOL_INVOKE_OUTPUT, result, result=result, **ids)
        cb.trigger_sync(
            E.TOOL_INVOKE_OUTPUT, **kwargs, result=result, tool_info=self.tool_info(), **ids
        )
        return result

    async def ainvoke(self, inputs: Mapping[str, Any] | str | None = None, **kwargs: Any) -> Any:
        """Run the tool from async code and return its raw result (see `invoke`)."""
        prep, timeout = self._split(kwargs)
        cb = self.callbacks
        if cb.count == 0 and not tracing_enabled():
            self._check_invoke()
            return await self._call_async(self.prepare_inputs(inputs, **prep), timeout, kwargs)
        with span(f"execute_tool {self._card.name}", self._span_attrs(kwargs)):
            return await self._ainvoke_observed(cb, inputs, prep, timeout, kwargs)

    async def _ainvoke_observed(
        self,
        cb: CallbackFramework,
        inputs: Any,
        prep: dict[str, Any],
        timeout: float | None,
        kwargs: dict[str, Any],
    ) -> Any:
        ids = self._ids(kwargs)
        inputs = await cb.transform(E.TOOL_INVOKE_INPUT, inputs, inputs=inputs, **ids, **kwargs)
        await cb.trigger(
            E.TOOL_INVOKE_INPUT, **kwargs, inputs=inputs, tool_info=self.tool_info(), **ids
        )
        self._check_invoke()
        await cb.trigger(E.TOOL_CALL_STARTED, **ids, inputs=inputs)
        try:
            await cb.trigger(
                E.TOOL_PARSE_STARTED, **ids, raw_inputs=inputs, schema=self._card.input_params
            )
            args = self.prepare_inputs(inputs, **prep)
            await cb.trigger(E.TOOL_PARSE_FINISHED, **ids, formatted_inputs=args)
            result = await self._call_async(args, timeout, kwargs)
        except Exception as e:
            await cb.trigger(E.TOOL_CALL_ERROR, **ids, error=e)
            raise
        await cb.trigger(E.TOOL_CALL_FINISHED, **ids, inputs=args, result=result)
        result = await cb.transform(E.TOOL_INVOKE_OUTPUT, result, result=result, **ids)
        await cb.trigger(
            E.TOOL_INVOKE_OUTPUT, **kwargs, result=result, tool_info=self.tool_info(), **ids
        )
        return result

    # stream ---------------------------------------------------------------------------------
    def stream(self, inputs: Mapping[str, Any] | str | None = None, **kwargs: Any) -> Iterator[Any]:
        """Run the tool as a stream and iterate its chunks synchronously.

        Options as for `invoke`. `timeout` is a total budget, in seconds, for the time spent
        inside the tool: starting the stream and every wait for its next chunk add up, from the
        first iteration on; the caller's own time between chunks, and callbacks, do not count.
        A sync implementation (`_stream`, a generator) runs in the caller's thread and a
        running `next()` cannot be pre-empted: the budget is checked each time `next()`
        returns, and once it is used up the late chunk (or late end of stream) is dropped, the
        generator is closed (its `finally` blocks run) and `ToolTimeoutError` is raised; a
        single slow step can thus overrun by up to its own length. A tool with only an async
        implementation (and an async-generator `LocalFunction`) is driven through the async
        path, where the wait is cancelled at the deadline as in `astream`. An implementation
        that returns `None` is an empty stream.
        """
        if not self.supports_stream():
            raise self._not_supported("stream")
        return self._stream_observed(inputs, kwargs)

    def _budget_error(self, budget: _Budget) -> ToolTimeoutError:
        return self._timeout_error(budget.timeout or 0.0)

    def _sync_chunks(
        self, args: dict[str, Any], kwargs: dict[str, Any], timeout: float | None
    ) -> Generator[Any, None, None]:
        if not self._implements("_stream"):
            yield from iterate_sync(self._async_chunks(args, kwargs, timeout))
            return
        budget = _Budget(timeout)
        iterator: Iterator[Any] | None = None
        finished = False  # the source ended or raised: nothing left to close
        try:
            started = time.monotonic()
            try:
                source = self._stream(args, **kwargs)
                iterator = iter(source) if source is not None else iter(())
            finally:
                budget.spent += time.monotonic() - started
            while True:
                if budget.exhausted():
                    raise self._budget_error(budget)
                started = time.monotonic()
                try:
                    chunk = next(iterator, _DONE)
                except BaseException:
                    finished = True
                    raise
                finally:
                    budget.spent += time.monotonic() - started
                finished = chunk is _DONE
                if budget.exhausted():
                    raise self._budget_error(budget)
                if finished:
                    return
                yield chunk
        finally:
            if not finished:
                _close_sync(iterator)

    def _stream_observed(self, inputs: Any, kwargs: dict[str, Any]) -> Iterator[Any]:
        prep, timeout = self._split(kwargs)
        cb = self.callbacks
        ids = self._ids(kwargs)
        observed = cb.count > 0
        if observed:
            inputs = cb.transform_sync(E.TOOL_STREAM_INPUT, inputs, inputs=inputs, **ids, **kwargs)
            cb.trigger_sync(
                E.TOOL_STREAM_INPUT, **kwargs, inputs=inputs, tool_info=self.tool_info(), **ids
            )
            cb.trigger_sync(E.TOOL_CALL_STARTED, **ids, inputs=inputs)
        try:
            if observed:
                cb.trigger_sync(
                    E.TOOL_PARSE_STARTED, **ids, raw_inputs=inputs, schema=self._card.input_params
                )
            args = self.prepare_inputs(inputs, **prep)
            if observed:
                cb.trigger_sync(E.TOOL_PARSE_FINISHED, **ids, formatted_inputs=args)
            with contextlib.closing(self._sync_chunks(args, kwargs, timeout)) as chunks:
                for chunk in chunks:
                    if observed:
                        cb.trigger_sync(E.TOOL_RESULT_RECEIVED, **ids, inputs=args, result=chunk)
                        chunk = cb.transform_sync(E.TOOL_STREAM_OUTPUT, chunk, result=chunk, **ids)
                        cb.trigger_sync(
                            E.TOOL_STREAM_OUTPUT,
                            **kwargs,
                            result=chunk,
                            tool_info=self.tool_info(),
                            **ids,
                        )
                    yield chunk
        except Exception as e:
            if observed:
                cb.trigger_sync(E.TOOL_CALL_ERROR, **ids, error=e)
            raise
        if observed:
            cb.trigger_sync(E.TOOL_CALL_FINISHED, **ids)

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

    async def _within(self, budget: _Budget, awaitable: Awaitable[T]) -> T:
        """Await a step of the tool within what is left of the budget; the time it takes is
        charged to the budget."""
        remaining = budget.remaining()
        started = time.monotonic()
        expired = False
        try:
            if remaining is None:
                return await awaitable
            deadline = asyncio.timeout(remaining)
            try:
                async with deadline:
                    result = await awaitable
            except TimeoutError:
                if not deadline.expired():
                    raise  # the tool's own TimeoutError
                expired = True
        finally:
            budget.spent += time.monotonic() - started
        # Raised outside the `except`, so the error does not chain to the cancellation and keep
        # the cancelled frames alive: whatever they held (a sync generator a worker thread is
        # still running, say) is released, and so closed, as soon as that pending step returns.
        # A result that came back late (the tool swallowed the cancellation) is dropped too.
        if expired or budget.exhausted():
            raise self._budget_error(budget)
        return result

    async def _open_async(self, args: dict[str, Any], kwargs: dict[str, Any]) -> Any:
        source: Any = self._astream(args, **kwargs)
        if inspect.isawaitable(source):  # an `async def` that returns instead of yielding
            source = await source
        if source is not None and not hasattr(source, "__anext__"):
            source = aiter(source)
        return source

    async def _async_chunks(
        self, args: dict[str, Any], kwargs: dict[str, Any], timeout: float | None
    ) -> AsyncGenerator[Any, None]:
        budget = _Budget(timeout)
        if not self._implements("_astream"):
            async with contextlib.aclosing(self._threaded_chunks(args, kwargs, budget)) as items:
                async for chunk in items:
                    yield chunk
            return
        source = await self._within(budget, self._open_async(args, kwargs))
        if source is None:
            return
        try:
            while True:
                if budget.exhausted():
                    raise self._budget_error(budget)
                chunk = await self._within(budget, anext(source, _DONE))
                if chunk is _DONE:
                    return
                yield chunk
        finally:
            await _aclose(source)

    async def _threaded_chunks(
        self, args: dict[str, Any], kwargs: dict[str, Any], budget: _Budget
    ) -> AsyncGenerator[Any, None]:
        ctx = contextvars.copy_context()  # one copy for all steps: the generator's own values
        source = _ThreadedSource(lambda: self._stream(args, **kwargs))
        ended = False
        try:
            while True:
                if budget.exhausted():
                    raise self._budget_error(budget)
                chunk = await self._within(budget, to_thread(ctx.run, source.step))
                if chunk is _DONE:
                    ended = True
                    return
                yield chunk
        finally:
            if not ended:
                if source.busy:
                    source.close()  # only marks it: the running step closes it when it returns
                else:
                    await to_thread(source.close)

    async def _astream_observed(self, inputs: Any, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
        prep, timeout = self._split(kwargs)
        cb = self.callbacks
        ids = self._ids(kwargs)
        observed = cb.count > 0
        if observed:
            inputs = await cb.transform(E.TOOL_STREAM_INPUT, inputs, inputs=inputs, **ids, **kwargs)
            await cb.trigger(
                E.TOOL_STREAM_INPUT, **kwargs, inputs=inputs, tool_info=self.tool_info(), **ids
            )
            await cb.trigger(E.TOOL_CALL_STARTED, **ids, inputs=inputs)
        try:
            if observed:
                await cb.trigger(
                    E.TOOL_PARSE_STARTED, **ids, raw_inputs=inputs, schema=self._card.input_params
                )
            args = self.prepare_inputs(inputs, **prep)
            if observed:
                await cb.trigger(E.TOOL_PARSE_FINISHED, **ids, formatted_inputs=args)
            async with contextlib.aclosing(self._async_chunks(args, kwargs, timeout)) as chunks:
                async for chunk in chunks:
                    if observed:
                        await cb.trigger(E.TOOL_RESULT_RECEIVED, **ids, inputs=args, result=chunk)
                        chunk = await cb.transform(E.TOOL_STREAM_OUTPUT, chunk, result=chunk, **ids)
                        await cb.trigger(
                            E.TOOL_STREAM_OUTPUT,
                            **kwargs,
                            result=chunk,
                            tool_info=self.tool_info(),
                            **ids,
                        )
                    yield chunk
        except Exception as e:
            if observed:
                await cb.trigger(E.TOOL_CALL_ERROR, **ids, error=e)
            raise
        if observed:
            await cb.trigger(E.TOOL_CALL_FINISHED, **ids)
