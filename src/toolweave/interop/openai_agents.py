"""OpenAI Agents SDK: toolweave tools as `FunctionTool`s (`to_openai_agents`) and function
tools as toolweave tools (`from_openai_agents`). Needs `openai-agents` (extra
`openai-agents`).

Exported: a `FunctionTool` whose `on_invoke_tool` hands the model's raw JSON string to
`Tool.ainvoke`: toolweave parses and repairs it, validates, fills defaults, applies the
timeout and fires its callbacks. Its schema is what toolweave sends OpenAI
(`dialects.openai_tool`): strict when the card allows it (`strict=None`) or asks for it.
A failure, bad arguments included, goes to `failure_error_function`: by default the model
gets toolweave's error text (the SDK's own default hides the error behind a fixed sentence);
a function of `(RunContextWrapper, error)` returns the text instead; `None` raises it and
ends the run. `ToolContext.context` (the run's context object) is the toolweave call's
context, the SDK's `ToolContext` is `ToolContext.extra["run_context"]`. The result is
toolweave's text, media as `ToolOutputImage` / `ToolOutputFileContent`.

Imported: an `OpenAIAgentsTool` whose card has the tool's name, description and
`params_json_schema` (`strict_json_schema` as `strict`, `timeout_seconds` as `timeout`,
`needs_approval` as `requires_approval`). The call goes to `on_invoke_tool` with the validated
arguments as JSON and an SDK `ToolContext` whose `context` is the caller's `context=`. A
failure raises (the SDK's failure text is turned off for the imported copy), so toolweave's
error result carries the real message; `ModelBehaviorError` (the SDK could not validate the
arguments) is a `ToolArgumentsError`. Structured outputs (`ToolOutputText`,
`ToolOutputImage`, `ToolOutputFileContent`, or their dict forms) become content parts.
"""

from __future__ import annotations

import copy
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, Final, overload

try:
    from agents import FunctionTool, RunContextWrapper
    from agents.exceptions import ModelBehaviorError
    from agents.tool import (
        ToolOutputFileContent,
        ToolOutputImage,
        ToolOutputText,
        set_function_tool_failure_error_function,
    )
    from agents.tool_context import ToolContext as AgentsToolContext
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "toolweave.interop.openai_agents needs openai-agents: "
        "pip install 'toolweave[openai-agents]'"
    ) from e

from ..dialects import openai_tool
from ..errors import ToolArgumentsError
from ..execution.content import (
    AudioContent,
    ContentPart,
    EmbeddedResource,
    FileContent,
    ImageContent,
    TextContent,
)
from ..execution.executor import error_text
from ..execution.results import ToolExecutionResult
from ..tools.base import Tool
from . import _core

__all__ = ["TOOLWEAVE_ERROR_TEXT", "OpenAIAgentsTool", "from_openai_agents", "to_openai_agents"]

ToolErrorFunction = Callable[[RunContextWrapper[Any], Exception], "str | Awaitable[str]"]


def _toolweave_error_text(ctx: RunContextWrapper[Any], error: Exception) -> str:
    """toolweave's text for a failed call: the arguments message, else the error's."""
    return error_text(error)


TOOLWEAVE_ERROR_TEXT: Final = _toolweave_error_text
"""The default `failure_error_function` of exported tools: the text a `ToolService` would
send the model (toolweave's arguments message, or the tool's error message)."""


class _Failed(Exception):
    """An error result of the toolweave tool, raised for the SDK's failure handling."""

    def __init__(self, result: ToolExecutionResult) -> None:
        super().__init__(result.result_text())
        self.result = result


def _data_url(mime: str, data: str) -> str:
    return f"data:{mime};base64,{data}"


def _to_agents_output(result: ToolExecutionResult) -> Any:
    text = result.result_text()
    parts = result.contents
    if not parts or all(isinstance(p, TextContent) for p in parts):
        return text
    out: list[Any] = [ToolOutputText(text=text)] if text else []
    for part in parts:
        if not part.for_model or isinstance(part, TextContent):
            continue
        if isinstance(part, ImageContent):
            url = _data_url(part.mime_type, part.data) if part.data is not None else part.url
            out.append(ToolOutputImage(image_url=url))
        elif isinstance(part, (FileContent, AudioContent)):
            name = part.name if isinstance(part, FileContent) else None
            if part.data is not None:
                data = _data_url(part.mime_type, part.data)
                out.append(ToolOutputFileContent(file_data=data, filename=name))
            else:
                out.append(ToolOutputFileContent(file_url=part.url, filename=name))
        elif isinstance(part, EmbeddedResource) and part.text is not None:
            out.append(ToolOutputText(text=part.text))
        else:
            out.append(ToolOutputText(text=part.describe()))
    return out


def _export(
    tool: Tool, strict: bool | None, failure_error_function: ToolErrorFunction | None
) -> FunctionTool:
    card = tool.card
    definition = openai_tool(card, strict)["function"]
    is_strict = bool(definition.get("strict", False))

    async def on_invoke_tool(ctx: AgentsToolContext[Any], arguments: str) -> Any:
        try:
            result = await _core.acall(
                tool,
                arguments,
                call_id=ctx.tool_call_id,
                context=ctx.context,
                extra={"run_context": ctx},
            )
            if result.is_error:
                raise _Failed(result)
        except (ToolArgumentsError, _Failed) as e:
            error: Exception = e
            if isinstance(e, _Failed):
                error = e.result.error if isinstance(e.result.error, Exception) else e
            if failure_error_function is None:
                raise error from None
            text = failure_error_function(ctx, error)
            return await text if inspect.isawaitable(text) else text
        return _to_agents_output(result)

    function_tool = FunctionTool(
        name=card.name,
        description=card.description,
        params_json_schema=copy.deepcopy(definition["parameters"]),
        on_invoke_tool=on_invoke_tool,
        strict_json_schema=is_strict,
        needs_approval=card.requires_approval is not False,
    )
    # for the failures the SDK reports itself (e.g. its guardrails), the same formatter
    return set_function_tool_failure_error_function(function_tool, failure_error_function)


@overload
def to_openai_agents(
    tool_or_tools: Tool,
    *,
    strict: bool | None = ...,
    failure_error_function: ToolErrorFunction | None = ...,
) -> FunctionTool: ...


@overload
def to_openai_agents(
    tool_or_tools: Iterable[Tool],
    *,
    strict: bool | None = ...,
    failure_error_function: ToolErrorFunction | None = ...,
) -> list[FunctionTool]: ...


def to_openai_agents(
    tool_or_tools: Tool | Iterable[Tool],
    *,
    strict: bool | None = None,
    failure_error_function: ToolErrorFunction | None = TOOLWEAVE_ERROR_TEXT,
) -> FunctionTool | list[FunctionTool]:
    """OpenAI Agents `FunctionTool`s for toolweave tools: one tool gives one, an iterable a
    list. `strict`: as for `dialects.openai_tool` (None: the card's, else strict when the
    schema can be). `failure_error_function`: see the module docstring."""
    tools, single = _core.many(tool_or_tools, Tool)
    out = [_export(t, strict, failure_error_function) for t in tools]
    return out[0] if single else out


# OpenAI Agents -> toolweave -----------------------------------------------------------------


def _split_data_url(url: str) -> tuple[str | None, str | None]:
    """(mime type, base64 data) of a `data:` URL, else (None, None)."""
    if not url.startswith("data:") or ";base64," not in url:
        return None, None
    head, data = url[5:].split(";base64,", 1)
    return head or None, data


def _part(item: Any) -> ContentPart | None:
    if isinstance(item, Mapping):
        kind = item.get("type")
        model: Any = {
            "text": ToolOutputText,
            "image": ToolOutputImage,
            "file": ToolOutputFileContent,
        }
        if kind not in model:
            return None
        item = model[kind].model_validate(item)
    if isinstance(item, ToolOutputText):
        return TextContent(text=item.text)
    if isinstance(item, ToolOutputImage):
        mime, data = _split_data_url(item.image_url or "")
        if data is not None:
            return ImageContent(data=data, mime_type=mime or "image/png")
        return ImageContent(url=item.image_url or f"file_id:{item.file_id}")
    if isinstance(item, ToolOutputFileContent):
        mime, data = _split_data_url(item.file_data or "")
        if data is not None:
            return FileContent(
                data=data, mime_type=mime or "application/octet-stream", name=item.filename
            )
        return FileContent(url=item.file_url or f"file_id:{item.file_id}", name=item.filename)
    return None


def _from_agents_output(out: Any) -> Any:
    items = out if isinstance(out, Sequence) and not isinstance(out, (str, bytes)) else [out]
    if not items:
        return out
    parts = [_part(item) for item in items]
    if any(p is None for p in parts):
        return out
    contents = tuple(p for p in parts if p is not None)
    text = "\n".join(p.text for p in contents if isinstance(p, TextContent))
    if all(isinstance(p, TextContent) for p in contents):
        return text
    return ToolExecutionResult(text=text, result=out, contents=contents)


class OpenAIAgentsTool(Tool):
    """An OpenAI Agents `FunctionTool` as a toolweave tool; build it with
    `from_openai_agents`. `function_tool` is the wrapped tool (the SDK's failure text
    turned off on a copy, so errors reach toolweave)."""

    def __init__(self, function_tool: FunctionTool, *, callbacks: Any = None) -> None:
        approval = function_tool.needs_approval
        card = _core.card_from(
            framework="openai_agents",
            name=function_tool.name,
            description=function_tool.description,
            schema=function_tool.params_json_schema,
            strict=function_tool.strict_json_schema,
            timeout=function_tool.timeout_seconds,
            requires_approval=approval if isinstance(approval, bool) else True,
        )
        super().__init__(card, callbacks=callbacks)
        raising = copy.copy(function_tool)
        set_function_tool_failure_error_function(raising, None)
        self.function_tool = raising

    def _async_first(self) -> bool:
        return True

    async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        ctx = _core.context_of(self, kwargs)
        arguments = json.dumps(inputs, ensure_ascii=False, default=str)
        agents_ctx = AgentsToolContext(
            context=ctx.context,
            tool_name=self.function_tool.name,
            tool_call_id=ctx.request_id or f"call_{id(ctx):x}",
            tool_arguments=arguments,
        )
        try:
            out = await self.function_tool.on_invoke_tool(agents_ctx, arguments)
        except ModelBehaviorError as e:
            raise ToolArgumentsError(str(e), tool_name=self.name) from e
        return _from_agents_output(out)


@overload
def from_openai_agents(obj: FunctionTool, *, callbacks: Any = ...) -> OpenAIAgentsTool: ...


@overload
def from_openai_agents(
    obj: Iterable[FunctionTool], *, callbacks: Any = ...
) -> list[OpenAIAgentsTool]: ...


def from_openai_agents(
    obj: FunctionTool | Iterable[FunctionTool], *, callbacks: Any = None
) -> OpenAIAgentsTool | list[OpenAIAgentsTool]:
    """toolweave tools for OpenAI Agents function tools: one gives one, an iterable (such as
    an `Agent`'s `tools`) a list. Hosted tools (web search, file search, computer use) run on
    OpenAI's side and cannot be imported."""
    tools, single = _core.many(obj, FunctionTool)
    out = [OpenAIAgentsTool(t, callbacks=callbacks) for t in tools]
    return out[0] if single else out
