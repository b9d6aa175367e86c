"""Toolsets in the loop: per transform and built-in toolset, through the four faces, the
exact tool list sent to the model each round (`ScriptedChatModel.requests`)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from toolweave import (
    AiMessage,
    ChatRequestParameters,
    ScriptedChatModel,
    SystemMessage,
    ToolCard,
    ToolCardError,
    ToolChoice,
    ToolExecutionResult,
    ToolService,
    UserMessage,
    tool,
)
from toolweave.service.approvals import ChatStatus
from toolweave.toolsets import (
    CombinedToolset,
    FunctionToolset,
    StepContext,
    ToolNameConflictError,
    Toolset,
    ToolsetTool,
)

from ..service.helpers import MODES, ai_calls, call, run


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def mul(a: int, b: int) -> int:
    """Multiply two integers."""
    return a * b


@tool
def note(text: str) -> str:
    """Take a note."""
    return f"noted {text}"


def offered(model: ScriptedChatModel) -> list[list[str]]:
    """The tool names of every request the model received, in order."""
    return [[c.name for c in r.parameters.tools or ()] for r in model.requests]


def texts(result: Any) -> list[str]:
    return [e.result.result_text() for e in result.tool_executions]


AB = '{"a": 2, "b": 3}'


@pytest.mark.parametrize("mode", MODES)
def test_a_function_toolset_is_offered_after_the_services_own_tools(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("mul", AB)), AiMessage("6")])
    service = ToolService(toolsets=[FunctionToolset(mul)]).tools(note)
    result = run(mode, service, model)
    assert offered(model) == [["note", "mul"], ["note", "mul"]]
    assert texts(result) == ["6"]
    assert result.text == "6"


@pytest.mark.parametrize("mode", MODES)
def test_service_toolsets_adds_sets_and_tools_given_by_the_caller_come_first(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("add", AB)), AiMessage("5")])
    service = ToolService().toolsets(FunctionToolset(add), FunctionToolset().tools(mul))
    given = ChatRequestParameters(tools=[ToolCard(name="client_side")])
    result = run(mode, service, model, parameters=given)
    assert offered(model) == [["client_side", "add", "mul"]] * 2
    assert texts(result) == ["5"]


@pytest.mark.parametrize("mode", MODES)
def test_filtered_asks_the_predicate_every_step(mode: str) -> None:
    def by_round(ctx: StepContext, card: ToolCard) -> bool:
        return card.name == ("add" if ctx.round == 0 else "mul")

    model = ScriptedChatModel(
        [ai_calls(call("add", AB)), ai_calls(call("mul", AB)), AiMessage("done")]
    )
    service = ToolService(toolsets=[FunctionToolset(add, mul).filtered(by_round)])
    result = run(mode, service, model)
    assert offered(model) == [["add"], ["mul"], ["mul"]]
    assert texts(result) == ["5", "6"]


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_filtered_out_this_step_is_an_unknown_tool(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("mul", AB)), AiMessage("sorry")])
    service = ToolService(
        toolsets=[FunctionToolset(add, mul).filtered(lambda ctx, card: card.name == "add")]
    )
    result = run(mode, service, model)
    assert offered(model) == [["add"], ["add"]]
    (execution,) = result.tool_executions
    assert execution.has_failed
    assert "no tool named 'mul'" in execution.result.result_text()
    assert "add" in execution.result.result_text()


@pytest.mark.parametrize("mode", MODES)
def test_prefixed_offers_prefixed_names_and_runs_the_tool(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("calc_add", AB)), AiMessage("5")])
    service = ToolService(toolsets=[FunctionToolset(add, mul).prefixed("calc")]).tools(note)
    result = run(mode, service, model)
    assert offered(model) == [["note", "calc_add", "calc_mul"]] * 2
    assert texts(result) == ["5"]
    assert result.tool_executions[0].request.name == "calc_add"


@pytest.mark.parametrize("mode", MODES)
def test_renamed_renames_the_named_tools_only(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("plus", AB), call("mul", AB)), AiMessage("ok")])
    service = ToolService(toolsets=[FunctionToolset(add, mul).renamed({"add": "plus"})])
    result = run(mode, service, model)
    assert offered(model) == [["plus", "mul"]] * 2
    assert texts(result) == ["5", "6"]


@pytest.mark.parametrize("mode", MODES)
def test_prepared_hides_tools_and_changes_a_card_per_step(mode: str) -> None:
    def prepare(ctx: StepContext, cards: list[ToolCard]) -> list[ToolCard]:
        if ctx.round == 0:
            return [c for c in cards if c.name == "add"]
        return [
            c.model_copy(update={"description": f"round {ctx.round}: {c.description}"})
            for c in cards
        ]

    model = ScriptedChatModel([ai_calls(call("add", AB)), ai_calls(call("mul", AB)), "done"])
    service = ToolService(toolsets=[FunctionToolset(add, mul).prepared(prepare)])
    result = run(mode, service, model)
    assert offered(model) == [["add"], ["add", "mul"], ["add", "mul"]]
    descriptions = [[c.description for c in r.parameters.tools or ()] for r in model.requests]
    assert descriptions[1] == ["round 1: Add two integers.", "round 1: Multiply two integers."]
    assert descriptions[2][0] == "round 2: Add two integers."
    assert texts(result) == ["5", "6"]


@pytest.mark.parametrize("mode", MODES)
def test_an_async_prepare_may_narrow_a_schema(mode: str) -> None:
    async def prepare(ctx: StepContext, cards: list[ToolCard]) -> list[ToolCard]:
        await asyncio.sleep(0)
        narrowed = {**cards[0].input_params}
        narrowed["properties"] = {**narrowed["properties"], "a": {"type": "integer", "enum": [2]}}
        return [cards[0].model_copy(update={"input_params": narrowed})]

    model = ScriptedChatModel([ai_calls(call("add", AB)), "5"])
    service = ToolService(toolsets=[FunctionToolset(add).prepared(prepare)])
    result = run(mode, service, model)
    (card,) = model.requests[0].parameters.tools or ()
    assert card.input_params["properties"]["a"] == {"type": "integer", "enum": [2]}
    assert texts(result) == ["5"]


@pytest.mark.parametrize("mode", MODES)
def test_with_approval_pauses_every_call_of_the_set(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("add", AB), call("note", '{"text": "x"}')), "ok"])
    service = ToolService(toolsets=[FunctionToolset(add).with_approval()]).tools(note)
    result = run(mode, service, model)
    assert result.status is ChatStatus.PENDING
    assert [p.tool_name for p in result.pending] == ["add"]
    assert texts(result) == ["noted x"]  # the other call ran
    assert offered(model) == [["note", "add"]]


@pytest.mark.parametrize("mode", MODES)
def test_with_approval_takes_a_policy_function(mode: str) -> None:
    def big(arguments: dict[str, Any], context: Any) -> bool:
        return bool(arguments["a"] > 10)

    model = ScriptedChatModel(
        [ai_calls(call("add", AB, id="small"), call("add", '{"a": 20, "b": 1}', id="big")), "x"]
    )
    service = ToolService(toolsets=[FunctionToolset(add).with_approval(big)])
    result = run(mode, service, model)
    assert [p.id for p in result.pending] == ["big"]
    assert texts(result) == ["5"]


@pytest.mark.parametrize("mode", MODES)
def test_wrapped_runs_around_every_call_of_the_set(mode: str) -> None:
    seen: list[str] = []

    async def around(request: Any, call_next: Any) -> ToolExecutionResult:
        seen.append(request.name)
        if request.name == "mul":
            return ToolExecutionResult.error_result("mul is switched off")
        result: ToolExecutionResult = await call_next(
            request.model_copy(update={"arguments": '{"a": 40, "b": 2}'})
        )
        return result

    model = ScriptedChatModel(
        [ai_calls(call("add", AB), call("mul", AB), call("note", '{"text": "n"}')), "ok"]
    )
    service = ToolService(toolsets=[FunctionToolset(add, mul).wrapped(around)]).tools(note)
    result = run(mode, service, model)
    assert sorted(seen) == ["add", "mul"]
    assert texts(result) == ["42", "mul is switched off", "noted n"]
    assert [e.has_failed for e in result.tool_executions] == [False, True, False]


@pytest.mark.parametrize("mode", MODES)
def test_transforms_compose(mode: str) -> None:
    combined = CombinedToolset(FunctionToolset(add), FunctionToolset(mul))
    toolset = (
        combined.prefixed("m")
        .renamed({"m_mul": "times"})
        .filtered(lambda ctx, card: ctx.round > 0 or card.name != "times")
    )
    model = ScriptedChatModel([ai_calls(call("m_add", AB)), ai_calls(call("times", AB)), "ok"])
    result = run(mode, ToolService(toolsets=[toolset]), model)
    assert offered(model) == [["m_add"], ["m_add", "times"], ["m_add", "times"]]
    assert texts(result) == ["5", "6"]


@pytest.mark.parametrize("mode", MODES)
def test_a_name_offered_by_two_sets_is_an_error_naming_both_before_any_request(
    mode: str,
) -> None:
    model = ScriptedChatModel(["never sent"])
    service = ToolService(
        toolsets=[FunctionToolset(add, label="maths"), FunctionToolset(add, label="more")]
    )
    with pytest.raises(ToolNameConflictError) as caught:
        run(mode, service, model)
    assert "'add'" in caught.value.message
    assert caught.value.toolsets == ("maths", "more")
    assert "maths and more" in caught.value.message
    assert model.requests == []


@pytest.mark.parametrize("mode", MODES)
def test_a_toolset_colliding_with_the_services_own_tool_is_named(mode: str) -> None:
    model = ScriptedChatModel(["never sent"])
    service = ToolService(toolsets=[FunctionToolset(add).prefixed("x")]).tools(
        tool(name="x_add")(add.func)
    )
    with pytest.raises(ToolNameConflictError) as caught:
        run(mode, service, model)
    assert caught.value.toolsets == ("ToolService", "FunctionToolset.prefixed('x_')")


def test_a_collision_made_by_a_later_step_is_raised_then() -> None:
    toolset = FunctionToolset(add).renamed({"add": "mul"}).filtered(lambda ctx, card: ctx.round > 0)
    model = ScriptedChatModel([ai_calls(call("mul", AB)), "never"])
    service = ToolService(toolsets=[FunctionToolset(mul), toolset])
    with pytest.raises(ToolNameConflictError, match="'mul'"):
        service.chat(model, None, "hi")
    assert len(model.requests) == 1


class _Instructed(Toolset):
    def __init__(self) -> None:
        self.steps: list[StepContext] = []
        self.tools = FunctionToolset(note)

    async def get_tools(self, ctx: StepContext) -> Sequence[ToolsetTool]:
        self.steps.append(ctx)
        return await self.tools.get_tools(ctx)

    async def instructions(self, ctx: StepContext) -> str | None:
        return f"Take notes (round {ctx.round})."


@pytest.mark.parametrize("mode", MODES)
def test_instructions_reach_the_system_text_of_the_request_not_the_history(mode: str) -> None:
    toolset = _Instructed()
    model = ScriptedChatModel([ai_calls(call("note", '{"text": "a"}')), "done"])
    service = ToolService(toolsets=[toolset])
    result = run(mode, service, model, "hi")
    first, second = model.requests
    assert isinstance(first.messages[0], SystemMessage)
    assert first.messages[0].text == "Take notes (round 0)."
    assert second.messages[0].text == "Take notes (round 1)."
    assert not any(isinstance(m, SystemMessage) for m in result.messages)


def test_instructions_are_added_to_the_callers_system_message() -> None:
    model = ScriptedChatModel(["done"])
    service = ToolService(toolsets=[_Instructed()])
    service.chat(model, None, [SystemMessage("Be brief."), UserMessage("hi")])
    (request,) = model.requests
    assert request.messages[0].text == "Be brief.\n\nTake notes (round 0)."


@pytest.mark.parametrize("mode", MODES)
def test_the_step_context_carries_round_messages_usage_memory_and_context(mode: str) -> None:
    toolset = _Instructed()
    model = ScriptedChatModel([ai_calls(call("note", '{"text": "a"}')), "done"])
    run(mode, ToolService(toolsets=[toolset]), model, memory_id="m1", context={"user": "u"})
    first, second = toolset.steps
    assert (first.round, second.round) == (0, 1)
    assert len(first.messages) == 1 and len(second.messages) == 3
    assert first.memory_id == second.memory_id == "m1"
    assert second.context == {"user": "u"}


@pytest.mark.parametrize("mode", MODES)
def test_request_parameters_stay_the_same_object_while_nothing_changes(mode: str) -> None:
    model = ScriptedChatModel(
        [ai_calls(call("add", AB)), ai_calls(call("mul", AB)), ai_calls(call("add", AB)), "ok"]
    )
    toolset = FunctionToolset(add, mul).prefixed("p").filtered(lambda ctx, card: True)
    service = ToolService(toolsets=[toolset.renamed({"p_add": "add", "p_mul": "mul"})])
    run(mode, service, model)
    parameters = [r.parameters for r in model.requests]
    assert all(p is parameters[0] for p in parameters)


def test_a_forced_tool_choice_is_relaxed_after_a_round_with_toolsets_too() -> None:
    model = ScriptedChatModel([ai_calls(call("add", AB)), "5"])
    service = ToolService(toolsets=[FunctionToolset(add)])
    service.chat(model, ChatRequestParameters(tool_choice=ToolChoice.REQUIRED), "hi")
    first, second = (r.parameters for r in model.requests)
    assert first.tool_choice == ToolChoice.REQUIRED
    assert second.tool_choice == ToolChoice.AUTO
    assert [c.name for c in second.tools or ()] == ["add"]


def test_a_function_toolset_registers_what_the_service_does() -> None:
    class Store:
        @tool
        def get_item(self, key: str) -> str:
            """Read an item."""
            return key

    def echo(request: Any, memory_id: Any) -> str:
        return str(request.arguments)

    toolset = (
        FunctionToolset()
        .tools(add, Store(), max_concurrency=2)
        .tool({"name": "ping", "description": "Ping", "parameters": {}}, echo)
        .deferred("browser_only")
    )
    names = [c.name for c in toolset.tool_cards]
    assert names == ["add", "get_item", "ping", "browser_only"]
    with pytest.raises(ToolCardError, match="duplicate tool name 'add'"):
        toolset.tools(add)
    offered_tools = asyncio.run(toolset.get_tools(StepContext(round=0, messages=())))
    assert [t.name for t in offered_tools] == names
    assert offered_tools[0].limit is not None and offered_tools[0].limit.size == 2
    assert offered_tools[3].deferred
    assert asyncio.run(toolset.get_tools(StepContext(round=1, messages=()))) is offered_tools


def test_a_toolset_that_is_not_a_toolset_is_refused() -> None:
    with pytest.raises(TypeError, match="Toolset"):
        ToolService(toolsets=[add])  # type: ignore[list-item]
