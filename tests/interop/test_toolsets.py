"""A toolweave `Toolset` handed to another framework: pydantic-ai asks it at every step;
LangChain, LlamaIndex and the OpenAI Agents SDK get its tools of a first step. Calls go
through the set's own executors, so its transforms apply."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")
pytest.importorskip("langchain_core")
pytest.importorskip("llama_index.core")
pytest.importorskip("agents")

from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from toolweave import ToolExecutionRequest, ToolExecutionResult
from toolweave.interop.langchain import to_langchain
from toolweave.interop.llamaindex import to_llamaindex
from toolweave.interop.openai_agents import to_openai_agents
from toolweave.interop.pydantic_ai import to_pydantic_ai
from toolweave.toolsets import FunctionToolset, StepContext, Toolset

from .support import divide, forecast


def _logged(calls: list[str]) -> Any:
    async def around(request: ToolExecutionRequest, call_next: Any) -> ToolExecutionResult:
        calls.append(request.name)
        result: ToolExecutionResult = await call_next(request)
        return result

    return around


def _prefixed_set(calls: list[str]) -> Toolset:
    return FunctionToolset(forecast, divide).prefixed("w").wrapped(_logged(calls))


# pydantic-ai: asked at every step ----------------------------------------------------------


def test_pydantic_ai_asks_the_toolset_at_every_step() -> None:
    asked: list[int] = []

    def by_round(ctx: StepContext, card: Any) -> bool:
        asked.append(ctx.round)
        return card.name == ("forecast" if ctx.round == 0 else "divide")

    offered: list[list[str]] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        names = [t.name for t in info.function_tools]
        offered.append(names)
        if len(offered) == 1:
            return ModelResponse(parts=[ToolCallPart("forecast", {"city": "Oslo"}, "c1")])
        if len(offered) == 2:
            return ModelResponse(parts=[ToolCallPart("divide", {"a": 6, "b": 3}, "c2")])
        return ModelResponse(parts=[TextPart("done")])

    toolset = FunctionToolset(forecast, divide).filtered(by_round)
    result = Agent(FunctionModel(respond), toolsets=[to_pydantic_ai(toolset)]).run_sync("?")
    assert result.output == "done"
    assert offered == [["forecast"], ["divide"], ["divide"]]
    assert sorted(set(asked)) == [0, 1, 2]


def test_pydantic_ai_calls_run_through_the_sets_transforms() -> None:
    calls: list[str] = []

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if len(messages) == 1:
            assert sorted(t.name for t in info.function_tools) == ["w_divide", "w_forecast"]
            return ModelResponse(parts=[ToolCallPart("w_divide", {"a": 6, "b": 3}, "c1")])
        return ModelResponse(parts=[TextPart(str(messages[-1].parts[0].content))])  # type: ignore[union-attr]

    agent = Agent(FunctionModel(respond), toolsets=[to_pydantic_ai(_prefixed_set(calls))])
    assert agent.run_sync("?").output == "2.0"
    assert calls == ["w_divide"]


# the others: the tools of a first step -------------------------------------------------------


def test_langchain_gets_the_sets_tools() -> None:
    calls: list[str] = []
    tools = {t.name: t for t in to_langchain(_prefixed_set(calls))}
    assert sorted(tools) == ["w_divide", "w_forecast"]
    assert tools["w_divide"].invoke({"a": 6, "b": 3}) == "2.0"
    assert calls == ["w_divide"]


def test_llamaindex_gets_the_sets_tools() -> None:
    calls: list[str] = []
    tools = {t.metadata.name: t for t in to_llamaindex(_prefixed_set(calls))}
    assert sorted(tools) == ["w_divide", "w_forecast"]
    assert tools["w_divide"].call(a=6, b=3).content == "2.0"
    assert calls == ["w_divide"]


def test_openai_agents_gets_the_sets_tools() -> None:
    from agents.tool_context import ToolContext as AgentsToolContext

    calls: list[str] = []
    tools = {t.name: t for t in to_openai_agents(_prefixed_set(calls))}
    assert sorted(tools) == ["w_divide", "w_forecast"]
    args = json.dumps({"a": 6, "b": 3})
    ctx = AgentsToolContext(
        context=None, tool_name="w_divide", tool_call_id="c1", tool_arguments=args
    )
    assert asyncio.run(tools["w_divide"].on_invoke_tool(ctx, args)) == "2.0"
    assert calls == ["w_divide"]


def test_a_tool_the_caller_answers_cannot_be_exported() -> None:
    toolset = FunctionToolset(divide).deferred("lookup")
    with pytest.raises(TypeError, match="'lookup' of FunctionToolset is answered by the caller"):
        to_langchain(toolset)
