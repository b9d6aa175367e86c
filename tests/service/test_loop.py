"""The ToolService loop: the seed's example, return behaviours, errors, limits, concurrency."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import itertools
import threading
import time
from typing import Any

import pytest

from toolweave import (
    RETHROW,
    AiMessage,
    ChatRequestParameters,
    HallucinatedToolError,
    HallucinatedToolStrategy,
    ImageContent,
    ReturnBehavior,
    ScriptedChatModel,
    ToolArgumentsError,
    ToolCard,
    ToolChoice,
    ToolErrorHandlerResult,
    ToolExecutionError,
    ToolExecutionRequest,
    ToolExecutionResult,
    ToolExecutionResultMessage,
    ToolLoopLimitError,
    ToolParameters,
    ToolService,
    UserMessage,
    tool,
)
from toolweave.dialects import openai_tool

from .helpers import MODES, ai_calls, assert_history_valid, call, run

# --- the seed's worked example -------------------------------------------------------------


@tool(strict=False)
def get_weather(city: str) -> str:
    """查询指定城市的当前天气

    Args:
        city: 城市名
    """
    return "杭州今天 22℃，天气晴。"


@pytest.mark.parametrize("mode", MODES)
def test_seed_weather_example_sends_exactly_the_two_requests(mode: str) -> None:
    model = ScriptedChatModel(
        [
            ai_calls(call("get_weather", '{"city":"杭州"}', id="call_abc123")),
            AiMessage("杭州今天 22℃，天气晴。"),
        ]
    )
    service = ToolService().tools(get_weather)
    result = run(
        mode,
        service,
        model,
        [UserMessage("杭州今天天气怎么样？")],
        parameters=ChatRequestParameters(tool_choice="auto"),
    )
    assert result.text == "杭州今天 22℃，天气晴。"
    first, second = model.requests
    assert first.messages == (UserMessage("杭州今天天气怎么样？"),)
    assert [c.name for c in first.tools] == ["get_weather"]
    assert first.parameters.tool_choice == ToolChoice.AUTO
    assert openai_tool(first.tools[0]) == {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "查询指定城市的当前天气",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string", "description": "城市名"}},
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    }
    user, assistant, tool_result = second.messages
    assert user == UserMessage("杭州今天天气怎么样？")
    assert isinstance(assistant, AiMessage) and assistant.text is None
    assert assistant.tool_execution_requests[0].id == "call_abc123"
    assert assistant.tool_execution_requests[0].arguments == '{"city":"杭州"}'
    assert tool_result == ToolExecutionResultMessage(
        id="call_abc123", tool_name="get_weather", text="杭州今天 22℃，天气晴。"
    )
    assert second.parameters.tool_choice == ToolChoice.AUTO
    assert len(result.tool_executions) == 1 and not result.tool_executions[0].has_failed
    assert result.messages == [*second.messages, result.final_response.ai_message]
    assert len(result.intermediate_responses) == 1


# --- return behaviour matrix (ReturnBehaviorCombinationsTest) -----------------------------------


def _behaviour_tools(fail: str | None = None) -> ToolService:
    def make(name: str, behaviour: ReturnBehavior) -> Any:
        def body() -> str:
            if name == fail:
                raise RuntimeError(f"{name} broke")
            return f"{name} done"

        body.__name__ = name
        return tool(body, name=name, return_behavior=behaviour)

    return ToolService().tools(
        make("to_llm", ReturnBehavior.TO_LLM),
        make("immediate", ReturnBehavior.IMMEDIATE),
        make("if_last", ReturnBehavior.IMMEDIATE_IF_LAST),
    )


def _expected_immediate(names: tuple[str, ...]) -> bool:
    if names[-1] == "if_last":
        return True
    return all(n != "to_llm" for n in names)


COMBOS = [
    combo
    for k in (1, 2, 3)
    for combo in itertools.product(["to_llm", "immediate", "if_last"], repeat=k)
]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("names", COMBOS, ids=lambda c: "+".join(c))
def test_return_behaviour_matrix(mode: str, names: tuple[str, ...]) -> None:
    calls = [call(n, id=f"c{i}") for i, n in enumerate(names)]
    model = ScriptedChatModel([ai_calls(*calls), AiMessage("final")])
    result = run(mode, _behaviour_tools(), model)
    immediate = _expected_immediate(names)
    assert result.immediate is immediate
    assert len(model.requests) == (1 if immediate else 2)
    if immediate:
        assert result.final_response.ai_message.tool_execution_requests == tuple(calls)
    else:
        assert result.text == "final"
    assert [e.result.text for e in result.tool_executions] == [f"{n} done" for n in names]
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_any_error_in_the_round_forces_another_model_turn(mode: str) -> None:
    model = ScriptedChatModel(
        [ai_calls(call("immediate", id="a"), call("if_last", id="b")), AiMessage("recovered")]
    )
    result = run(mode, _behaviour_tools(fail="immediate"), model)
    assert result.immediate is False
    assert result.text == "recovered"
    assert result.tool_executions[0].has_failed
    assert result.tool_executions[0].result.text == "immediate broke"


# --- hallucinated tool names --------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_unknown_tool_gets_an_error_listing_available_tools(mode: str) -> None:
    model = ScriptedChatModel(
        [
            ai_calls(
                call("get_wether", '{"city":"x"}', id="h1"),
                call("get_weather", '{"city":"x"}', id="ok"),
            ),
            AiMessage("done"),
        ]
    )
    result = run(mode, ToolService().tools(get_weather), model)
    answer = model.requests[1].messages[2]
    assert isinstance(answer, ToolExecutionResultMessage)
    assert answer.is_error and answer.id == "h1"
    assert answer.text == (
        "There is no tool named 'get_wether'. Call one of the available tools instead: get_weather."
    )
    assert model.requests[1].messages[3].text == "杭州今天 22℃，天气晴。"
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_throw_strategy_raises_and_keeps_history_valid(mode: str) -> None:
    model = ScriptedChatModel(
        [ai_calls(call("nope", id="x1"), call("get_weather", '{"city":"a"}', id="x2"))]
    )
    service = ToolService(hallucinated_tool_strategy=HallucinatedToolStrategy.THROW).tools(
        get_weather
    )
    with pytest.raises(HallucinatedToolError) as info:
        run(mode, service, model)
    assert info.value.tool_name == "nope"
    assert info.value.available == ["get_weather"]
    partial = info.value.partial_result  # type: ignore[attr-defined]
    assert_history_valid(partial.messages)
    assert [e.request.id for e in partial.tool_executions] == ["x1", "x2"]
    assert partial.tool_executions[1].result.text == "杭州今天 22℃，天气晴。"


@pytest.mark.parametrize("mode", MODES)
def test_custom_hallucination_strategy_text(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("ghost")), AiMessage("ok")])
    service = ToolService(
        hallucinated_tool_strategy=lambda req, names: f"no {req.name}, try {names}"
    )
    service.tools(get_weather)
    result = run(mode, service, model)
    assert result.tool_executions[0].result.text == "no ghost, try ['get_weather']"


def _seed_message(request: ToolExecutionRequest) -> ToolExecutionResultMessage:
    # LangChain4j's form: a function of the request returning the result message
    return ToolExecutionResultMessage(
        id=request.id,
        tool_name=request.name,
        text=f"Error: there is no tool called {request.name}",
        is_error=True,
    )


async def _async_result(request: ToolExecutionRequest) -> ToolExecutionResult:
    return ToolExecutionResult(text=f"{request.name} is gone", is_error=True)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize(
    ("strategy", "text"),
    [
        (_seed_message, "Error: there is no tool called ghost"),
        (_async_result, "ghost is gone"),
        (lambda req: f"unknown: {req.name}", "unknown: ghost"),
        (
            lambda req, names: ToolExecutionResult.failure(f"{req.name}? use {names[0]}"),
            "ghost? use get_weather",
        ),
    ],
)
def test_hallucination_strategy_in_the_seed_forms(mode: str, strategy: Any, text: str) -> None:
    model = ScriptedChatModel([ai_calls(call("ghost", id="g1")), AiMessage("ok")])
    service = ToolService(hallucinated_tool_strategy=strategy).tools(get_weather)
    result = run(mode, service, model)
    answer = model.requests[1].messages[-1]
    assert isinstance(answer, ToolExecutionResultMessage)
    assert answer.id == "g1" and answer.tool_name == "ghost"
    assert answer.text == text and answer.is_error
    assert result.tool_executions[0].result.text == text


@pytest.mark.parametrize("mode", MODES)
def test_hallucination_strategy_with_an_unusable_answer(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("ghost", id="g1")), AiMessage("ok")])
    service = ToolService(hallucinated_tool_strategy=lambda req: 42).tools(get_weather)
    with pytest.raises(TypeError, match="must return a ToolExecutionResultMessage"):
        run(mode, service, model)


@pytest.mark.parametrize("mode", MODES)
def test_repeated_hallucination_exhausts_the_budget(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("ghost", id=f"g{i}")) for i in range(3)])
    with pytest.raises(HallucinatedToolError) as info:
        run(mode, ToolService(max_argument_retries=2).tools(get_weather), model)
    assert len(model.requests) == 3
    assert_history_valid(info.value.partial_result.messages)  # type: ignore[attr-defined]


# --- error handlers (AbstractAiServicesWithToolErrorHandlerTest) ---------------------------------


class Boom(Exception):
    pass


@tool
def explode(message: str = "kaboom") -> str:
    """Always fails."""
    if message == "":
        raise Boom()
    raise Boom(message)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def _with_sibling(concurrent: bool, *calls: Any) -> list[Any]:
    return [*calls, call("add", '{"a": 1, "b": 2}', id="sibling")] if concurrent else list(calls)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("concurrent", [False, True])
def test_execution_error_message_is_sent_to_the_model(mode: str, concurrent: bool) -> None:
    model = ScriptedChatModel(
        [ai_calls(*_with_sibling(concurrent, call("explode", id="e"))), AiMessage("ok")]
    )
    result = run(mode, ToolService().tools(explode, add), model)
    answer = model.requests[1].messages[2]
    assert answer.is_error and answer.text == "kaboom"
    if concurrent:
        assert model.requests[1].messages[3].text == "3"
    assert isinstance(result.tool_executions[0].result.error, ToolExecutionError)
    assert isinstance(result.tool_executions[0].result.error.__cause__, Boom)


@pytest.mark.parametrize("mode", MODES)
def test_exception_without_message_sends_its_class_name(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("explode", '{"message": ""}')), AiMessage("ok")])
    run(mode, ToolService().tools(explode), model)
    assert model.requests[1].messages[2].text == "Boom"


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("concurrent", [False, True])
def test_custom_execution_handler_text(mode: str, concurrent: bool) -> None:
    seen: list[Any] = []

    def handler(error: BaseException, ctx: Any) -> ToolErrorHandlerResult:
        seen.append((type(error.__cause__).__name__, ctx.request.id))
        return ToolErrorHandlerResult("handled: " + str(error.__cause__))

    model = ScriptedChatModel(
        [ai_calls(*_with_sibling(concurrent, call("explode", id="e"))), AiMessage("ok")]
    )
    run(mode, ToolService(execution_error_handler=handler).tools(explode, add), model)
    assert model.requests[1].messages[2].text == "handled: kaboom"
    assert seen == [("Boom", "e")]


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("concurrent", [False, True])
def test_execution_handler_that_raises_aborts_after_one_model_call(
    mode: str, concurrent: bool
) -> None:
    class Custom(Exception):
        pass

    def handler(error: BaseException, ctx: Any) -> ToolErrorHandlerResult:
        raise Custom("stop here")

    model = ScriptedChatModel(
        [ai_calls(*_with_sibling(concurrent, call("explode", id="e"))), AiMessage("never")]
    )
    with pytest.raises(Custom) as info:
        run(mode, ToolService(execution_error_handler=handler).tools(explode, add), model)
    assert len(model.requests) == 1
    partial = info.value.partial_result  # type: ignore[attr-defined]
    assert_history_valid(partial.messages)
    if concurrent:
        assert partial.tool_executions[1].result.text == "3"


@pytest.mark.parametrize("mode", MODES)
def test_rethrow_presets(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("explode"))])
    service = ToolService(arguments_error_handler=RETHROW, execution_error_handler=RETHROW)
    with pytest.raises(ToolExecutionError) as info:
        run(mode, service.tools(explode), model)
    assert isinstance(info.value.__cause__, Boom)

    model = ScriptedChatModel([ai_calls(call("add", "{not json"))])
    service = ToolService(arguments_error_handler=RETHROW).tools(add)
    with pytest.raises(ToolArgumentsError):
        run(mode, service, model)
    assert len(model.requests) == 1


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("concurrent", [False, True])
def test_invalid_arguments_are_fed_back_then_the_model_retries(mode: str, concurrent: bool) -> None:
    model = ScriptedChatModel(
        [
            ai_calls(*_with_sibling(concurrent, call("add", '{"a": "x"}', id="bad"))),
            ai_calls(call("add", '{"a": 2, "b": 3}', id="good")),
            AiMessage("5"),
        ]
    )
    result = run(mode, ToolService().tools(add), model)
    feedback = model.requests[1].messages[2]
    assert feedback.is_error
    assert feedback.text == (
        "Invalid arguments for tool 'add':\n"
        '- a: Input should be a valid integer, unable to parse string as an integer (got "x")\n'
        "- b: missing required argument\n"
        "Expected parameters: a, b.\n"
        "Fix these arguments and call the tool again."
    )
    assert result.text == "5"
    assert result.tool_executions[-1].result.text == "5"


@pytest.mark.parametrize("mode", MODES)
def test_invalid_json_is_fed_back_then_raises_when_budget_spent(mode: str) -> None:
    bad = [ai_calls(call("add", "{oops", id=f"b{i}")) for i in range(3)]
    model = ScriptedChatModel(bad)
    with pytest.raises(ToolArgumentsError) as info:
        run(mode, ToolService(max_argument_retries=2).tools(add), model)
    assert len(model.requests) == 3
    assert "not valid JSON" in model.requests[1].messages[-1].text
    assert_history_valid(info.value.partial_result.messages)  # type: ignore[attr-defined]


@pytest.mark.parametrize("mode", MODES)
def test_budget_counts_consecutive_failures_only(mode: str) -> None:
    model = ScriptedChatModel(
        [
            ai_calls(call("add", "{oops", id="1")),
            ai_calls(call("add", "{oops", id="2")),
            ai_calls(call("add", '{"a":1,"b":1}', id="3")),
            ai_calls(call("add", "{oops", id="4")),
            ai_calls(call("add", "{oops", id="5")),
            AiMessage("done"),
        ]
    )
    result = run(mode, ToolService(max_argument_retries=2).tools(add), model)
    assert result.text == "done"


@pytest.mark.parametrize("mode", MODES)
def test_custom_arguments_handler(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("add", "[1, 2]")), AiMessage("ok")])
    service = ToolService(
        arguments_error_handler=lambda e, ctx: f"arguments for {ctx.request.name} were bad"
    )
    run(mode, service.tools(add), model)
    assert model.requests[1].messages[2].text == "arguments for add were bad"

    class Custom(Exception):
        pass

    def raising(error: BaseException, ctx: Any) -> str:
        raise Custom(str(error))

    model = ScriptedChatModel([ai_calls(call("add", "[1, 2]"))])
    with pytest.raises(Custom, match="must be a JSON object"):
        run(mode, ToolService(arguments_error_handler=raising).tools(add), model)


# --- limits and bad model behaviour -------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_round_trip_limit_is_the_number_of_tool_rounds(mode: str) -> None:
    def endless(request: Any) -> AiMessage:
        n = len(request.messages)
        return ai_calls(call("add", '{"a": 1, "b": 1}', id=f"r{n}"))

    model = ScriptedChatModel(endless)
    with pytest.raises(ToolLoopLimitError, match="max_tool_calling_round_trips=3") as info:
        run(mode, ToolService(max_tool_calling_round_trips=3).tools(add), model)
    assert len(model.requests) == 4
    partial = info.value.partial_result  # type: ignore[attr-defined]
    assert len(partial.tool_executions) == 3
    assert_history_valid(partial.messages)
    assert partial.messages[-1].text.startswith("The tool call was not executed")

    model = ScriptedChatModel(
        [ai_calls(call("add", '{"a":1,"b":1}', id=f"k{i}")) for i in range(3)] + [AiMessage("end")]
    )
    assert run(mode, ToolService(max_tool_calling_round_trips=3).tools(add), model).text == "end"


@pytest.mark.parametrize("mode", MODES)
def test_tool_timeout_and_unserialisable_results_are_reported(mode: str) -> None:
    @tool(timeout=0.2)
    async def slow() -> str:
        """Never finishes in time."""
        await asyncio.sleep(30)
        return "late"

    class Unprintable:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    @tool
    def weird() -> object:
        """Returns something that has no JSON form and whose str() fails."""
        return Unprintable()

    model = ScriptedChatModel(
        [ai_calls(call("slow", id="s"), call("weird", id="w")), AiMessage("ok")]
    )
    result = run(mode, ToolService().tools(slow, weird), model)
    slow_exec, weird_exec = result.tool_executions
    assert slow_exec.has_failed and "did not finish within 0.2 s" in slow_exec.result.text
    assert weird_exec.has_failed and "cannot be converted to text" in weird_exec.result.text
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_none_and_content_results(mode: str) -> None:
    @tool
    def nothing() -> None:
        """Does nothing."""

    @tool
    def picture() -> ImageContent:
        """An image."""
        return ImageContent.from_bytes(b"\x89PNG...", "image/png")

    model = ScriptedChatModel(
        [ai_calls(call("nothing", id="n"), call("picture", id="p")), AiMessage("ok")]
    )
    result = run(mode, ToolService().tools(nothing, picture), model)
    assert result.tool_executions[0].result.text == "Success"
    image_message = model.requests[1].messages[3]
    assert image_message.contents and image_message.contents[0].mime_type == "image/png"


def test_duplicate_registration_is_rejected() -> None:
    service = ToolService().tools(add)
    with pytest.raises(ValueError, match="'add'"):
        service.tools(add)


def test_register_an_executor_under_any_spec() -> None:
    """`tool(spec, executor)`: a ToolInfo, a function descriptor, OpenAI's tool dict or a
    name become the card; anything else is a ToolCardError naming what it got."""
    from toolweave import ToolCardError

    params = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    echo = lambda request, memory_id: request.arguments  # noqa: E731
    service = ToolService()
    service.tool(add.card.tool_info().model_copy(update={"name": "info"}), echo)
    service.tool({"name": "plain", "description": "Plain.", "parameters": params}, echo)
    service.tool({"type": "function", "function": {"name": "oai", "parameters": params}}, echo)
    service.tool("bare", echo)
    cards = {c.name: c for c in service.tool_cards}
    assert list(cards) == ["info", "plain", "oai", "bare"]
    assert cards["info"].input_params == add.card.input_params
    assert cards["plain"].description == "Plain." and cards["oai"].input_params == params
    with pytest.raises(ToolCardError, match="int"):
        service.tool(42, echo)


def test_registration_forms() -> None:
    class Calc:
        @tool
        def mul(self, a: int, b: int) -> int:
            """Multiply."""
            return a * b

        def plain(self, x: int) -> int:
            """Not marked."""
            return -x

    card = ToolCard(name="echo", input_params=ToolParameters().add("text", "string", required=True))
    service = ToolService()
    service.tools(Calc(), add)
    service.tool(Calc(), "plain")
    service.tool(card, lambda request, memory_id: f"echo {request.arguments}")
    service.tools({ToolCard(name="upper"): lambda request, memory_id: request.arguments.upper()})
    assert [c.name for c in service.tool_cards] == ["mul", "add", "plain", "echo", "upper"]
    model = ScriptedChatModel(
        [
            ai_calls(
                call("mul", '{"a": 3, "b": 4}', id="1"),
                call("plain", '{"x": 5}', id="2"),
                call("echo", '{"text": "hi"}', id="3"),
                call("upper", '{"q": "abc"}', id="4"),
            ),
            AiMessage("ok"),
        ]
    )
    result = service.chat(model, None, "go")
    assert [e.result.text for e in result.tool_executions] == [
        "12",
        "-5",
        'echo {"text": "hi"}',
        '{"Q": "ABC"}',
    ]


# --- concurrency ----------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_calls_of_a_round_run_concurrently_bounded_and_in_request_order(mode: str) -> None:
    active = 0
    peak = 0

    @tool
    async def wait(ms: int) -> int:
        """Sleep for ms milliseconds."""
        nonlocal active, peak
        active += 1
        peak = max(peak, active)
        await asyncio.sleep(ms / 1000)
        active -= 1
        return ms

    delays = [120, 10, 80, 30, 60, 20]
    model = ScriptedChatModel(
        [
            ai_calls(*[call("wait", f'{{"ms": {d}}}', id=f"w{i}") for i, d in enumerate(delays)]),
            AiMessage("ok"),
        ]
    )
    result = run(mode, ToolService(max_concurrency=3).tools(wait), model)
    assert peak == 3
    assert [m.text for m in model.requests[1].messages[2:]] == [str(d) for d in delays]
    assert [e.request.id for e in result.tool_executions] == [f"w{i}" for i in range(6)]


@pytest.mark.parametrize("mode", MODES)
def test_parallel_unsafe_calls_are_barriers(mode: str) -> None:
    log: list[str] = []

    @tool
    async def safe(tag: str) -> str:
        """Parallel-safe."""
        log.append(f"start {tag}")
        await asyncio.sleep(0.05)
        log.append(f"end {tag}")
        return tag

    @tool(parallel_safe=False)
    async def exclusive(tag: str) -> str:
        """Must run alone."""
        log.append(f"start {tag}")
        await asyncio.sleep(0.01)
        log.append(f"end {tag}")
        return tag

    calls = [
        call("safe", '{"tag": "a"}', id="1"),
        call("safe", '{"tag": "b"}', id="2"),
        call("exclusive", '{"tag": "X"}', id="3"),
        call("safe", '{"tag": "c"}', id="4"),
    ]
    model = ScriptedChatModel([ai_calls(*calls), AiMessage("ok")])
    run(mode, ToolService().tools(safe, exclusive), model)
    x_start, x_end = log.index("start X"), log.index("end X")
    assert log.index("end a") < x_start and log.index("end b") < x_start
    assert log.index("start c") > x_end
    assert {log[0], log[1]} == {"start a", "start b"}


@pytest.mark.parametrize("mode", MODES)
def test_sync_tools_run_in_threads_with_isolated_context(mode: str) -> None:
    var: contextvars.ContextVar[str] = contextvars.ContextVar("var", default="unset")
    seen: dict[str, Any] = {}
    barrier = threading.Barrier(2, timeout=5)

    @tool
    def sync_tool(tag: str) -> str:
        """Sets and reads a context variable in its own thread."""
        before = var.get()
        var.set(tag)
        barrier.wait()  # both calls are running at the same time, in different threads
        seen[tag] = (before, var.get(), threading.get_ident())
        return tag

    var.set("caller")
    model = ScriptedChatModel(
        [
            ai_calls(
                call("sync_tool", '{"tag":"a"}', id="a"), call("sync_tool", '{"tag":"b"}', id="b")
            ),
            AiMessage("ok"),
        ]
    )
    run(mode, ToolService().tools(sync_tool), model)
    assert seen["a"][:2] == ("caller", "a") and seen["b"][:2] == ("caller", "b")
    assert seen["a"][2] != seen["b"][2]
    assert var.get() == "caller"


def test_cancelling_the_chat_cancels_running_tools() -> None:
    state = {"started": 0, "cancelled": 0}
    both_started = asyncio.Event()

    @tool
    async def forever(n: int) -> str:
        """Runs until cancelled."""
        state["started"] += 1
        if state["started"] == 2:
            both_started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            state["cancelled"] += 1
            raise
        return "never"

    async def main() -> None:
        model = ScriptedChatModel(
            [ai_calls(call("forever", '{"n":1}', id="1"), call("forever", '{"n":2}', id="2"))]
        )
        task = asyncio.create_task(ToolService().tools(forever).achat(model, None, "go"))
        await asyncio.wait_for(both_started.wait(), 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert others == []

    asyncio.run(main())
    assert state == {"started": 2, "cancelled": 2}


# --- streaming ----------------------------------------------------------------------------------


def test_stream_events_and_eager_start() -> None:
    from toolweave import (
        ChatCompleted,
        CompleteToolCall,
        PartialToolCall,
        ResponseCompleted,
        TextDelta,
        ToolExecutionFinished,
        ToolExecutionStarted,
    )

    model = ScriptedChatModel(
        [
            AiMessage(
                "Let me check.",
                tool_execution_requests=[
                    call("get_weather", '{"city":"杭州"}', id="c1"),
                    call("add", '{"a": 1, "b": 2}', id="c2"),
                ],
            ),
            AiMessage("It is sunny."),
        ],
        chunk_size=2,
    )
    service = ToolService().tools(get_weather, add)
    events = list(service.chat_stream(model, None, "weather?", eager=True))
    kinds = [type(e) for e in events]
    assert kinds[-1] is ChatCompleted
    assert TextDelta in kinds and PartialToolCall in kinds
    first_complete = kinds.index(CompleteToolCall)
    first_started = kinds.index(ToolExecutionStarted)
    first_response = kinds.index(ResponseCompleted)
    assert first_complete < first_started < first_response  # started before the model finished
    finished = [e for e in events if isinstance(e, ToolExecutionFinished)]
    assert [
        f.execution.request.id for f in sorted(finished, key=lambda f: f.execution.request.id)
    ] == ["c1", "c2"]
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == "Let me check.It is sunny."
    result = events[-1].result
    assert result.text == "It is sunny."
    assert_history_valid(result.messages)


# --- callbacks, usage, continuation ------------------------------------------------------------------


def test_loop_events_fire_in_order() -> None:
    from toolweave import CallbackFramework, ToolCallEvents

    cb = CallbackFramework()
    seen: list[str] = []
    for name in ("model_request", "model_response", "round_started", "round_finished"):
        cb.register(name, lambda _n=name, **kw: seen.append(_n))
    model = ScriptedChatModel([ai_calls(call("add", '{"a":1,"b":2}')), AiMessage("3")])
    ToolService(callbacks=cb).tools(add).chat(model, None, "1+2")
    assert seen == [
        ToolCallEvents.MODEL_REQUEST,
        ToolCallEvents.MODEL_RESPONSE,
        ToolCallEvents.ROUND_STARTED,
        ToolCallEvents.ROUND_FINISHED,
        ToolCallEvents.MODEL_REQUEST,
        ToolCallEvents.MODEL_RESPONSE,
    ]


def test_token_usage_is_summed_and_conversation_can_continue() -> None:
    from toolweave import ChatResponse, TokenUsage

    model = ScriptedChatModel(
        [
            ChatResponse(
                ai_calls(call("add", '{"a":1,"b":2}')),
                usage=TokenUsage(input_tokens=10, output_tokens=2, total_tokens=12),
            ),
            ChatResponse(
                AiMessage("3"), usage=TokenUsage(input_tokens=20, output_tokens=1, total_tokens=21)
            ),
            AiMessage("6"),
        ]
    )
    service = ToolService().tools(add)
    first = service.chat(model, None, "1+2")
    assert first.token_usage == TokenUsage(input_tokens=30, output_tokens=3, total_tokens=33)
    second = service.chat(model, None, [*first.messages, UserMessage("times two")])
    assert second.text == "6"
    assert model.requests[-1].messages[:4] == tuple(first.messages)


def test_caller_parameters_win_and_tools_are_merged() -> None:
    model = ScriptedChatModel([AiMessage("hi")])
    extra = ToolCard(name="extra")
    service = ToolService().tools(add)
    service.chat(
        model,
        ChatRequestParameters(model="m", temperature=0.2, tools=[extra], tool_choice="required"),
        "x",
    )
    params = model.requests[0].parameters
    assert params.model == "m" and params.temperature == 0.2
    assert [c.name for c in params.tools] == ["extra", "add"]
    assert params.tool_choice == ToolChoice.REQUIRED


def test_unknown_request_options_are_refused_not_dropped() -> None:
    """A typo or a vendor option as a field would vanish from the request body; it is a
    typed error naming the option and the way to pass it."""
    from toolweave import ErrorCode, UnsupportedOptionError

    with pytest.raises(UnsupportedOptionError) as info:
        ChatRequestParameters(temperature=0, max_token=10)
    assert info.value.code == ErrorCode.PROVIDER_UNSUPPORTED_OPTION
    assert info.value.option == "max_token" and "custom_parameters" in info.value.message
    with pytest.raises(ValueError):
        ChatRequestParameters.model_validate({"seed": 42})
    assert ChatRequestParameters(custom_parameters={"seed": 42}).custom_parameters == {"seed": 42}


def test_overlap_of_parallel_async_tools() -> None:
    @tool
    async def nap() -> float:
        """Sleeps a bit."""
        start = time.perf_counter()
        await asyncio.sleep(0.1)
        return start

    model = ScriptedChatModel([ai_calls(call("nap", id="1"), call("nap", id="2")), AiMessage("ok")])
    result = ToolService().tools(nap).chat(model, None, "go")
    a, b = result.tool_executions
    assert b.start_time < a.finish_time and a.start_time < b.finish_time


@pytest.mark.parametrize("mode", MODES)
def test_forced_tool_choice_is_relaxed_after_a_round(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("add", '{"a":1,"b":2}')), AiMessage("3")])
    run(
        mode,
        ToolService().tools(add),
        model,
        parameters=ChatRequestParameters(tool_choice="required"),
    )
    assert [r.parameters.tool_choice for r in model.requests] == [
        ToolChoice.REQUIRED,
        ToolChoice.AUTO,
    ]

    model = ScriptedChatModel([ai_calls(call("add", '{"a":1,"b":2}')), AiMessage("3")])
    service = ToolService(reset_tool_choice=False).tools(add)
    run(mode, service, model, parameters=ChatRequestParameters(tool_choice=ToolChoice.tool("add")))
    assert [r.parameters.tool_choice for r in model.requests] == [ToolChoice.tool("add")] * 2


def test_sync_faces_do_not_render_the_conversation() -> None:
    """On the main thread, asyncio.Runner.run looks up its SIGINT handler afterwards, which
    formats the repr of its task and thus of the task's result (the whole conversation); the
    sync face keeps the result out of that task (W6 was ~4x slower per round)."""
    reprs: list[int] = []

    import dataclasses

    @dataclasses.dataclass(repr=False)
    class Payload:
        value: int = 1

        def __repr__(self) -> str:
            reprs.append(1)
            return "Payload()"

    @tool
    def fetch() -> Any:
        """Fetch."""
        return Payload()

    assert threading.current_thread() is threading.main_thread()
    service = ToolService().tools(fetch)
    script = [ai_calls(call("fetch", "{}", id="f1")), AiMessage("done")]
    result = service.chat(ScriptedChatModel(script), None, "go")
    assert result.text == "done" and not result.tool_executions[0].result.is_error
    assert isinstance(result.tool_executions[0].result.result, Payload)
    events = list(service.chat_stream(ScriptedChatModel(script), None, "go"))
    assert events[-1].result.text == "done"
    assert reprs == []


class _WaitsForTheConsumer:
    """A model whose stream, after a complete tool call, waits until the consumer has seen
    that tool finish (hang guard: 5 s) before it streams the rest of its answer."""

    def __init__(self) -> None:
        self.seen_finished: asyncio.Event | None = None
        self.turn = 0

    async def astream(self, request: Any) -> Any:
        from toolweave import ChatResponse, CompleteToolCall, ResponseCompleted, TextDelta

        self.turn += 1
        if self.turn > 1:
            yield TextDelta("bye")
            yield ResponseCompleted(ChatResponse(AiMessage("bye")))
            return
        request_ = call("add", '{"a": 1, "b": 2}', id="c1")
        yield CompleteToolCall(0, request_)
        assert self.seen_finished is not None
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.seen_finished.wait(), 5)
        yield TextDelta("still talking")
        yield ResponseCompleted(ChatResponse(AiMessage("still talking", [request_])))


def test_eager_tool_progress_is_delivered_as_it_happens() -> None:
    from toolweave import TextDelta, ToolExecutionFinished, ToolExecutionStarted

    async def main() -> list[Any]:
        model = _WaitsForTheConsumer()
        model.seen_finished = asyncio.Event()
        events: list[Any] = []
        service = ToolService().tools(add)
        async for event in service.achat_stream(model, None, "1+2", eager=True):  # type: ignore[arg-type]
            events.append(event)
            if isinstance(event, ToolExecutionFinished):
                model.seen_finished.set()
        return events

    events = asyncio.run(main())
    kinds = [type(e).__name__ for e in events]
    # the tool's start and finish arrive while the model is still streaming, before the
    # text it sends afterwards (they used to wait for the model's next event)
    assert kinds.index("ToolExecutionStarted") < kinds.index("ToolExecutionFinished")
    assert kinds.index("ToolExecutionFinished") < kinds.index("TextDelta")
    finished = next(e for e in events if isinstance(e, ToolExecutionFinished))
    assert finished.execution.result.text == "3"
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["still talking", "bye"]
    assert sum(isinstance(e, ToolExecutionStarted) for e in events) == 1


def test_closing_an_eager_stream_stops_its_reader_from_starting_tools() -> None:
    from toolweave import ChatResponse, CompleteToolCall, ResponseCompleted, ToolExecutionStarted

    started: list[str] = []
    resumed: list[bool] = []
    more = asyncio.Event()

    @tool
    async def slow(tag: str) -> str:
        """Takes a while."""
        started.append(tag)
        await asyncio.sleep(5)
        return tag

    class TwoCalls:
        async def astream(self, request: Any) -> Any:
            first = call("slow", '{"tag": "first"}', id="c1")
            yield CompleteToolCall(0, first)
            await more.wait()  # the reader waits here when the consumer closes the stream
            resumed.append(True)  # the reader must be gone by now: never reached
            second = call("slow", '{"tag": "second"}', id="c2")
            yield CompleteToolCall(1, second)
            yield ResponseCompleted(
                ChatResponse(AiMessage(tool_execution_requests=[first, second]))
            )

    async def main() -> None:
        stream = ToolService().tools(slow).achat_stream(TwoCalls(), None, "go", eager=True)  # type: ignore[arg-type]
        async for event in stream:
            if isinstance(event, ToolExecutionStarted):
                break
        await stream.aclose()
        more.set()  # had the reader survived, it would now start the second call
        for _ in range(20):
            await asyncio.sleep(0.01)
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        assert others == []

    asyncio.run(main())
    assert started == ["first"] and resumed == []
