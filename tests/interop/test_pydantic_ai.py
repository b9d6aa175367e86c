"""toolweave <-> pydantic-ai: exported tools in agents run by pydantic-ai's `TestModel` and
`FunctionModel`, and pydantic-ai tools and toolsets run by a `ToolService`."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from pydantic import BaseModel
from pydantic_ai import Agent, RunContext, Tool
from pydantic_ai.exceptions import ModelRetry, ToolFailed, UnexpectedModelBehavior
from pydantic_ai.messages import (
    BinaryContent,
    ModelMessage,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturn,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.toolsets import FunctionToolset

from toolweave import (
    AiMessage,
    DefaultToolExecutor,
    ImageContent,
    ScriptedChatModel,
    ToolArgumentsError,
    ToolContext,
    ToolExecutionRequest,
    ToolService,
    tool,
)
from toolweave.interop.pydantic_ai import PydanticAITool, from_pydantic_ai, to_pydantic_ai

from .support import PNG, Recorder, chart, divide, forecast, save_note, slow


def _script(*turns: list[Any] | str) -> FunctionModel:
    """A model answering with the given turns: a list of (tool, args) calls, or text."""
    pending = list(turns)

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        turn = pending.pop(0)
        if isinstance(turn, str):
            return ModelResponse(parts=[TextPart(turn)])
        return ModelResponse(
            parts=[
                ToolCallPart(name, args, tool_call_id=f"c{i}_{len(pending)}")
                for i, (name, args) in enumerate(turn)
            ]
        )

    return FunctionModel(respond)


def _parts(messages: list[ModelMessage], kind: type) -> list[Any]:
    return [p for m in messages for p in m.parts if isinstance(p, kind)]


def _returns(messages: list[ModelMessage], outcome: str) -> list[ToolReturnPart]:
    """The tool results with `outcome` ('success', 'retried' for `ModelRetry`, 'failed')."""
    return [p for p in _parts(messages, ToolReturnPart) if p.outcome == outcome]


# toolweave -> pydantic-ai ------------------------------------------------------------------


def test_exported_tool_definition_is_the_card() -> None:
    exported = to_pydantic_ai(forecast)
    definition = exported.tool_def
    assert definition.name == "forecast"
    assert definition.description == forecast.card.description
    assert definition.parameters_json_schema == forecast.card.input_params


def test_test_model_calls_every_exported_tool() -> None:
    agent = Agent(TestModel(), tools=to_pydantic_ai([forecast, divide]))
    result = agent.run_sync("weather, then divide")
    returns = {p.tool_name: p for p in _parts(result.all_messages(), ToolReturnPart)}
    assert set(returns) == {"forecast", "divide"}
    assert returns["forecast"].content.startswith('{"city":')
    # TestModel sends a=0, b=0: the failure is toolweave's text, as a failed result
    assert returns["divide"].outcome == "failed"
    assert returns["divide"].content == "float division by zero"


def test_bad_arguments_are_a_model_retry_with_toolweaves_message() -> None:
    model = _script(
        [("forecast", '{"days": "three"}')],
        [("forecast", "{'city': 'Paris', 'days': '2',}")],  # repaired by toolweave
        "Sunny in Paris.",
    )
    result = Agent(model, tools=[to_pydantic_ai(forecast)]).run_sync("weather?")
    assert result.output == "Sunny in Paris."
    (retry,) = _returns(result.all_messages(), "retried")
    assert isinstance(retry.content, str)
    assert retry.content.startswith("Invalid arguments for tool 'forecast':")
    assert "- city: missing required argument" in retry.content
    (answer,) = _returns(result.all_messages(), "success")
    assert answer.content == '{"city":"Paris","days":2,"unit":"C"}'


def test_unparseable_arguments_are_a_model_retry_too() -> None:
    model = _script([("forecast", '{"city": "Par')], "ok")
    result = Agent(model, tools=[to_pydantic_ai(forecast)]).run_sync("weather?")
    (retry,) = _returns(result.all_messages(), "retried")
    assert "they stop before the object is complete" in str(retry.content)


def test_arguments_errors_use_pydantic_ais_retry_budget() -> None:
    bad = [("forecast", '{"days": 1}')]
    agent = Agent(_script(bad, bad, bad), tools=[to_pydantic_ai(forecast, max_retries=1)])
    with pytest.raises(UnexpectedModelBehavior, match="exceeded max retries"):
        agent.run_sync("weather?")


def test_a_failure_is_tool_failed_with_toolweaves_text() -> None:
    model = _script([("divide", {"a": 1, "b": 0})], [("slow", {"seconds": 5})], "cannot")
    result = Agent(model, tools=to_pydantic_ai([divide, slow])).run_sync("divide")
    assert result.output == "cannot"
    failed = [str(p.content) for p in _returns(result.all_messages(), "failed")]
    assert failed == [
        "float division by zero",
        "tool 'slow' did not finish within 0.2 s and was cancelled",
    ]
    assert not _returns(result.all_messages(), "retried")  # ToolFailed spends no retry


@dataclass
class Deps:
    notes: dict[str, str] = field(default_factory=dict)


def test_deps_are_the_toolweave_context() -> None:
    deps = Deps()
    model = _script([("save_note", {"text": "buy tea"})], "saved")
    agent = Agent(model, tools=[to_pydantic_ai(save_note)], deps_type=Deps)
    assert agent.run_sync("note it", deps=deps).output == "saved"
    ((call_id, text),) = deps.notes.items()
    assert text == "buy tea" and call_id.startswith("c0_")


def test_the_run_context_reaches_the_tool() -> None:
    seen: list[Any] = []

    @tool
    def who(tool_context: ToolContext) -> str:
        """Who runs me?"""
        seen.append(tool_context.extra["run_context"])
        return "pydantic-ai"

    result = Agent(_script([("who", {})], "done"), tools=[to_pydantic_ai(who)]).run_sync("?")
    assert result.output == "done"
    assert isinstance(seen[0], RunContext) and seen[0].tool_name == "who"


def test_callbacks_fire() -> None:
    recorder = Recorder()
    recorded = tool(forecast.func, callbacks=recorder.framework)
    model = _script([("forecast", {"city": "Oslo"})], [("forecast", {})], "ok")
    Agent(model, tools=[to_pydantic_ai(recorded)]).run_sync("?")
    assert recorder.events == [
        "tool_call_started",
        "tool_call_finished",
        "tool_call_started",
        "tool_call_error",
    ]


def test_media_reaches_the_model_as_binary_content() -> None:
    result = Agent(_script([("chart", {"title": "q3"})], "drawn"), tools=[to_pydantic_ai(chart)])
    run = result.run_sync("chart")
    (part,) = _returns(run.all_messages(), "success")
    text, image = part.content
    assert text == "chart of q3"
    assert isinstance(image, BinaryContent) and image.media_type == "image/png"


def test_a_toolset_of_exported_tools() -> None:
    toolset = FunctionToolset(to_pydantic_ai([forecast, divide]))
    result = Agent(TestModel(), toolsets=[toolset]).run_sync("?")
    assert {p.tool_name for p in _parts(result.all_messages(), ToolReturnPart)} == {
        "forecast",
        "divide",
    }


def test_approval_and_barriers_carry_over() -> None:
    gated = tool(forecast.func, name="gated", requires_approval=True, parallel_safe=False)
    definition = to_pydantic_ai(gated).tool_def
    assert definition.kind == "unapproved"
    assert definition.sequential


# pydantic-ai -> toolweave ------------------------------------------------------------------


class Order(BaseModel):
    item: str
    quantity: int = 1


def price(ctx: RunContext[dict[str, float]], order: Order) -> float:
    """Price an order from the price list in the deps."""
    return ctx.deps[order.item] * order.quantity


async def stock(item: str) -> int:
    """How many are in stock."""
    if item == "unicorn":
        raise ModelRetry("we never stock unicorns; ask for something else")
    if item == "phoenix":
        raise ToolFailed("the phoenix supplier is offline")
    return 3


def test_imported_card_uses_pydantic_ais_schema() -> None:
    native = Tool(price)
    imported = from_pydantic_ai(native)
    assert isinstance(imported, PydanticAITool)
    assert imported.card.name == "price"
    assert imported.card.description == native.tool_def.description
    assert imported.card.input_params == native.tool_def.parameters_json_schema


def test_deps_come_from_the_callers_context() -> None:
    imported = from_pydantic_ai(Tool(price))
    call = ToolExecutionRequest(id="c1", name="price", arguments='{"item": "tea", "quantity": "2"}')
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[call]), AiMessage("9.0")])
    result = ToolService().tools(imported).chat(model, None, "price?", context={"tea": 4.5})
    assert result.tool_executions[0].result.text == "9.0"
    assert result.tool_executions[0].raw_result == 9.0


def test_model_retry_is_an_arguments_error_and_tool_failed_an_error_result() -> None:
    imported = from_pydantic_ai(stock)
    with pytest.raises(ToolArgumentsError, match="we never stock unicorns"):
        imported.invoke({"item": "unicorn"})
    result = DefaultToolExecutor(imported).execute_with_result(
        ToolExecutionRequest(id="c1", name="stock", arguments='{"item": "phoenix"}')
    )
    assert result.is_error and result.text == "the phoenix supplier is offline"
    assert asyncio.run(imported.ainvoke({"item": "tea"})) == 3


def test_model_retry_counts_against_the_services_retry_budget() -> None:
    imported = from_pydantic_ai(stock)
    unicorn = ToolExecutionRequest(id="c1", name="stock", arguments='{"item": "unicorn"}')
    tea = ToolExecutionRequest(id="c2", name="stock", arguments='{"item": "tea"}')
    model = ScriptedChatModel(
        [
            AiMessage(tool_execution_requests=[unicorn]),
            AiMessage(tool_execution_requests=[tea]),
            AiMessage("3 teas in stock"),
        ]
    )
    result = ToolService().tools(imported).chat(model, None, "stock?")
    first, second = result.tool_executions
    assert first.result.is_error
    assert "we never stock unicorns" in first.result.text
    assert second.result.text == "3"


def test_tool_returns_and_media_map_to_results() -> None:
    def report(topic: str) -> ToolReturn[Any]:
        """A report with a chart."""
        import base64

        image = BinaryContent(data=base64.b64decode(PNG), media_type="image/png")
        return ToolReturn(return_value=[f"report on {topic}", image], metadata={"pages": 2})

    result = DefaultToolExecutor(from_pydantic_ai(report)).execute_with_result(
        ToolExecutionRequest(id="c1", name="report", arguments='{"topic": "tea"}')
    )
    assert result.text == "report on tea"
    assert result.contents is not None
    assert isinstance(result.contents[1], ImageContent)
    assert result.contents[1].data == PNG
    assert result.attributes["metadata"] == {"pages": 2}


def test_a_function_toolset_gives_a_list() -> None:
    toolset = FunctionToolset([price, stock])
    assert [t.name for t in from_pydantic_ai(toolset)] == ["price", "stock"]


def test_imported_tools_run_in_a_tool_service_with_pydantic_ais_validation() -> None:
    imported = from_pydantic_ai(Tool(price))
    bad = ToolExecutionRequest(id="c1", name="price", arguments='{"quantity": 2}')
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[bad]), AiMessage("?")])
    result = ToolService().tools(imported).chat(model, None, "price?", context={})
    assert result.tool_executions[0].result.is_error
    assert "item" in result.tool_executions[0].result.text
