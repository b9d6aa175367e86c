"""LangChain: toolweave tools as LangChain tools (`to_langchain`) and LangChain tools, toolkits
included, as toolweave tools (`from_langchain`). Needs `langchain-core` (extra `langchain`).

Exported: a `ToolweaveLangChainTool` (a `BaseTool`) whose `args_schema` is the card's JSON
Schema and whose `_run` / `_arun` call the toolweave tool through `Tool.invoke` / `ainvoke`:
toolweave parses, validates and repairs the arguments, applies the timeout and fires its
callbacks; LangChain's own callbacks run around it. Failures are `ToolException`s carrying
toolweave's text (`handle_tool_error=True` by default, so the model reads them, as in a
`ToolService`). Results are `content_and_artifact`: the content is the text (or content
blocks) the model would get from toolweave, the artifact the tool's raw return value.

Imported: a `LangChainTool` whose card has the tool's name, description and the JSON Schema
LangChain sends to a model (`convert_to_openai_tool`; injected arguments left out, as there),
`return_direct` as `ReturnBehavior.IMMEDIATE`. A `ToolException` is an error result, a
pydantic error of its `args_schema` a `ToolArgumentsError`, a `ToolMessage` with
`status="error"` an error result; `(content, artifact)` results keep both.
"""

from __future__ import annotations

import contextvars
import json
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal, overload

try:
    from langchain_core.messages import ToolCall, ToolMessage
    from langchain_core.runnables import RunnableConfig
    from langchain_core.tools import (
        BaseTool,
        BaseToolkit,
        InjectedToolCallId,
        StructuredTool,
        ToolException,
    )
    from langchain_core.tools import Tool as SimpleTool
    from langchain_core.utils.function_calling import convert_to_openai_tool
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        "toolweave.interop.langchain needs langchain-core: pip install 'toolweave[langchain]'"
    ) from e

import pydantic
from pydantic import BaseModel, PrivateAttr

from .._utils.jsoncopy import copy_json
from .._utils.sync import run_sync
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

__all__ = ["LangChainTool", "ToolweaveLangChainTool", "from_langchain", "to_langchain"]

_CALL: contextvars.ContextVar[tuple[str | None, RunnableConfig | None]] = contextvars.ContextVar(
    "toolweave_langchain_call", default=(None, None)
)
"""The tool call id and config of the LangChain call running here (`run` sets them; `_run`
does not receive them when the schema is a JSON Schema)."""


# toolweave -> LangChain ---------------------------------------------------------------------


class ToolweaveLangChainTool(BaseTool):
    """A toolweave `Tool` as a LangChain tool (see the module docstring); build it with
    `to_langchain`. `toolweave_tool` is the wrapped tool."""

    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact"
    handle_tool_error: Any = True
    _tw: Tool = PrivateAttr()
    _input_model: type[BaseModel] | None = PrivateAttr(default=None)

    def __init__(self, tool: Tool, **kwargs: Any) -> None:
        card = tool.card
        kwargs.setdefault("return_direct", card.return_behavior is not ReturnBehavior.TO_LLM)
        super().__init__(
            name=card.name,
            description=card.description,
            args_schema=copy_json(card.input_params),
            **kwargs,
        )
        self._tw = tool

    @property
    def toolweave_tool(self) -> Tool:
        """The toolweave tool this LangChain tool calls."""
        return self._tw

    def get_input_schema(self, config: RunnableConfig | None = None) -> type[BaseModel]:
        """A pydantic model of the card's schema, validating as the toolweave tool does."""
        if self._input_model is None:
            self._input_model = _core.schema_model(self._tw)
        return self._input_model

    def run(self, tool_input: str | dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        """LangChain's `run`, with the call id and config kept for the toolweave call."""
        token = _CALL.set((kwargs.get("tool_call_id"), kwargs.get("config")))
        try:
            return super().run(tool_input, *args, **kwargs)
        finally:
            _CALL.reset(token)

    async def arun(self, tool_input: str | dict[str, Any], *args: Any, **kwargs: Any) -> Any:
        """LangChain's `arun`, with the call id and config kept for the toolweave call."""
        token = _CALL.set((kwargs.get("tool_call_id"), kwargs.get("config")))
        try:
            return await super().arun(tool_input, *args, **kwargs)
        finally:
            _CALL.reset(token)

    def _call_options(self) -> dict[str, Any]:
        call_id, config = _CALL.get()
        configurable = (config or {}).get("configurable") or {}
        return {
            "call_id": call_id,
            "context": configurable,
            "memory_id": configurable.get("thread_id"),
            "extra": {"config": config} if config is not None else None,
        }

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        try:
            result = _core.call(self._tw, kwargs, **self._call_options())
        except ToolArgumentsError as e:
            raise ToolException(e.message) from e
        return self._output(result)

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        try:
            result = await _core.acall(self._tw, kwargs, **self._call_options())
        except ToolArgumentsError as e:
            raise ToolException(e.message) from e
        return self._output(result)

    def _output(self, result: ToolExecutionResult) -> Any:
        if result.is_error:
            raise ToolException(result.result_text()) from result.error
        content = _to_blocks(result)
        if self.response_format == "content_and_artifact":
            return content, result.result
        return content


def _to_blocks(result: ToolExecutionResult) -> str | list[str | dict[str, Any]]:
    """The LangChain message content for a result: its text, or content blocks when the tool
    returned media (parts for the user only are left out: they stay in the artifact)."""
    parts = result.contents
    if not parts or all(isinstance(p, TextContent) for p in parts):
        return result.result_text()
    blocks: list[str | dict[str, Any]] = []
    for part in parts:
        if not part.for_model:
            continue
        if isinstance(part, TextContent):
            blocks.append({"type": "text", "text": part.text})
        elif isinstance(part, (ImageContent, AudioContent, FileContent)):
            kind = {ImageContent: "image", AudioContent: "audio", FileContent: "file"}[type(part)]
            block: dict[str, Any] = {"type": kind, "mime_type": part.mime_type}
            if part.data is not None:
                block["base64"] = part.data
            else:
                block["url"] = part.url
            if isinstance(part, FileContent) and part.name:
                block["filename"] = part.name
            blocks.append(block)
        elif isinstance(part, EmbeddedResource) and part.text is not None:
            blocks.append({"type": "text", "text": part.text})
        else:
            blocks.append({"type": "text", "text": part.describe()})
    return blocks


@overload
def to_langchain(
    tool_or_tools: Tool,
    *,
    response_format: Literal["content", "content_and_artifact"] = ...,
    handle_tool_error: Any = ...,
) -> ToolweaveLangChainTool: ...


@overload
def to_langchain(
    tool_or_tools: Iterable[Tool],
    *,
    response_format: Literal["content", "content_and_artifact"] = ...,
    handle_tool_error: Any = ...,
) -> list[ToolweaveLangChainTool]: ...


def to_langchain(
    tool_or_tools: Tool | Iterable[Tool],
    *,
    response_format: Literal["content", "content_and_artifact"] = "content_and_artifact",
    handle_tool_error: Any = True,
) -> ToolweaveLangChainTool | list[ToolweaveLangChainTool]:
    """LangChain tools for toolweave tools: one tool gives one, an iterable a list.

    `response_format="content"` returns only the text; `handle_tool_error` is LangChain's
    (True: the model reads toolweave's error text; False: the `ToolException` is raised)."""
    tools, single = _core.many(tool_or_tools, Tool)
    out = [
        ToolweaveLangChainTool(
            t, response_format=response_format, handle_tool_error=handle_tool_error
        )
        for t in tools
    ]
    return out[0] if single else out


# LangChain -> toolweave ---------------------------------------------------------------------


def _schema_of(lc_tool: BaseTool) -> dict[str, Any]:
    if isinstance(lc_tool.args_schema, dict):
        schema: dict[str, Any] = copy_json(lc_tool.args_schema)
        return schema
    params = convert_to_openai_tool(lc_tool)["function"].get("parameters") or {}
    return dict(params)


def _is_tool_call_id(field: Any) -> bool:
    for meta in getattr(field, "metadata", ()):
        if meta is InjectedToolCallId or isinstance(meta, InjectedToolCallId):
            return True
    return False


class LangChainTool(Tool):
    """A LangChain tool (`BaseTool`) as a toolweave tool; build it with `from_langchain`.

    Arguments LangChain injects (`InjectedToolArg`, left out of the model's schema) are
    looked up as `Injected` values are: the call's keywords, `injected=`, `ToolContext.extra`,
    the caller's context object. `langchain_tool` is the wrapped tool."""

    def __init__(self, langchain_tool: BaseTool, *, callbacks: Any = None) -> None:
        card = _core.card_from(
            framework="langchain",
            name=langchain_tool.name,
            description=langchain_tool.description,
            schema=_schema_of(langchain_tool),
            return_direct=langchain_tool.return_direct,
        )
        super().__init__(card, callbacks=callbacks)
        self.langchain_tool = langchain_tool
        schema = langchain_tool.args_schema
        injected: list[str] = []
        wants_call_id = False
        if isinstance(schema, type) and issubclass(schema, BaseModel):
            visible = set(card.input_params.get("properties") or {})
            for name, field in schema.model_fields.items():
                if _is_tool_call_id(field):
                    wants_call_id = True
                elif name not in visible:
                    injected.append(name)
        self._injected = tuple(injected)
        # A ToolMessage tells errors and artifacts apart; a plain call keeps the raw value.
        self._as_tool_call = (
            wants_call_id
            or langchain_tool.response_format == "content_and_artifact"
            or bool(langchain_tool.handle_tool_error)
            or bool(langchain_tool.handle_validation_error)
        )
        if isinstance(langchain_tool, (StructuredTool, SimpleTool)):
            self._sync = langchain_tool.func is not None
            self._native_async = langchain_tool.coroutine is not None
        else:
            self._sync = True
            self._native_async = type(langchain_tool)._arun is not BaseTool._arun

    def _async_first(self) -> bool:
        return self._native_async or not self._sync

    def _input(
        self, inputs: dict[str, Any], kwargs: Mapping[str, Any]
    ) -> dict[str, Any] | ToolCall:
        args = dict(inputs)
        for name in self._injected:
            value = _core.lookup_injected(name, kwargs)
            if value is not _core.MISSING:
                args[name] = value
        if not self._as_tool_call:
            return args
        ctx = _core.context_of(self, kwargs)
        call_id = ctx.request_id or f"call_{uuid.uuid4().hex[:24]}"
        return ToolCall(name=self.langchain_tool.name, args=args, id=call_id, type="tool_call")

    def invoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        if not self._sync:
            return run_sync(self.ainvoke_internal(inputs, **kwargs))
        try:
            out = self.langchain_tool.invoke(self._input(inputs, kwargs))
        except pydantic.ValidationError as e:
            raise _core.arguments_error(self.name, e) from e
        return self._value(out)

    async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        try:
            out = await self.langchain_tool.ainvoke(self._input(inputs, kwargs))
        except pydantic.ValidationError as e:
            raise _core.arguments_error(self.name, e) from e
        return self._value(out)

    def _value(self, out: Any) -> Any:
        if not isinstance(out, ToolMessage):
            return out
        text, parts = _from_blocks(out.content)
        if out.status == "error":
            raise ToolExecutionError(text or "the tool reported an error", tool_name=self.name)
        if parts is None and (out.artifact is None or result_to_text(out.artifact) == text):
            return text if out.artifact is None else out.artifact
        raw = out.artifact if out.artifact is not None else out.content
        return ToolExecutionResult(text=text, result=raw, contents=parts)


def _from_blocks(content: str | Sequence[Any]) -> tuple[str, tuple[ContentPart, ...] | None]:
    """The text of a LangChain message content, and its parts when it has more than text."""
    if isinstance(content, str):
        return content, None
    parts: list[ContentPart] = []
    for block in content:
        if isinstance(block, str):
            parts.append(TextContent(text=block))
            continue
        if not isinstance(block, Mapping):
            parts.append(TextContent(text=str(block)))
            continue
        kind = block.get("type")
        if kind == "text":
            parts.append(TextContent(text=str(block.get("text", ""))))
        elif kind in ("image", "audio", "file"):
            fields: dict[str, Any] = {}
            if block.get("base64") is not None or block.get("data") is not None:
                fields["data"] = block.get("base64") or block.get("data")
            elif block.get("url") is not None:
                fields["url"] = block["url"]
            if block.get("mime_type"):
                fields["mime_type"] = block["mime_type"]
            if kind == "file" and block.get("filename"):
                fields["name"] = block["filename"]
            if kind == "image":
                parts.append(ImageContent(**fields))
            elif kind == "audio":
                parts.append(AudioContent(**fields))
            else:
                parts.append(FileContent(**fields))
        elif kind == "image_url":
            image = block.get("image_url")
            url = image.get("url") if isinstance(image, Mapping) else image
            parts.append(ImageContent(url=str(url)))
        else:
            parts.append(TextContent(text=json.dumps(dict(block), ensure_ascii=False, default=str)))
    text = "\n".join(p.text for p in parts if isinstance(p, TextContent))
    if all(isinstance(p, TextContent) for p in parts):
        return text, None
    return text, tuple(parts)


@overload
def from_langchain(obj: BaseTool, *, callbacks: Any = ...) -> LangChainTool: ...


@overload
def from_langchain(
    obj: BaseToolkit | Iterable[BaseTool], *, callbacks: Any = ...
) -> list[LangChainTool]: ...


def from_langchain(
    obj: BaseTool | BaseToolkit | Iterable[BaseTool], *, callbacks: Any = None
) -> LangChainTool | list[LangChainTool]:
    """toolweave tools for LangChain tools: a `BaseTool` gives one, a toolkit (its
    `get_tools()`) or an iterable a list. `callbacks` is the toolweave `CallbackFramework`
    the tools report to (the global one by default)."""
    if isinstance(obj, BaseToolkit):
        obj = obj.get_tools()
    tools, single = _core.many(obj, BaseTool)
    out = [LangChainTool(t, callbacks=callbacks) for t in tools]
    return out[0] if single else out
