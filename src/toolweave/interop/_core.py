"""What every adapter shares: one call of a toolweave tool on behalf of another framework, the
card of a tool coming from one, and the pydantic model that stands for a card's schema.

An exported tool is called through `Tool.invoke` / `Tool.ainvoke`, never its bare function, so
the framework's call gets toolweave's argument parsing and repair, validation, defaults,
timeout, callbacks and tracing; the outcome is a `ToolExecutionResult` as
`DefaultToolExecutor` makes it (the same text, parts and error texts the model would see in a
`ToolService`), except that bad arguments raise `ToolArgumentsError` for the adapter to map.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

import pydantic
import pydantic_core
from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from .._utils.jsoncopy import copy_json
from .._utils.sync import run_sync
from ..context import ToolContext
from ..errors import AbortError, ToolArgumentsError, ToolExecutionError
from ..execution.executor import error_text, to_result
from ..execution.requests import ToolExecutionRequest
from ..execution.results import ToolExecutionResult
from ..schema.validation import format_errors
from ..tools.base import Tool
from ..tools.card import TOOL_NAME_PATTERN, ReturnBehavior, ToolCard
from ..toolsets import StepContext, Toolset, ToolsetTool

__all__ = [
    "MISSING",
    "OfferedTool",
    "acall",
    "arguments_error",
    "as_tools",
    "call",
    "card_from",
    "context_of",
    "lookup_injected",
    "many",
    "schema_model",
    "step_tools",
    "tool_name",
]


def many(tool_or_tools: Any, kind: type) -> tuple[list[Any], bool]:
    """The tools in `tool_or_tools` (one `kind`, an iterable of them, or for `Tool` a
    toolset, asked for its tools of a first step) and whether one was given alone."""
    if isinstance(tool_or_tools, kind):
        return [tool_or_tools], True
    if kind is Tool and isinstance(tool_or_tools, Toolset):
        return run_sync(step_tools(tool_or_tools, StepContext(round=0, messages=()))), False
    if isinstance(tool_or_tools, Iterable) and not isinstance(tool_or_tools, (str, bytes)):
        items = list(tool_or_tools)
        for item in items:
            if not isinstance(item, kind):
                raise TypeError(f"expected {kind.__name__} objects, got {type(item).__name__}")
        return items, False
    raise TypeError(
        f"expected a {kind.__name__} or an iterable of them, got {type(tool_or_tools).__name__}"
    )


# a toolset's tools as Tools -----------------------------------------------------------------


class OfferedTool(Tool):
    """A tool a toolset offers (`ToolsetTool`), as a `Tool`: its calls go through the
    toolset's executor, so the set's transforms (renaming, `.wrapped`, ...) apply to them as
    in a `ToolService`."""

    def __init__(self, offered: ToolsetTool) -> None:
        super().__init__(offered.card)
        self.offered = offered

    async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        ctx = kwargs.get("tool_context")
        if not isinstance(ctx, ToolContext):
            ctx = ToolContext(self.card.name)
        arguments = pydantic_core.to_json(inputs).decode()
        if ctx.request_id:
            request = ToolExecutionRequest(id=ctx.request_id, name=self.name, arguments=arguments)
        else:
            request = ToolExecutionRequest(name=self.name, arguments=arguments)
        result: ToolExecutionResult = await self.offered.executor.aexecute_with_result(
            request, ctx.memory_id, context=ctx.context, injected=ctx.extra or None
        )
        return result


async def step_tools(toolset: Toolset, ctx: StepContext) -> list[Tool]:
    """`toolset`'s tools for the step `ctx`, as `Tool`s."""
    return as_tools(toolset, await toolset.get_tools(ctx))


def as_tools(toolset: Toolset, offered: Iterable[ToolsetTool]) -> list[Tool]:
    """The tools `toolset` offered, as `Tool`s (`OfferedTool`); a tool the caller answers
    (`ToolService.deferred`) cannot run elsewhere and is a `TypeError`."""
    out: list[Tool] = []
    for tool in offered:
        if tool.deferred:
            raise TypeError(
                f"tool {tool.name!r} of {toolset.label} is answered by the caller "
                "(ToolService.deferred) and cannot run in another framework"
            )
        out.append(OfferedTool(tool))
    return out


def _failed(tool: Tool, error: Exception) -> ToolExecutionResult:
    """The error result `DefaultToolExecutor` gives for an exception from the tool."""
    wrapped = (
        error
        if isinstance(error, ToolExecutionError)
        else ToolExecutionError(
            f"tool {tool.name!r} failed: {error_text(error)}",
            tool_name=tool.name,
            cause=error,
            details={"wrapped": True},
        )
    )
    return ToolExecutionResult.error_result(error_text(error), error=wrapped)


def _context(
    tool: Tool,
    call_id: str | None,
    context: Any,
    memory_id: Any,
    extra: dict[str, Any] | None,
) -> ToolContext:
    return ToolContext(tool.name, call_id, memory_id, context, tool.callbacks, extra)


async def acall(
    tool: Tool,
    arguments: Mapping[str, Any] | str | None,
    *,
    call_id: str | None = None,
    context: Any = None,
    memory_id: Any = None,
    extra: dict[str, Any] | None = None,
) -> ToolExecutionResult:
    """Run `tool` from async code on `arguments` (a dict, or the model's JSON string).

    Bad arguments raise `ToolArgumentsError`; an abort propagates; any other failure is an
    error result whose text is the one a model gets in a `ToolService`."""
    ctx = _context(tool, call_id, context, memory_id, extra)
    try:
        value = await tool.ainvoke(arguments, tool_context=ctx)
    except (ToolArgumentsError, AbortError):
        raise
    except Exception as e:
        return _failed(tool, e)
    return to_result(value, tool.name)


def call(
    tool: Tool,
    arguments: Mapping[str, Any] | str | None,
    *,
    call_id: str | None = None,
    context: Any = None,
    memory_id: Any = None,
    extra: dict[str, Any] | None = None,
) -> ToolExecutionResult:
    """`acall` from sync code."""
    ctx = _context(tool, call_id, context, memory_id, extra)
    try:
        value = tool.invoke(arguments, tool_context=ctx)
    except (ToolArgumentsError, AbortError):
        raise
    except Exception as e:
        return _failed(tool, e)
    return to_result(value, tool.name)


# the card's schema as a pydantic model ---------------------------------------------------------


class _CardSchemaModel(BaseModel):
    """Base of `schema_model`'s classes (the tool and schema are set per class)."""

    model_config = ConfigDict(extra="allow")
    __toolweave_tool__: Tool

    @model_validator(mode="before")
    @classmethod
    def _toolweave_validate(cls, data: Any) -> Any:
        if isinstance(data, BaseModel):
            data = data.model_dump()
        try:
            return cls.__toolweave_tool__.prepare_inputs(data)
        except ToolArgumentsError as e:
            raise ValueError(e.message) from None

    @classmethod
    def __get_pydantic_json_schema__(cls, core_schema: CoreSchema, handler: Any) -> JsonSchemaValue:
        schema: JsonSchemaValue = copy_json(cls.__toolweave_tool__.card.input_params)
        return schema

    @classmethod
    def model_json_schema(  # type: ignore[override]
        cls, by_alias: bool = True, ref_template: str = "", *args: Any, **kwargs: Any
    ) -> dict[str, Any]:
        """The card's JSON Schema, as it is (no title added, `$defs` where the card has them)."""
        schema: dict[str, Any] = copy_json(cls.__toolweave_tool__.card.input_params)
        return schema


def schema_model(tool: Tool) -> type[BaseModel]:
    """A pydantic model whose JSON Schema is `tool`'s card schema and whose validation is the
    tool's own (coercion, defaults, its error texts), for frameworks that want a model class.
    Extra keys the schema accepts stay as extra fields."""
    name = "".join(part.capitalize() for part in re.split(r"[_-]", tool.name) if part) or "Tool"
    model = pydantic.create_model(f"{name}Arguments", __base__=_CardSchemaModel)
    model.__toolweave_tool__ = tool
    return model


# imported tools ----------------------------------------------------------------------------------

_BAD_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")


def tool_name(name: str) -> str:
    """`name` made acceptable to every provider: other characters become `_`, at most 64."""
    if TOOL_NAME_PATTERN.match(name):
        return name
    cleaned = _BAD_NAME_CHARS.sub("_", name)[:64]
    return cleaned or "tool"


def card_from(
    *,
    framework: str,
    name: str,
    description: str | None,
    schema: Mapping[str, Any] | None,
    return_direct: bool = False,
    **fields: Any,
) -> ToolCard:
    """The card of a tool imported from `framework`: its own name (made valid, the original
    kept in `metadata["<framework>_name"]` when it changed), description and JSON Schema."""
    params = copy_json(dict(schema)) if schema else {"type": "object", "properties": {}}
    params.setdefault("type", "object")
    metadata: dict[str, Any] = {"interop": framework, **fields.pop("metadata", {})}
    valid = tool_name(name)
    if valid != name:
        metadata[f"{framework}_name"] = name
    return ToolCard(
        name=valid,
        description=description or "",
        input_params=params,
        return_behavior=ReturnBehavior.IMMEDIATE if return_direct else ReturnBehavior.TO_LLM,
        metadata=metadata,
        **fields,
    )


_MISSING: Any = object()


def lookup_injected(key: str, kwargs: Mapping[str, Any]) -> Any:
    """A value the caller supplies for a parameter the model does not see, looked up as for
    `Injected` parameters: the call's keywords, `injected=`, `ToolContext.extra`, then the
    caller's context object (a key or an attribute). `_MISSING` when nowhere."""
    if key in kwargs and key != "tool_context":
        return kwargs[key]
    injected = kwargs.get("injected")
    if isinstance(injected, Mapping) and key in injected:
        return injected[key]
    ctx = kwargs.get("tool_context")
    if isinstance(ctx, ToolContext) or "context" in kwargs:
        if isinstance(ctx, ToolContext):
            if key in ctx.extra:
                return ctx.extra[key]
            user = ctx.context
        else:
            user = kwargs["context"]
        if isinstance(user, Mapping):
            if key in user:
                return user[key]
        elif user is not None and hasattr(user, key):
            return getattr(user, key)
    return _MISSING


MISSING = _MISSING
"""What `lookup_injected` returns for a value supplied nowhere."""


def arguments_error(tool_name: str, error: pydantic.ValidationError) -> ToolArgumentsError:
    """A framework's own pydantic validation failure as toolweave's arguments error (after
    toolweave's validation passed: a validator of the framework's model refused the values)."""
    errors: list[dict[str, Any]] = []
    for err in error.errors(include_url=False, include_context=False):
        item: dict[str, Any] = {"loc": err["loc"], "msg": err["msg"], "type": err["type"]}
        if err["type"] == "missing":
            item["msg"] = "missing required argument"
        else:
            item["input"] = err.get("input")
        errors.append(item)
    return ToolArgumentsError(format_errors(tool_name, errors), tool_name=tool_name, errors=errors)


_CONTEXT_KEYS = frozenset({"tool_context", "context", "memory_id", "injected"})


def context_of(tool: Tool, kwargs: Mapping[str, Any]) -> ToolContext:
    """The call's `ToolContext`: the one the executor passed, else one built from the
    keywords given to `invoke` (`context=`, `memory_id=`, the rest in `extra`), as
    `LocalFunction` does."""
    ctx = kwargs.get("tool_context")
    if isinstance(ctx, ToolContext):
        return ctx
    extra = {k: v for k, v in kwargs.items() if k not in _CONTEXT_KEYS}
    injected = kwargs.get("injected")
    if isinstance(injected, Mapping):
        extra = {**injected, **extra}
    return ToolContext(
        tool.name,
        memory_id=kwargs.get("memory_id"),
        context=kwargs.get("context"),
        callbacks=tool.callbacks,
        extra=extra,
    )
