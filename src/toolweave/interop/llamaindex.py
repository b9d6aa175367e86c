"""LlamaIndex: toolweave tools as LlamaIndex tools (`to_llamaindex`) and LlamaIndex tools and
tool specs as toolweave tools (`from_llamaindex`). Needs `llama-index-core` (extra
`llamaindex`).

Exported: a `ToolweaveLlamaIndexTool` (an `AsyncBaseTool`) whose metadata gives the card's
JSON Schema unchanged (`get_parameters_dict`; `fn_schema` is a pydantic model of it that
validates as the toolweave tool does) and whose `call` / `acall` go through `Tool.invoke` /
`ainvoke`: toolweave validates, fills defaults, applies the timeout and fires its callbacks.
A failure, bad arguments included, is a `ToolOutput` with `is_error=True`, toolweave's text as
content and the exception kept; a result is toolweave's text (media as LlamaIndex image,
audio and document blocks) with the raw value as `raw_output`. `ReturnBehavior.IMMEDIATE`
(or `IMMEDIATE_IF_LAST`) is `return_direct`.

Imported: a `LlamaIndexTool` whose card has the tool's name, description and
`get_parameters_dict()` schema, `return_direct` as `ReturnBehavior.IMMEDIATE`. A `ToolOutput`
with `is_error` is an error result; its content (blocks as parts) is the text, its
`raw_output` the result. A `FunctionTool` that takes a workflow `Context` gets it as an
`Injected` value of its context parameter's name.
"""

from __future__ import annotations

import base64
import inspect
from collections.abc import Iterable, Mapping
from typing import Any, overload

try:
    from llama_index.core.base.llms.types import (
        AudioBlock,
        ContentBlock,
        DocumentBlock,
        ImageBlock,
        TextBlock,
    )
    from llama_index.core.tools import FunctionTool
    from llama_index.core.tools.tool_spec.base import BaseToolSpec
    from llama_index.core.tools.types import AsyncBaseTool, BaseTool, ToolMetadata, ToolOutput
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "toolweave.interop.llamaindex needs llama-index-core: pip install 'toolweave[llamaindex]'"
    ) from e

from .._utils.threads import to_thread
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
from ..tools.base import Tool
from ..tools.card import ReturnBehavior
from . import _core

__all__ = ["LlamaIndexTool", "ToolweaveLlamaIndexTool", "from_llamaindex", "to_llamaindex"]


# toolweave -> LlamaIndex --------------------------------------------------------------------


class _CardMetadata(ToolMetadata):
    """Tool metadata giving the card's whole schema (LlamaIndex's own keeps only `type`,
    `properties`, `required` and `$defs`, dropping `additionalProperties`)."""

    def get_parameters_dict(self) -> dict[str, Any]:
        assert self.fn_schema is not None
        return self.fn_schema.model_json_schema()


def _to_blocks(result: ToolExecutionResult) -> list[ContentBlock]:
    blocks: list[ContentBlock] = []
    for part in result.contents or ():
        if not part.for_model:
            continue
        if isinstance(part, TextContent):
            blocks.append(TextBlock(text=part.text))
        elif isinstance(part, ImageContent):
            if part.data is not None:
                raw = base64.b64decode(part.data)
                blocks.append(ImageBlock(image=raw, image_mimetype=part.mime_type))
            else:
                blocks.append(ImageBlock(url=part.url, image_mimetype=part.mime_type))
        elif isinstance(part, AudioContent):
            if part.data is not None:
                blocks.append(AudioBlock(audio=base64.b64decode(part.data)))
            else:
                blocks.append(AudioBlock(url=part.url))
        elif isinstance(part, FileContent):
            data = base64.b64decode(part.data) if part.data is not None else None
            blocks.append(
                DocumentBlock(
                    data=data, url=part.url, title=part.name, document_mimetype=part.mime_type
                )
            )
        elif isinstance(part, EmbeddedResource) and part.text is not None:
            blocks.append(TextBlock(text=part.text))
        else:
            blocks.append(TextBlock(text=part.describe()))
    return blocks


class ToolweaveLlamaIndexTool(AsyncBaseTool):
    """A toolweave `Tool` as a LlamaIndex tool (see the module docstring); build it with
    `to_llamaindex`. `toolweave_tool` is the wrapped tool; `context` is passed to it as the
    caller's context object (`ToolContext.context`)."""

    def __init__(self, tool: Tool, *, context: Any = None) -> None:
        card = tool.card
        self.toolweave_tool = tool
        self.context = context
        self._metadata = _CardMetadata(
            description=card.description,
            name=card.name,
            fn_schema=_core.schema_model(tool),
            return_direct=card.return_behavior is not ReturnBehavior.TO_LLM,
        )

    @property
    def metadata(self) -> ToolMetadata:
        """The tool's name, description, schema and `return_direct`."""
        return self._metadata

    @staticmethod
    def _arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if args and not kwargs and len(args) == 1:  # `tool(input)`: one dict or JSON string
            return args[0]
        return kwargs

    def call(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Run the tool (sync)."""
        arguments = self._arguments(args, kwargs)
        try:
            result = _core.call(self.toolweave_tool, arguments, context=self.context)
        except ToolArgumentsError as e:
            return self._failed(e.message, e, arguments)
        return self._output(result, arguments)

    async def acall(self, *args: Any, **kwargs: Any) -> ToolOutput:
        """Run the tool (async)."""
        arguments = self._arguments(args, kwargs)
        try:
            result = await _core.acall(self.toolweave_tool, arguments, context=self.context)
        except ToolArgumentsError as e:
            return self._failed(e.message, e, arguments)
        return self._output(result, arguments)

    def _raw_input(self, arguments: Any) -> dict[str, Any]:
        return (
            {"kwargs": dict(arguments)} if isinstance(arguments, Mapping) else {"input": arguments}
        )

    def _failed(self, text: str, error: BaseException | None, arguments: Any) -> ToolOutput:
        return ToolOutput(
            content=text,
            tool_name=self.toolweave_tool.name,
            raw_input=self._raw_input(arguments),
            raw_output=text,
            is_error=True,
            exception=error if isinstance(error, Exception) else None,
        )

    def _output(self, result: ToolExecutionResult, arguments: Any) -> ToolOutput:
        if result.is_error:
            return self._failed(result.result_text(), result.error, arguments)
        parts = result.contents
        name = self.toolweave_tool.name
        if parts and not all(isinstance(p, TextContent) for p in parts):
            return ToolOutput(
                blocks=_to_blocks(result),
                tool_name=name,
                raw_input=self._raw_input(arguments),
                raw_output=result.result,
            )
        return ToolOutput(
            content=result.result_text(),
            tool_name=name,
            raw_input=self._raw_input(arguments),
            raw_output=result.result,
        )


@overload
def to_llamaindex(tool_or_tools: Tool, *, context: Any = ...) -> ToolweaveLlamaIndexTool: ...


@overload
def to_llamaindex(
    tool_or_tools: Iterable[Tool], *, context: Any = ...
) -> list[ToolweaveLlamaIndexTool]: ...


def to_llamaindex(
    tool_or_tools: Tool | Iterable[Tool], *, context: Any = None
) -> ToolweaveLlamaIndexTool | list[ToolweaveLlamaIndexTool]:
    """LlamaIndex tools for toolweave tools: one tool gives one, an iterable a list.
    `context` reaches the tools as `ToolContext.context` (where `Injected` values are also
    looked up): LlamaIndex has no per-call context object of its own for plain tools."""
    tools, single = _core.many(tool_or_tools, Tool)
    out = [ToolweaveLlamaIndexTool(t, context=context) for t in tools]
    return out[0] if single else out


# LlamaIndex -> toolweave --------------------------------------------------------------------


def _base64(data: Any) -> str | None:
    if data is None:
        return None
    if isinstance(data, bytes):
        return data.decode("ascii")  # LlamaIndex keeps inline data base64-encoded
    return base64.b64encode(data.read()).decode("ascii")


def _part(block: Any) -> ContentPart:
    if isinstance(block, TextBlock):
        return TextContent(text=block.text)
    if isinstance(block, ImageBlock):
        mime = block.image_mimetype or "image/png"
        if block.image is not None:
            return ImageContent(data=_base64(block.image), mime_type=mime)
        return ImageContent(url=str(block.url or block.path), mime_type=mime)
    if isinstance(block, AudioBlock):
        mime = f"audio/{block.format}" if block.format else "audio/wav"
        if block.audio is not None:
            return AudioContent(data=_base64(block.audio), mime_type=mime)
        return AudioContent(url=str(block.url or block.path), mime_type=mime)
    if isinstance(block, DocumentBlock):
        mime = block.document_mimetype or "application/octet-stream"
        if block.data is not None:
            return FileContent(data=_base64(block.data), mime_type=mime, name=block.title)
        return FileContent(url=str(block.url or block.path), mime_type=mime, name=block.title)
    text = getattr(block, "text", None)
    return TextContent(text=text if isinstance(text, str) else str(block))


class LlamaIndexTool(Tool):
    """A LlamaIndex tool as a toolweave tool; build it with `from_llamaindex`.
    `llamaindex_tool` is the wrapped tool."""

    def __init__(self, llamaindex_tool: BaseTool, *, callbacks: Any = None) -> None:
        meta = llamaindex_tool.metadata
        card = _core.card_from(
            framework="llamaindex",
            name=meta.get_name(),
            description=meta.description,
            schema=meta.get_parameters_dict(),
            return_direct=meta.return_direct,
        )
        super().__init__(card, callbacks=callbacks)
        self.llamaindex_tool = llamaindex_tool
        self._ctx_param = (
            llamaindex_tool.ctx_param_name
            if isinstance(llamaindex_tool, FunctionTool) and llamaindex_tool.requires_context
            else None
        )
        self._native_async = isinstance(llamaindex_tool, AsyncBaseTool) and (
            not isinstance(llamaindex_tool, FunctionTool)
            or inspect.iscoroutinefunction(llamaindex_tool.real_fn)
        )

    def _async_first(self) -> bool:
        return self._native_async

    def _arguments(self, inputs: dict[str, Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
        if self._ctx_param is None:
            return inputs
        value = _core.lookup_injected(self._ctx_param, kwargs)
        if value is _core.MISSING:
            raise ToolExecutionError(
                f"the LlamaIndex tool {self.name!r} needs a workflow Context: supply it as the "
                f"injected value {self._ctx_param!r} (injected={{{self._ctx_param!r}: ctx}})",
                tool_name=self.name,
            )
        return {**inputs, self._ctx_param: value}

    def invoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        tool = self.llamaindex_tool
        arguments = self._arguments(inputs, kwargs)
        out = tool.call(**arguments) if isinstance(tool, AsyncBaseTool) else tool(**arguments)
        return self._value(out)

    async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        tool = self.llamaindex_tool
        arguments = self._arguments(inputs, kwargs)
        if isinstance(tool, AsyncBaseTool):
            out = await tool.acall(**arguments)
        else:
            out = await to_thread(tool, **arguments)
        return self._value(out)

    def _value(self, out: Any) -> Any:
        if not isinstance(out, ToolOutput):
            return out
        if out.is_error:
            raise ToolExecutionError(
                out.content or "the tool reported an error",
                tool_name=self.name,
                cause=out.exception,
            )
        parts = tuple(_part(b) for b in out.blocks)
        text = "\n".join(p.text for p in parts if isinstance(p, TextContent))
        media = any(not isinstance(p, TextContent) for p in parts)
        if not media and result_to_text(out.raw_output) == text:
            return out.raw_output  # toolweave would send the same text: keep the plain value
        return ToolExecutionResult(
            text=text, result=out.raw_output, contents=parts if media else None
        )


@overload
def from_llamaindex(obj: BaseTool, *, callbacks: Any = ...) -> LlamaIndexTool: ...


@overload
def from_llamaindex(
    obj: BaseToolSpec | Iterable[BaseTool], *, callbacks: Any = ...
) -> list[LlamaIndexTool]: ...


def from_llamaindex(
    obj: BaseTool | BaseToolSpec | Iterable[BaseTool], *, callbacks: Any = None
) -> LlamaIndexTool | list[LlamaIndexTool]:
    """toolweave tools for LlamaIndex tools: a tool gives one, a tool spec (its
    `to_tool_list()`) or an iterable a list."""
    if isinstance(obj, BaseToolSpec):
        obj = obj.to_tool_list()
    tools, single = _core.many(obj, BaseTool)
    out = [LlamaIndexTool(t, callbacks=callbacks) for t in tools]
    return out[0] if single else out
