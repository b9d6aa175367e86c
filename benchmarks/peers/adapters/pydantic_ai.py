"""pydantic-ai-slim: `Tool`, `FunctionToolset`, the run's `ToolManager` (validation, call,
retry prompt), `Agent` with `FunctionModel`, the streaming parts manager, and the OpenAI
model's per-request tool mapping."""

from __future__ import annotations

import itertools
from typing import Any

from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai._parts_manager import ModelResponsePartsManager
from pydantic_ai.exceptions import ToolRetryError
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models import ModelRequestParameters
from pydantic_ai.models.function import FunctionModel
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.openai import OpenAIProvider
from pydantic_ai.tool_manager import ToolManager
from pydantic_ai.toolsets import FunctionToolset
from pydantic_ai.usage import RunUsage

from .. import _subject
from .._common import (
    BAD_ARGS,
    RAW_ARGS,
    W5_CALLS,
    W6_ROUNDS,
    Case,
    Env,
    async_case,
    expected_stream_arguments,
    na,
    stream_chunks,
    sync_case,
)

NAME = "pydantic_ai"
DISTRIBUTIONS = ("pydantic-ai-slim", "pydantic", "griffe")
IMPORTS = ("import pydantic_ai", "from pydantic_ai import Tool")
"""I: importing the package, and importing what declaring a tool needs."""


def _scripted(script: list[ModelResponse]) -> FunctionModel:
    cursor = itertools.cycle(script)
    return FunctionModel(lambda messages, info: next(cursor))


def _aggregate(chunks: list[dict[str, Any]]) -> list[Any]:
    # what OpenAIStreamedResponse._map_tool_call_delta does for every chunk
    manager = ModelResponsePartsManager(ModelRequestParameters())
    for chunk in chunks:
        for choice in chunk["choices"]:
            for frag in choice["delta"].get("tool_calls") or ():
                fn = frag.get("function") or {}
                for _event in manager.handle_tool_call_delta_events(
                    vendor_part_id=frag.get("index"),
                    tool_name=fn.get("name"),
                    args=fn.get("arguments"),
                    tool_call_id=frag.get("id"),
                ):
                    pass
    return manager.get_parts()


def cases(env: Env) -> list[Case]:
    loop = env.loop
    sync_tool = Tool(_subject.search_flights)
    async_tool = Tool(_subject.asearch_flights)
    toolset = FunctionToolset([sync_tool, async_tool], max_retries=1)
    ctx = RunContext(deps=None, model=TestModel(), usage=RunUsage())
    manager = loop.run_until_complete(ToolManager(toolset).for_run_step(ctx))

    def declare() -> Any:
        return Tool(_subject.fresh(_subject.search_flights)).tool_def

    async def call(name: str, args: str) -> str:
        # ToolManager.handle_call validates the raw JSON, runs the tool; the agent graph
        # wraps the result in a ToolReturnPart whose text goes to the model
        result = await manager.handle_call(ToolCallPart(name, args, "call_1"))
        return ToolReturnPart(name, result, "call_1").model_response_str()

    async def w3() -> str:
        return await call("asearch_flights", RAW_ARGS)

    async def w3s() -> str:
        return await call("search_flights", RAW_ARGS)

    async def w4() -> str:
        try:
            await manager.handle_call(ToolCallPart("search_flights", BAD_ARGS, "call_1"))
        except ToolRetryError as e:
            text = e.tool_retry.model_response_str()
            assert "max_stops" in text and "airlines" in text, text
            return text
        raise AssertionError("invalid arguments were accepted")

    fan_out = ModelResponse(
        parts=[ToolCallPart("wait_20ms", {"i": i}, f"call_{i}") for i in range(W5_CALLS)]
    )
    w5_agent = Agent(
        _scripted([fan_out, ModelResponse(parts=[TextPart("done")])]),
        tools=[Tool(_subject.wait_20ms)],
    )

    async def w5() -> Any:
        result = await w5_agent.run("go")
        assert result.output == "done"
        return result

    w6_script = [
        ModelResponse(parts=[ToolCallPart("ping", {"n": r}, f"call_{r}")]) for r in range(W6_ROUNDS)
    ] + [ModelResponse(parts=[TextPart("done")])]
    w6_agent = Agent(_scripted(w6_script), tools=[Tool(_subject.ping)])

    async def w6() -> Any:
        result = await w6_agent.run("go")
        assert len(result.all_messages()) == 2 * W6_ROUNDS + 2
        return result

    chunks = stream_chunks()
    assert [p.args for p in _aggregate(chunks)] == expected_stream_arguments()

    out: list[Case] = [
        sync_case("W1.cold", "Tool(new function).tool_def", declare),
        sync_case(
            "W1.cached", "tool.tool_def (schema built at construction)", lambda: sync_tool.tool_def
        ),
        na("W2", "invoke sync", "no synchronous tool-call API: tools run inside async agent runs"),
        async_case("W3", "ToolManager.handle_call + ToolReturnPart text", w3, loop, baseline="W0a"),
        async_case("W3s", "same, sync function (anyio worker thread)", w3s, loop, baseline="W0t"),
        async_case(
            "W4",
            "ToolManager.handle_call -> ToolRetryError retry prompt text",
            w4,
            loop,
            baseline="W0a",
            note="async only (ratio to the async W0)",
        ),
        async_case("W5", "Agent(FunctionModel).run: 50 calls", w5, loop, baseline="W5.one"),
        async_case(
            "W6",
            "Agent(FunctionModel).run, per round",
            w6,
            loop,
            baseline="W6.plain",
            per=W6_ROUNDS,
        ),
        sync_case(
            "W7",
            "ModelResponsePartsManager.handle_tool_call_delta_events",
            lambda: _aggregate(chunks),
            baseline="W7.plain",
        ),
    ]
    model = OpenAIChatModel("gpt-4o", provider=OpenAIProvider(api_key="unused"))
    for n in env.sizes:
        tools = [
            Tool(_subject.lookup, name=f"tool_{i}", description=f"Tool number {i}: look a key up.")
            for i in range(n)
        ]
        big = FunctionToolset(tools)
        big_manager = loop.run_until_complete(ToolManager(big).for_run_step(ctx))
        names = [f"tool_{i}" for i in range(0, n, max(1, n // 100))]

        async def request_tools(big: Any = big) -> list[Any]:
            # every run step: resolve the toolset's tools, let the model's profile transform the
            # schemas, map them to Chat Completions `tools`
            step = await ToolManager(big).for_run_step(ctx)
            params = model.customize_request_parameters(
                ModelRequestParameters(function_tools=step.tool_defs)
            )
            return [model._map_tool_definition(t, {}) for t in params.function_tools]

        def lookups(names: list[str] = names, table: Any = big_manager.tools) -> None:
            for name in names:
                table[name]

        out += [
            sync_case(
                f"W8.register.{n}",
                f"FunctionToolset({n} tools)",
                lambda t=tools: FunctionToolset(t),
            ),
            async_case(
                f"W8.request.{n}",
                "ToolManager.for_run_step + customize_request_parameters + _map_tool_definition",
                request_tools,
                loop,
            ),
            sync_case(f"W8.lookup.{n}", "ToolManager.tools[name]", lookups, per=len(names)),
        ]
    return out
