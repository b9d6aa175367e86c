"""toolweave <-> OpenAI Agents SDK: exported tools run by the SDK's `Runner` with a scripted
model of our own (built on the SDK's `Model` interface), and function tools run by a
`ToolService`."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import pytest

pytest.importorskip("agents")

from agents import (
    Agent,
    FunctionTool,
    Model,
    ModelResponse,
    RunContextWrapper,
    Runner,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.items import ToolCallOutputItem
from agents.models.interface import ModelTracing
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from toolweave import (
    AiMessage,
    DefaultToolExecutor,
    ScriptedChatModel,
    ToolArgumentsError,
    ToolExecutionRequest,
    ToolService,
    tool,
)
from toolweave.dialects import openai_tool
from toolweave.interop.openai_agents import OpenAIAgentsTool, from_openai_agents, to_openai_agents

from .support import Recorder, chart, divide, forecast, save_note, slow

set_tracing_disabled(True)


class ScriptedAgentsModel(Model):
    """A model for the SDK's Runner that replays turns: a list of (tool, JSON arguments)
    calls, or a final text. The inputs it received are kept in `inputs`."""

    def __init__(self, *turns: list[tuple[str, str]] | str) -> None:
        self.turns = list(turns)
        self.inputs: list[Any] = []
        self.tools: list[Any] = []

    async def get_response(
        self,
        system_instructions: str | None,
        input: Any,
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: Any,
        **kwargs: Any,
    ) -> ModelResponse:
        self.inputs.append(input)
        self.tools = tools
        turn = self.turns.pop(0)
        output: list[Any]
        if isinstance(turn, str):
            text = ResponseOutputText(type="output_text", text=turn, annotations=[])
            output = [
                ResponseOutputMessage(
                    id="msg", type="message", role="assistant", status="completed", content=[text]
                )
            ]
        else:
            output = [
                ResponseFunctionToolCall(
                    type="function_call",
                    id=f"fc_{len(self.inputs)}_{i}",
                    call_id=f"call_{len(self.inputs)}_{i}",
                    name=name,
                    arguments=arguments,
                    status="completed",
                )
                for i, (name, arguments) in enumerate(turn)
            ]
        return ModelResponse(output=output, usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("the tests run the Runner without streaming")


def _outputs(result: Any) -> list[Any]:
    return [item.output for item in result.new_items if isinstance(item, ToolCallOutputItem)]


# toolweave -> OpenAI Agents ----------------------------------------------------------------


def test_exported_tool_is_a_function_tool_with_toolweaves_openai_schema() -> None:
    exported = to_openai_agents(forecast)
    assert isinstance(exported, FunctionTool)
    assert (exported.name, exported.description) == ("forecast", forecast.card.description)
    expected = openai_tool(forecast.card)["function"]
    assert exported.strict_json_schema is expected["strict"]
    assert exported.params_json_schema == expected["parameters"]
    loose = to_openai_agents(forecast, strict=False)
    assert not loose.strict_json_schema
    assert loose.params_json_schema == forecast.card.input_params


def test_runner_calls_exported_tools() -> None:
    model = ScriptedAgentsModel(
        [("forecast", '{"city": "Paris", "days": 2, "metric": null}')], "Sunny."
    )
    agent = Agent(name="weather", model=model, tools=to_openai_agents([forecast, divide]))
    result = Runner.run_sync(agent, "weather in Paris?")
    assert result.final_output == "Sunny."
    # strict mode sent null for the optional `metric`: toolweave applied its default
    assert _outputs(result) == ['{"city":"Paris","days":2,"unit":"C"}']
    assert [t.name for t in model.tools] == ["forecast", "divide"]


def test_bad_arguments_and_failures_reach_the_model_as_toolweaves_text() -> None:
    model = ScriptedAgentsModel(
        [("forecast", '{"days": "three"}'), ("divide", '{"a": 1, "b": 0}')],
        [("forecast", "{'city': 'Oslo',}"), ("slow", '{"seconds": 5}')],
        "done",
    )
    agent = Agent(name="a", model=model, tools=to_openai_agents([forecast, divide, slow]))
    outputs = _outputs(Runner.run_sync(agent, "go"))
    assert outputs[0].startswith("Invalid arguments for tool 'forecast':\n- city: missing")
    assert outputs[1] == "float division by zero"
    assert outputs[2] == '{"city":"Oslo","days":1,"unit":"C"}'  # repaired by toolweave
    assert outputs[3] == "tool 'slow' did not finish within 0.2 s and was cancelled"


def test_a_failure_error_function_formats_or_raises() -> None:
    def short(ctx: RunContextWrapper[Any], error: Exception) -> str:
        return f"error: {type(error).__name__}"

    model = ScriptedAgentsModel([("divide", '{"a": 1, "b": 0}')], "ok")
    agent = Agent(
        name="a", model=model, tools=[to_openai_agents(divide, failure_error_function=short)]
    )
    assert _outputs(Runner.run_sync(agent, "go")) == ["error: ToolExecutionError"]

    model = ScriptedAgentsModel([("divide", '{"a": 1, "b": 0}')], "ok")
    raising = Agent(
        name="a", model=model, tools=[to_openai_agents(divide, failure_error_function=None)]
    )
    with pytest.raises(Exception, match="float division by zero"):
        Runner.run_sync(raising, "go")


@dataclass
class Session:
    notes: dict[str, str] = field(default_factory=dict)


def test_the_run_context_is_the_toolweave_context() -> None:
    session = Session()
    model = ScriptedAgentsModel([("save_note", '{"text": "call mum"}')], "saved")
    agent = Agent(name="a", model=model, tools=[to_openai_agents(save_note)])
    Runner.run_sync(agent, "note", context=session)
    assert session.notes == {"call_1_0": "call mum"}


def test_callbacks_fire() -> None:
    recorder = Recorder()
    recorded = tool(forecast.func, callbacks=recorder.framework)
    model = ScriptedAgentsModel([("forecast", '{"city": "Rome"}'), ("forecast", "{}")], "ok")
    Runner.run_sync(Agent(name="a", model=model, tools=[to_openai_agents(recorded)]), "?")
    assert sorted(recorder.events) == sorted(
        ["tool_call_started", "tool_call_finished", "tool_call_started", "tool_call_error"]
    )


def test_media_is_sdk_tool_output() -> None:
    model = ScriptedAgentsModel([("chart", '{"title": "q3"}')], "drawn")
    result = Runner.run_sync(Agent(name="a", model=model, tools=[to_openai_agents(chart)]), "?")
    (output,) = _outputs(result)
    text, image = output
    assert text.text == "chart of q3"
    assert image.image_url.startswith("data:image/png;base64,")


def test_approval_carries_over() -> None:
    gated = tool(forecast.func, name="gated", requires_approval=True)
    assert to_openai_agents(gated).needs_approval is True
    assert to_openai_agents(forecast).needs_approval is False


# OpenAI Agents -> toolweave ----------------------------------------------------------------


@function_tool
def convert(amount: float, currency: str = "EUR") -> str:
    """Convert an amount of dollars.

    Args:
        amount: dollars
        currency: the target currency
    """
    if currency not in ("EUR", "GBP"):
        raise ValueError(f"unknown currency {currency}")
    return f"{amount * 0.9:.2f} {currency}"


@function_tool
async def balance(ctx: RunContextWrapper[dict[str, float]], account: str) -> float:
    """The balance of an account."""
    await asyncio.sleep(0)
    return ctx.context[account]


def test_imported_card_uses_the_sdks_schema() -> None:
    imported = from_openai_agents(convert)
    assert isinstance(imported, OpenAIAgentsTool)
    assert imported.card.name == "convert"
    assert imported.card.description == convert.description
    assert imported.card.input_params == convert.params_json_schema
    assert imported.card.strict is True


def test_imported_tool_runs_in_a_tool_service() -> None:
    tools = from_openai_agents([convert, balance])
    calls = [
        ToolExecutionRequest(id="c1", name="convert", arguments='{"amount": "10"}'),
        ToolExecutionRequest(id="c2", name="convert", arguments='{"amount": 1, "currency": "JPY"}'),
        ToolExecutionRequest(id="c3", name="balance", arguments='{"account": "savings"}'),
    ]
    model = ScriptedChatModel([AiMessage(tool_execution_requests=calls), AiMessage("done")])
    result = ToolService().tools(tools).chat(model, None, "?", context={"savings": 12.5})
    texts = [e.result.text for e in result.tool_executions]
    # strict schema: both are required; toolweave fills the SDK schema's default
    assert texts[0] == "9.00 EUR"
    assert result.tool_executions[1].result.is_error
    assert texts[1] == "unknown currency JPY"  # the real error, not the SDK's fixed sentence
    assert texts[2] == "12.5"


def test_imported_tool_validation_is_toolweaves_first() -> None:
    imported = from_openai_agents(convert)
    with pytest.raises(ToolArgumentsError, match="amount"):
        imported.invoke({"currency": "EUR"})
    assert asyncio.run(imported.ainvoke({"amount": 2, "currency": "GBP"})) == "1.80 GBP"
    assert convert.name == "convert"  # the original keeps its own failure handling


def test_sdk_tool_outputs_become_parts() -> None:
    from agents.tool import ToolOutputImage, ToolOutputText

    async def invoke(ctx: Any, arguments: str) -> Any:
        return [
            ToolOutputText(text="a plot"),
            ToolOutputImage(image_url="data:image/png;base64,iVBORw0KGgo="),
        ]

    plot = FunctionTool(
        name="plot",
        description="Plot.",
        params_json_schema={"type": "object", "properties": {}, "additionalProperties": False},
        on_invoke_tool=invoke,
    )
    result = DefaultToolExecutor(from_openai_agents(plot)).execute_with_result(
        ToolExecutionRequest(id="c1", name="plot", arguments="{}")
    )
    assert result.text == "a plot"
    assert result.contents is not None and result.contents[1].data == "iVBORw0KGgo="
