"""The interop adapters' cost per call, against calling the framework's own tool directly.

For each framework installed (toolweave.interop; the dev extra pins them), two comparisons
with the same function body:

- export: the framework calls a toolweave tool (`to_<framework>`) the way its agent does —
  LangChain `BaseTool.invoke(ToolCall)`, pydantic-ai validate + `FunctionSchema.call`,
  OpenAI Agents `on_invoke_tool(ctx, json)`, LlamaIndex `call(**kwargs)` — against the same
  call on the framework's native tool of that function;
- import: toolweave runs the framework's tool (`from_<framework>`) through
  `DefaultToolExecutor` from the model's raw JSON, against the framework's direct call.

A missing framework's rows are left out.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
from collections.abc import Callable
from typing import Any

from toolweave import DefaultToolExecutor, ToolExecutionRequest, tool

from ._harness import Case, Row, async_case, measure, sync_case

RAW = '{"city": "Paris", "days": 3, "metric": true}'
ARGS = json.loads(RAW)


def forecast(city: str, days: int = 1, metric: bool = True) -> dict[str, Any]:
    """Weather forecast for a city.

    Args:
        city: the city name
        days: how many days
        metric: metric units
    """
    return {"city": city, "days": days, "unit": "C" if metric else "F"}


async def aforecast(city: str, days: int = 1, metric: bool = True) -> dict[str, Any]:
    """Weather forecast for a city.

    Args:
        city: the city name
        days: how many days
        metric: metric units
    """
    return {"city": city, "days": days, "unit": "C" if metric else "F"}


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:
        return False


def _import_case(
    name: str, imported: Any, baseline: str, loop: asyncio.AbstractEventLoop | None, number: int
) -> Case:
    executor = DefaultToolExecutor(imported)
    request = ToolExecutionRequest(id="call_1", name=imported.name, arguments=RAW)
    if loop is None:
        return sync_case(
            name, lambda: executor.execute_with_result(request), baseline=baseline, number=number
        )
    return async_case(
        name, lambda: executor.aexecute_with_result(request), loop, baseline=baseline, number=number
    )


def _langchain(loop: asyncio.AbstractEventLoop) -> list[Case]:
    from langchain_core.messages import ToolCall
    from langchain_core.tools import StructuredTool

    from toolweave.interop.langchain import from_langchain, to_langchain

    native = StructuredTool.from_function(forecast)
    exported = to_langchain(tool(forecast))
    call = ToolCall(name="forecast", args=ARGS, id="call_1", type="tool_call")
    direct = "langchain: native StructuredTool.invoke(ToolCall)"
    return [
        sync_case(direct, lambda: native.invoke(call), number=1000),
        sync_case(
            "langchain: to_langchain(tool).invoke(ToolCall)",
            lambda: exported.invoke(call),
            baseline=direct,
            number=1000,
        ),
        _import_case(
            "langchain: from_langchain(native) via DefaultToolExecutor",
            from_langchain(native),
            direct,
            None,
            1000,
        ),
    ]


def _pydantic_ai(loop: asyncio.AbstractEventLoop) -> list[Case]:
    from pydantic_ai import RunContext, Tool
    from pydantic_ai.models.test import TestModel
    from pydantic_ai.usage import RunUsage

    from toolweave.interop.pydantic_ai import from_pydantic_ai, to_pydantic_ai

    native = Tool(aforecast)
    exported = to_pydantic_ai(tool(aforecast))
    ctx: RunContext[None] = RunContext(
        deps=None, model=TestModel(), usage=RunUsage(), tool_call_id="call_1"
    )

    def through(t: Tool[Any]) -> Callable[[], Any]:
        schema = t.function_schema

        async def run() -> Any:  # what pydantic-ai's tool manager does per call
            return await schema.call(schema.validator.validate_json(RAW), ctx)

        return run

    direct = "pydantic-ai: native Tool, validate_json + call"
    return [
        async_case(direct, through(native), loop, number=2000),
        async_case(
            "pydantic-ai: to_pydantic_ai(tool), validate_json + call",
            through(exported),
            loop,
            baseline=direct,
            number=2000,
        ),
        _import_case(
            "pydantic-ai: from_pydantic_ai(native) via DefaultToolExecutor",
            from_pydantic_ai(native),
            direct,
            loop,
            2000,
        ),
    ]


def _openai_agents(loop: asyncio.AbstractEventLoop) -> list[Case]:
    from agents import function_tool
    from agents.tool_context import ToolContext as AgentsToolContext

    from toolweave.interop.openai_agents import from_openai_agents, to_openai_agents

    native = function_tool(aforecast)
    exported = to_openai_agents(tool(aforecast))
    ctx = AgentsToolContext(None, tool_name="aforecast", tool_call_id="call_1", tool_arguments=RAW)
    direct = "openai-agents: native function_tool.on_invoke_tool"
    return [
        async_case(direct, lambda: native.on_invoke_tool(ctx, RAW), loop, number=2000),
        async_case(
            "openai-agents: to_openai_agents(tool).on_invoke_tool",
            lambda: exported.on_invoke_tool(ctx, RAW),
            loop,
            baseline=direct,
            number=2000,
        ),
        _import_case(
            "openai-agents: from_openai_agents(native) via DefaultToolExecutor",
            from_openai_agents(native),
            direct,
            loop,
            2000,
        ),
    ]


def _llamaindex(loop: asyncio.AbstractEventLoop) -> list[Case]:
    from llama_index.core.tools import FunctionTool

    from toolweave.interop.llamaindex import from_llamaindex, to_llamaindex

    native = FunctionTool.from_defaults(forecast)
    exported = to_llamaindex(tool(forecast))
    direct = "llamaindex: native FunctionTool.call(**kwargs)"
    return [
        sync_case(direct, lambda: native.call(**ARGS), number=1000),
        sync_case(
            "llamaindex: to_llamaindex(tool).call(**kwargs)",
            lambda: exported.call(**ARGS),
            baseline=direct,
            number=1000,
        ),
        _import_case(
            "llamaindex: from_llamaindex(native) via DefaultToolExecutor",
            from_llamaindex(native),
            direct,
            None,
            1000,
        ),
    ]


FRAMEWORKS: list[tuple[str, str, Callable[[asyncio.AbstractEventLoop], list[Case]]]] = [
    ("langchain", "langchain_core", _langchain),
    ("pydantic-ai", "pydantic_ai", _pydantic_ai),
    ("openai-agents", "agents", _openai_agents),
    ("llamaindex", "llama_index.core", _llamaindex),
]


def run(quick: bool) -> list[Row]:
    """The adapters' workloads, one group per installed framework, measured interleaved."""
    rows: list[Row] = []
    loop = asyncio.new_event_loop()
    try:
        for group, module, cases in FRAMEWORKS:
            if _installed(module):
                rows.extend(measure(f"interop {group}", cases(loop), quick=quick))
    finally:
        loop.run_until_complete(loop.shutdown_default_executor())
        loop.close()
    return rows
