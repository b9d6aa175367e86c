"""`LocalFunction`: a Python callable as a tool."""

from __future__ import annotations

import contextlib
import contextvars
import functools
import inspect
import types
import typing
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Mapping
from typing import Any

from .._utils.sync import iterate_sync, run_sync
from .._utils.threads import to_thread
from ..callbacks.framework import CallbackFramework
from ..context import ToolContext
from ..errors import ErrorCode, ToolCardError, ToolExecutionError, ToolNotSupportedError
from ..schema.function_schema import FunctionSchema
from ..schema.validation import ArgumentsValidator
from .base import Tool
from .card import ToolCard

__all__ = ["LocalFunction"]

_PLAIN = frozenset({dict, list, str, int, float, bool, type(None)})
"""Return types that are never awaitable (checked before the slower isawaitable)."""
_ITERABLE_RESULT_EXCLUDED = (str, bytes, bytearray, dict, Mapping)


def _is_generator_function(func: Callable[..., Any]) -> bool:
    target = func.func if isinstance(func, functools.partial) else func
    return inspect.isgeneratorfunction(target) or inspect.isasyncgenfunction(target)


class LocalFunction(Tool):
    """A Python function (sync, async, generator or async generator) exposed as a tool.

    Build one with `@tool` / `tool(fn)`; `LocalFunction(card, func)` wraps a function under a
    hand-written card. The object stays callable with the function's own signature.

    Rules: `invoke`/`ainvoke` on a generator function raise "func can not be generator"
    (182205); `stream`/`astream` on a plain function yield its single result, iterating it when
    it is an iterable (other than str, bytes and dicts). A sync function called from async
    code runs in a worker thread with a copy of the caller's contextvars, so parallel calls
    never see each other's context. A sync function returning an awaitable has it awaited.
    """

    def __init__(
        self,
        card: ToolCard,
        func: Callable[..., Any],
        *,
        callbacks: CallbackFramework | None = None,
        schema: FunctionSchema | None = None,
    ) -> None:
        if func is None:
            raise ToolCardError(
                "func is None: a LocalFunction needs a callable",
                code=ErrorCode.LOCAL_FUNCTION_FUNC_NOT_SUPPORTED,
            )
        if not callable(func):
            raise ToolCardError(
                f"func {func!r} is not callable",
                code=ErrorCode.LOCAL_FUNCTION_FUNC_NOT_SUPPORTED,
            )
        super().__init__(card, callbacks=callbacks)
        self.func = func
        self._schema = schema
        self._direct = schema is not None and not (
            schema.injected or schema.var_positional or schema.positional
        )
        """True when the validated arguments are the call's keywords as they are."""
        self._static = False
        """True for a tool declared on a staticmethod: attribute access does not bind it."""
        self._context_names: tuple[str, ...] | None = None
        self._is_generator = _is_generator_function(func)
        self._is_async = inspect.iscoroutinefunction(
            func.func if isinstance(func, functools.partial) else func
        )
        self._is_async_generator = inspect.isasyncgenfunction(func)
        functools.update_wrapper(self, func, updated=())  # type: ignore[arg-type]

    @property
    def function_schema(self) -> FunctionSchema | None:
        """The schema built from the signature (None for a hand-written card)."""
        return self._schema

    @property
    def validator(self) -> ArgumentsValidator:
        if self._validator is None:
            if self._schema is not None and self._schema.json_schema == self._card.input_params:
                self._validator = self._schema.validator
            else:
                return super().validator
        return self._validator

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the underlying function directly, bypassing validation and callbacks."""
        return self.func(*args, **kwargs)

    def __get__(self, instance: Any, owner: type | None = None) -> Any:
        if instance is None or self._static:
            return self
        return self.bind(instance)

    def bind(self, instance: Any) -> LocalFunction:
        """The same tool with its function bound to `instance` (for tools declared on methods)."""
        bound = LocalFunction(
            self._card,
            types.MethodType(self.func, instance),
            callbacks=self._callbacks,
            schema=self._schema,
        )
        bound._validator = self._validator
        return bound

    # input preparation ---------------------------------------------------------------------
    def _fill_defaults(self, data: dict[str, Any]) -> dict[str, Any]:
        data = super()._fill_defaults(data)
        if self._schema is not None and self._schema.renamed:
            data = {self._schema.renamed.get(k, k): v for k, v in data.items()}
        return data

    def _call_arguments(
        self, inputs: dict[str, Any], kwargs: dict[str, Any]
    ) -> tuple[tuple[Any, ...], dict[str, Any]]:
        fs = self._schema
        if fs is None:
            names = self._context_params()
            if not names:
                return (), inputs
            call = dict(inputs)
            for name in names:
                call[name] = self._tool_context(kwargs)
            return (), call
        call = dict(inputs) if (fs.injected or fs.var_positional or fs.positional) else inputs
        for param in fs.injected:
            if param.kind == "context":
                call[param.name] = self._tool_context(kwargs)
                continue
            value = _lookup_injected(param.key, kwargs)
            if value is _MISSING:
                if not param.has_default:
                    raise ToolExecutionError(
                        f"tool {self._card.name!r}: the injected parameter {param.name!r} was "
                        f"not supplied; pass {param.key}=... to invoke or ToolService.chat",
                        tool_name=self._card.name,
                    )
                value = param.default
            call[param.name] = value
        if not fs.positional and not fs.var_positional:
            return (), call
        args: list[Any] = [call.pop(name) for name in fs.positional if name in call]
        if fs.var_positional:
            extra = call.pop(fs.var_positional, None) or []
            args.extend(extra)
        return tuple(args), call

    def _tool_context(self, kwargs: dict[str, Any]) -> ToolContext:
        """The call's `ToolContext`: the one `ToolService` passed, else one built from the
        keywords given to `invoke` (`context=`, `memory_id=`, the rest in `extra`)."""
        ctx = kwargs.get("tool_context")
        if ctx is not None:
            return ctx  # type: ignore[no-any-return]
        extra = {k: v for k, v in kwargs.items() if k not in _CONTEXT_KEYS}
        return ToolContext(
            tool_name=self._card.name,
            memory_id=kwargs.get("memory_id"),
            context=kwargs.get("context"),
            callbacks=self.callbacks,
            extra=extra,
        )

    def _context_params(self) -> tuple[str, ...]:
        """Parameters annotated `ToolContext` of a function under a hand-written card (found
        once, from the signature): they get the call's context, like a declared tool's."""
        if self._context_names is None:
            try:
                hints = typing.get_type_hints(self.func)
            except Exception:  # unresolvable annotations: nothing to inject
                hints = {}
            self._context_names = tuple(
                n for n, h in hints.items() if n != "return" and h is ToolContext
            )
        return self._context_names

    # execution ------------------------------------------------------------------------------
    def _generator_error(self) -> ToolNotSupportedError:
        return ToolNotSupportedError(
            f"tool {self._card.name!r}: func can not be generator; use stream() or astream()",
            code=ErrorCode.LOCAL_FUNCTION_EXECUTION_ERROR,
        )

    def supports_invoke(self) -> bool:
        return not self._is_generator

    def _async_first(self) -> bool:
        return self.is_async

    @property
    def is_async(self) -> bool:
        """Whether the function is a coroutine function (or an async generator function)."""
        return self._is_async or self._is_async_generator

    def _not_supported(self, what: str) -> ToolNotSupportedError:
        if what == "invoke" and self._is_generator:
            return self._generator_error()
        return super()._not_supported(what)

    def invoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        if self._is_generator:
            raise self._generator_error()
        if self._direct:
            result = self.func(**inputs)
        else:
            args, call = self._call_arguments(inputs, kwargs)
            result = self.func(*args, **call)
        if type(result) not in _PLAIN and inspect.isawaitable(result):
            return run_sync(_await(result))
        return result

    def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Coroutine[Any, Any, Any]:
        if self._direct and self._is_async:
            return self.func(**inputs)  # type: ignore[no-any-return]  # its own coroutine
        return self._ainvoke(inputs, kwargs)

    async def _ainvoke(self, inputs: dict[str, Any], kwargs: dict[str, Any]) -> Any:
        if self._is_generator:
            raise self._generator_error()
        args, call = self._call_arguments(inputs, kwargs)
        if self._is_async:
            return await self.func(*args, **call)
        result = await to_thread(self.func, *args, **call)
        if inspect.isawaitable(result):
            return await result
        return result

    def stream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Iterator[Any]:
        args, call = self._call_arguments(inputs, kwargs)
        if inspect.isasyncgenfunction(self.func):
            raise NotImplementedError  # served by astream_internal through the base class
        result = self.func(*args, **call)
        if inspect.isawaitable(result):
            result = run_sync(_await(result))
        yield from _as_chunks(result)

    async def astream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> AsyncIterator[Any]:
        args, call = self._call_arguments(inputs, kwargs)
        if inspect.isasyncgenfunction(self.func):
            async with contextlib.aclosing(self.func(*args, **call)) as items:
                async for item in items:
                    yield item
            return
        if self._is_async:
            result = await self.func(*args, **call)
        else:
            ctx = contextvars.copy_context()
            result = await to_thread(ctx.run, self.func, *args, **call)
            if inspect.isawaitable(result):
                result = await result
        if inspect.isgenerator(result) or (
            isinstance(result, Iterator) and not isinstance(result, _ITERABLE_RESULT_EXCLUDED)
        ):
            # a sync generator: pull each item in a worker thread
            ctx = contextvars.copy_context()
            while True:
                item = await to_thread(ctx.run, next, result, _MISSING)  # type: ignore[arg-type]
                if item is _MISSING:
                    return
                yield item
        for item in _as_chunks(result):
            yield item

    def stream(self, inputs: Any = None, **kwargs: Any) -> Iterator[Any]:
        if inspect.isasyncgenfunction(self.func):
            return self._stream_via_async(inputs, kwargs)
        return super().stream(inputs, **kwargs)

    def _stream_via_async(self, inputs: Any, kwargs: dict[str, Any]) -> Iterator[Any]:
        # an async generator consumed from sync code: drive it on a private loop
        yield from iterate_sync(super().astream(inputs, **kwargs))


class _Missing:
    pass


_MISSING: Any = _Missing()


_CONTEXT_KEYS = frozenset({"tool_context", "context", "memory_id", "injected"})


def _lookup_injected(key: str, kwargs: dict[str, Any]) -> Any:
    if key in kwargs:
        return kwargs[key]
    injected = kwargs.get("injected")
    if isinstance(injected, Mapping) and key in injected:
        return injected[key]
    ctx = kwargs.get("tool_context")
    if ctx is not None:
        if key in ctx.extra:
            return ctx.extra[key]
        user = ctx.context
        if isinstance(user, Mapping) and key in user:
            return user[key]
        if user is not None and not isinstance(user, Mapping) and hasattr(user, key):
            return getattr(user, key)
    return _MISSING


def _as_chunks(result: Any) -> Iterator[Any]:
    if isinstance(result, _ITERABLE_RESULT_EXCLUDED) or not hasattr(result, "__iter__"):
        yield result
        return
    yield from result


async def _await(aw: Any) -> Any:
    return await aw
