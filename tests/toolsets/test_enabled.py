"""`@tool(enabled=...)`: a bool, or a function of the `StepContext` asked every step, for
the service's own tools and a toolset's."""

from __future__ import annotations

import pytest

from toolweave import AiMessage, ScriptedChatModel, ToolCardError, ToolService, tool
from toolweave.toolsets import FunctionToolset, StepContext

from ..service.helpers import MODES, ai_calls, call, run


def after_first_round(ctx: StepContext) -> bool:
    return ctx.round > 0


@tool(enabled=after_first_round)
def finish(summary: str) -> str:
    """Hand in the summary."""
    return f"finished: {summary}"


@tool
def research(topic: str) -> str:
    """Research a topic."""
    return f"notes on {topic}"


@tool(enabled=False)
def retired() -> str:
    """Never offered."""
    return "no"


def offered(model: ScriptedChatModel) -> list[list[str]]:
    return [[c.name for c in r.parameters.tools or ()] for r in model.requests]


SCRIPT = [
    ai_calls(call("research", '{"topic": "bees"}')),
    ai_calls(call("finish", '{"summary": "bees"}')),
    AiMessage("done"),
]


@pytest.mark.parametrize("mode", MODES)
def test_the_services_own_tool_is_offered_in_the_steps_it_is_enabled_for(mode: str) -> None:
    model = ScriptedChatModel(list(SCRIPT))
    result = run(mode, ToolService().tools(research, finish, retired), model)
    assert offered(model) == [["research"], ["research", "finish"], ["research", "finish"]]
    assert result.tool_executions[-1].result.result_text() == "finished: bees"


@pytest.mark.parametrize("mode", MODES)
def test_a_toolsets_tool_is_offered_in_the_steps_it_is_enabled_for(mode: str) -> None:
    model = ScriptedChatModel(list(SCRIPT))
    service = ToolService(toolsets=[FunctionToolset(research, finish, retired)])
    run(mode, service, model)
    assert offered(model) == [["research"], ["research", "finish"], ["research", "finish"]]


def test_a_disabled_tool_called_anyway_is_an_unknown_tool() -> None:
    model = ScriptedChatModel([ai_calls(call("finish", '{"summary": "x"}')), "ok"])
    result = ToolService().tools(research, finish).chat(model, None, "hi")
    assert "no tool named 'finish'" in result.tool_executions[0].result.result_text()


def test_enabled_must_be_a_bool_or_a_function() -> None:
    with pytest.raises(ToolCardError, match="enabled must be a bool"):
        tool(enabled="yes")(research.func)
