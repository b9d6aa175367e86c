"""pydantic-ai: toolweave tools as pydantic-ai tools (`to_pydantic_ai`) and pydantic-ai tools
and function toolsets as toolweave tools (`from_pydantic_ai`). Needs `pydantic-ai-slim`
(extra `pydantic-ai`).

Exported: a `pydantic_ai.Tool` whose JSON Schema is the card's and whose argument validator
only parses the model's JSON (with toolweave's repair pass); the call goes through
`Tool.ainvoke`, so toolweave validates, fills defaults, applies the timeout and fires its
callbacks. Bad arguments raise `ModelRetry` with toolweave's message (pydantic-ai's retry
budget counts them, as a `ToolService` counts them); a failing tool raises `ToolFailed` with
its error text (the model sees it; no retry is used up). `RunContext.deps` is the call's
`ToolContext.context` (so `Injected` parameters are found among the deps' attributes or
keys) and the `RunContext` itself is `ToolContext.extra["run_context"]`. The model receives
toolweave's text for the result, and images, audio and files as pydantic-ai's
`BinaryContent` / `ImageUrl` / `AudioUrl` / `DocumentUrl`.

Imported: a `PydanticAITool` whose card has the tool's name, description and
`parameters_json_schema` (`sequential` as `parallel_safe=False`, `strict`, `timeout`,
`requires_approval` carried over). toolweave validates against that schema, then the tool's
own validator converts the values (a pydantic error there is a `ToolArgumentsError`); its
`args_validator` runs; `RunContext.deps` is the caller's `context=`. `ModelRetry` becomes a
`ToolArgumentsError` (counted against the `ToolService`'s retry budget, like pydantic-ai's),
`ToolFailed` an error result, a `ToolReturn` its `return_value` (its `metadata` kept in the
result's `attributes`).
"""

from __future__ import annotations

import base64
import inspect
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, cast, overload

try:
    from pydantic_ai import RunContext
    from pydantic_ai import Tool as PydanticAITool_
    from pydantic_ai._function_schema import FunctionSchema
    from pydantic_ai.exceptions import ModelRetry, ToolFailed
    from pydantic_ai.messages import (
        AudioUrl,
        BinaryContent,
        DocumentUrl,
        FileUrl,
        ImageUrl,
        ModelMessage,
        ModelResponse,
        ToolReturn,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.toolsets import DynamicToolset, FunctionToolset
    from pydantic_ai.usage import RunUsage
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "toolweave.interop.pydantic_ai needs pydantic-ai: pip install 'toolweave[pydantic-ai]'"
    ) from e

import pydantic
import pydantic_core
from pydantic_core import SchemaValidator

from .._utils.jsoncopy import copy_json
from ..errors import ToolArgumentsError, ToolExecutionError
from ..execution.content import (
    AudioContent,
    ContentPart,
    EmbeddedResource,
    FileContent,
    ImageContent,
    TextContent,
)
from ..execution.results import ToolExecutionResult
from ..execution.text import result_to_text
from ..schema.arguments import parse_arguments
from ..tools.base import Tool
from ..toolsets import StepContext, Toolset, ToolsetTool
from . import _core

__all__ = ["PydanticAITool", "from_pydantic_ai", "to_pydantic_ai"]


# toolweave -> pydantic-ai -------------------------------------------------------------------


class _ArgumentsParser:
    """pydantic-ai's argument validator for an exported tool: parse the JSON (toolweave's
    repair pass) and nothing more; the tool itself validates. Unparseable arguments ask the
    model to retry with toolweave's message."""

    def __init__(self, tool: Tool) -> None:
        self._name = tool.name

    def validate_json(
        self, input: str | bytes | bytearray, *, allow_partial: Any = False, **kwargs: Any
    ) -> Any:
        if allow_partial not in (False, "off"):  # a preview of arguments still streaming
            return pydantic_core.from_json(input, allow_partial=True)
        try:
            return parse_arguments(input, tool_name=self._name)
        except ToolArgumentsError as e:
            raise ModelRetry(e.message) from e

    def validate_python(self, input: Any, **kwargs: Any) -> Any:
        if input is None:
            return {}
        if not isinstance(input, Mapping):
            raise ModelRetry(
                f"The arguments of tool {self._name!r} must be a JSON object, "
                f"got {type(input).__name__}."
            )
        return dict(input)


def _to_pydantic_ai_value(result: ToolExecutionResult) -> Any:
    """What the model receives: toolweave's text, with media parts as pydantic-ai's."""
    text = result.result_text()
    parts = result.contents
    if not parts or all(isinstance(p, TextContent) for p in parts):
        return text
    out: list[Any] = [text] if text else []
    for part in parts:
        if not part.for_model or isinstance(part, TextContent):
            continue
        if isinstance(part, (ImageContent, AudioContent, FileContent)):
            if part.data is not None:
                out.append(
                    BinaryContent(data=base64.b64decode(part.data), media_type=part.mime_type)
                )
            elif isinstance(part, ImageContent):
                out.append(ImageUrl(url=str(part.url)))
            elif isinstance(part, AudioContent):
                out.append(AudioUrl(url=str(part.url)))
            else:
                out.append(DocumentUrl(url=str(part.url)))
        elif isinstance(part, EmbeddedResource) and part.text is not None:
            out.append(part.text)
        else:
            out.append(part.describe())
    return out


def _export(tool: Tool, max_retries: int | None) -> PydanticAITool_[Any]:
    card = tool.card

    async def call_toolweave(ctx: RunContext[Any], **arguments: Any) -> Any:
        try:
            result = await _core.acall(
                tool,
                arguments,
                call_id=ctx.tool_call_id,
                context=ctx.deps,
                memory_id=ctx.conversation_id,
                extra={"run_context": ctx},
            )
        except ToolArgumentsError as e:
            raise ModelRetry(e.message) from e
        if result.is_error:
            raise ToolFailed(result.result_text()) from result.error
        return _to_pydantic_ai_value(result)

    call_toolweave.__name__ = card.name
    schema = FunctionSchema(
        function=call_toolweave,
        name=card.name,
        description=card.description,
        validator=cast(SchemaValidator, _ArgumentsParser(tool)),
        json_schema=copy_json(card.input_params),
        takes_ctx=True,
        is_async=True,
    )
    return PydanticAITool_(
        call_toolweave,
        takes_ctx=True,
        name=card.name,
        description=card.description,
        max_retries=max_retries,
        strict=card.strict,
        sequential=not card.parallel_safe,
        requires_approval=card.requires_approval is not False,
        function_schema=schema,
    )


@overload
def to_pydantic_ai(
    tool_or_tools: Tool, *, max_retries: int | None = ...
) -> PydanticAITool_[Any]: ...


@overload
def to_pydantic_ai(
    tool_or_tools: Toolset, *, max_retries: int | None = ...
) -> DynamicToolset[Any]: ...


@overload
def to_pydantic_ai(
    tool_or_tools: Iterable[Tool], *, max_retries: int | None = ...
) -> list[PydanticAITool_[Any]]: ...


def to_pydantic_ai(
    tool_or_tools: Tool | Toolset | Iterable[Tool], *, max_retries: int | None = None
) -> PydanticAITool_[Any] | DynamicToolset[Any] | list[PydanticAITool_[Any]]:
    """pydantic-ai tools for toolweave tools: one tool gives one `pydantic_ai.Tool`, an
    iterable a list (`Agent(tools=...)`, or `FunctionToolset(...)` for a toolset), and a
    toolweave `Toolset` a pydantic-ai toolset that asks it for its tools at every step
    (`Agent(toolsets=[...])`). `max_retries` is pydantic-ai's per-tool retry budget (the
    agent's when None); a toolweave tool that requires approval is a pydantic-ai tool that
    requires approval."""
    if isinstance(tool_or_tools, Toolset):
        return _per_step(tool_or_tools, max_retries)
    tools, single = _core.many(tool_or_tools, Tool)
    out = [_export(t, max_retries) for t in tools]
    return out[0] if single else out


def _per_step(toolset: Toolset, max_retries: int | None) -> DynamicToolset[Any]:
    """A pydantic-ai toolset asking `toolset` for its tools before each model request.

    The step it is asked about: `round` is the number of model requests already made in the
    run, `context` the run's `deps`, `memory_id` its conversation id; `messages` is empty
    (pydantic-ai's history is not made of toolweave messages). While the set answers with
    the same tools, pydantic-ai gets the same toolset object (nothing rebuilt)."""
    last: list[Any] = [None, None]  # the offered tools, and their pydantic-ai toolset

    async def step(ctx: RunContext[Any]) -> FunctionToolset[Any]:
        offered: Sequence[ToolsetTool] = await toolset.get_tools(
            StepContext(
                round=max(ctx.run_step - 1, 0),
                messages=(),
                memory_id=ctx.conversation_id,
                context=ctx.deps,
            )
        )
        before = last[0]
        if before is not None and _same(before, offered):
            kept: FunctionToolset[Any] = last[1]
            return kept
        tools = [_export(t, max_retries) for t in _core.as_tools(toolset, offered)]
        last[:] = [tuple(offered), FunctionToolset(tools)]
        built: FunctionToolset[Any] = last[1]
        return built

    return DynamicToolset(step, per_run_step=True, id=f"toolweave:{toolset.label}")


def _same(before: Sequence[ToolsetTool], now: Sequence[ToolsetTool]) -> bool:
    return len(before) == len(now) and all(a is b for a, b in zip(before, now, strict=True))


# pydantic-ai -> toolweave -------------------------------------------------------------------


def _no_model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    raise ToolExecutionError(
        "a pydantic-ai tool imported into toolweave runs outside a pydantic-ai agent: "
        "RunContext.model cannot be called"
    )


_NO_MODEL: FunctionModel | None = None


def _placeholder_model() -> FunctionModel:
    global _NO_MODEL
    if _NO_MODEL is None:
        _NO_MODEL = FunctionModel(_no_model, model_name="toolweave-imported-tool")
    return _NO_MODEL


def _part(item: Any) -> ContentPart | None:
    if isinstance(item, str):
        return TextContent(text=item)
    if isinstance(item, BinaryContent):
        data = base64.b64encode(item.data).decode("ascii")
        if item.is_image:
            return ImageContent(data=data, mime_type=item.media_type)
        if item.is_audio:
            return AudioContent(data=data, mime_type=item.media_type)
        return FileContent(data=data, mime_type=item.media_type)
    if isinstance(item, ImageUrl):
        return ImageContent(url=item.url, mime_type=item.media_type)
    if isinstance(item, AudioUrl):
        return AudioContent(url=item.url, mime_type=item.media_type)
    if isinstance(item, FileUrl):
        return FileContent(url=item.url, mime_type=item.media_type)
    return None


def _from_pydantic_ai_value(out: Any) -> Any:
    """A pydantic-ai tool's return value as toolweave's: multimodal content as parts."""
    attributes: dict[str, Any] = {}
    if isinstance(out, ToolReturn):
        if out.metadata is not None:
            attributes["metadata"] = out.metadata
        out = out.return_value
    items = out if isinstance(out, Sequence) and not isinstance(out, (str, bytes)) else [out]
    parts = [_part(item) for item in items]
    if not items or any(p is None for p in parts) or all(isinstance(p, TextContent) for p in parts):
        if attributes:
            return ToolExecutionResult(text=result_to_text(out), result=out, attributes=attributes)
        return out
    contents = tuple(p for p in parts if p is not None)
    text = "\n".join(p.text for p in contents if isinstance(p, TextContent))
    return ToolExecutionResult(text=text, result=out, contents=contents, attributes=attributes)


class PydanticAITool(Tool):
    """A pydantic-ai `Tool` as a toolweave tool; build it with `from_pydantic_ai`.

    A tool taking `RunContext` gets one whose `deps` is the caller's `context=` (the
    `ToolContext.context`), with the call's id and the tool's name; `ctx.model` is a stand-in
    that refuses to be called (the tool runs outside a pydantic-ai agent).
    `pydantic_ai_tool` is the wrapped tool."""

    def __init__(self, pydantic_ai_tool: PydanticAITool_[Any], *, callbacks: Any = None) -> None:
        definition = pydantic_ai_tool.tool_def
        card = _core.card_from(
            framework="pydantic_ai",
            name=definition.name,
            description=definition.description,
            schema=definition.parameters_json_schema,
            strict=definition.strict,
            parallel_safe=not definition.sequential,
            requires_approval=pydantic_ai_tool.requires_approval,
            timeout=pydantic_ai_tool.timeout,
        )
        super().__init__(card, callbacks=callbacks)
        self.pydantic_ai_tool = pydantic_ai_tool

    def _async_first(self) -> bool:
        return True

    def _run_context(self, kwargs: Mapping[str, Any]) -> RunContext[Any]:
        ctx = _core.context_of(self, kwargs)
        return RunContext(
            deps=ctx.context,
            model=_placeholder_model(),
            usage=RunUsage(),
            tool_call_id=ctx.request_id,
            tool_name=self.pydantic_ai_tool.name,
        )

    async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        pai = self.pydantic_ai_tool
        schema = pai.function_schema
        ctx = self._run_context(kwargs)
        try:
            args = schema.validator.validate_python(inputs)
            if pai.args_validator is not None:
                checked = pai.args_validator(ctx, **args)
                if inspect.isawaitable(checked):
                    await checked
            out = await schema.call(args, ctx)
        except pydantic.ValidationError as e:
            raise _core.arguments_error(self.name, e) from e
        except ModelRetry as e:
            raise ToolArgumentsError(e.message, tool_name=self.name) from e
        except ToolFailed as e:
            raise ToolExecutionError(e.message, tool_name=self.name, cause=e) from e
        return _from_pydantic_ai_value(out)


def _pydantic_ai_tools(obj: Any) -> tuple[list[PydanticAITool_[Any]], bool]:
    if isinstance(obj, FunctionToolset):
        return list(obj.tools.values()), False
    if callable(obj) and not isinstance(obj, (PydanticAITool_, Tool)):
        return [PydanticAITool_(obj)], True
    return _core.many(obj, PydanticAITool_)


@overload
def from_pydantic_ai(obj: PydanticAITool_[Any], *, callbacks: Any = ...) -> PydanticAITool: ...


@overload
def from_pydantic_ai(
    obj: FunctionToolset[Any] | Iterable[PydanticAITool_[Any]], *, callbacks: Any = ...
) -> list[PydanticAITool]: ...


def from_pydantic_ai(obj: Any, *, callbacks: Any = None) -> PydanticAITool | list[PydanticAITool]:
    """toolweave tools for pydantic-ai tools: a `pydantic_ai.Tool` (or a plain function, made
    one by pydantic-ai's own schema builder) gives one, a `FunctionToolset` or an iterable a
    list. `callbacks` is the toolweave `CallbackFramework` the tools report to."""
    tools, single = _pydantic_ai_tools(obj)
    out = [PydanticAITool(t, callbacks=callbacks) for t in tools]
    return out[0] if single else out
