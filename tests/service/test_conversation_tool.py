"""A conversation as a tool (`ToolService.as_tool`), through the four faces: what each model
receives, the final answer or structured output as the call's result, events nested with the
path of their call, usage added up, cancellation and timeouts reaching the child's tools."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from pydantic import BaseModel

from toolweave import (
    AiMessage,
    ApprovalRequired,
    Approve,
    ChatCompleted,
    ChatResponse,
    ChatStatus,
    ConversationState,
    DeferredResult,
    Deny,
    ScriptedChatModel,
    SystemMessage,
    TokenUsage,
    ToolChoice,
    ToolContext,
    ToolExecutionFinished,
    ToolExecutionResultMessage,
    ToolExecutionStarted,
    ToolService,
    ToolTimeoutError,
    UsageLimitExceeded,
    UsageLimits,
    UserMessage,
    tool,
)
from toolweave.service import (
    CallAlreadyDecidedError,
    InvalidConversationStateError,
    ToolProgress,
)
from toolweave.service.subagent import (
    SUBCONVERSATION_ATTRIBUTE,
    ConversationTool,
    NestedEvent,
    NestedPendingCall,
    Task,
)
from toolweave.toolsets import FunctionToolset

from .helpers import MODES, ai_calls, assert_history_valid, call, run


@tool
def forecast(city: str) -> str:
    """The weather in a city."""
    return f"{city}: sunny, 21 C"


def used(i: int, o: int) -> TokenUsage:
    return TokenUsage(input_tokens=i, output_tokens=o, total_tokens=i + o)


def said(message: AiMessage, usage: TokenUsage) -> ChatResponse:
    return ChatResponse(message, usage=usage)


def results(request: Any) -> list[tuple[str, str]]:
    """The (call id, text) of every tool result a model request holds."""
    return [(m.id, m.text) for m in request.messages if isinstance(m, ToolExecutionResultMessage)]


def names(request: Any) -> list[str]:
    return [c.name for c in request.parameters.tools or ()]


def weather_pair() -> tuple[ScriptedChatModel, ScriptedChatModel, ToolService]:
    """A parent that asks a `weather` sub-conversation, which calls `forecast`."""
    child_model = ScriptedChatModel(
        [
            said(ai_calls(call("forecast", '{"city": "Paris"}', id="c1")), used(5, 1)),
            said(AiMessage("Sunny in Paris, 21 C."), used(7, 2)),
        ]
    )
    child = ToolService().tools(forecast)
    weather = child.as_tool(
        child_model,
        name="weather",
        description="Answers weather questions.",
        instructions="You are the weather desk.",
    )
    parent_model = ScriptedChatModel(
        [
            said(ai_calls(call("weather", '{"task": "Weather in Paris?"}', id="p1")), used(10, 1)),
            said(AiMessage("Paris: sunny."), used(20, 2)),
        ]
    )
    return parent_model, child_model, ToolService().tools(weather)


@pytest.mark.parametrize("mode", MODES)
def test_the_sub_conversations_answer_is_the_calls_result(mode: str) -> None:
    parent_model, child_model, parent = weather_pair()
    result = run(mode, parent, parent_model, "What is the weather in Paris?")
    assert result.text == "Paris: sunny."
    # the child saw its instructions and the task only, and its own tools
    first, second = child_model.requests
    assert first.messages == (
        SystemMessage("You are the weather desk."),
        UserMessage("Weather in Paris?"),
    )
    assert names(first) == names(second) == ["forecast"]
    assert results(second) == [("c1", "Paris: sunny, 21 C")]
    # the parent offered the one tool, and got the child's answer as its result
    assert [names(r) for r in parent_model.requests] == [["weather"], ["weather"]]
    assert parent_model.requests[0].parameters.tools[0].input_params["required"] == ["task"]
    assert results(parent_model.requests[1]) == [("p1", "Sunny in Paris, 21 C.")]
    (execution,) = result.tool_executions
    assert execution.result.result == "Sunny in Paris, 21 C."
    assert not execution.has_failed
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_the_usage_of_the_sub_conversation_counts_into_the_parents(mode: str) -> None:
    parent_model, _, parent = weather_pair()
    result = run(mode, parent, parent_model, "What is the weather in Paris?")
    assert result.token_usage == used(10 + 20 + 5 + 7, 1 + 2 + 1 + 2)
    # what the sub-conversation used travels with its call's result, into the history
    (message,) = [m for m in result.messages if isinstance(m, ToolExecutionResultMessage)]
    assert message.attributes[SUBCONVERSATION_ATTRIBUTE] == {
        "usage": {"input_tokens": 12, "output_tokens": 3, "total_tokens": 15},
        "requests": 2,
        "tool_calls": 1,
    }


class Forecast(BaseModel):
    city: str
    celsius: float


@pytest.mark.parametrize("mode", MODES)
def test_with_output_type_the_structured_output_is_the_result(mode: str) -> None:
    child_model = ScriptedChatModel(
        [
            ai_calls(call("forecast", '{"city": "Oslo"}', id="c1")),
            AiMessage('{"city": "Oslo", "celsius": 3.5}'),
        ]
    )
    weather = (
        ToolService()
        .tools(forecast)
        .as_tool(child_model, name="weather", description="Weather.", output_type=Forecast)
    )
    parent_model = ScriptedChatModel(
        [ai_calls(call("weather", '{"task": "Oslo?"}', id="p1")), AiMessage("3.5 C in Oslo.")]
    )
    result = run(mode, ToolService().tools(weather), parent_model, "Oslo?")
    assert result.text == "3.5 C in Oslo."
    assert [r.parameters.response_format for r in child_model.requests] == [Forecast, Forecast]
    assert parent_model.requests[0].parameters.response_format is None
    (execution,) = result.tool_executions
    assert execution.result.result == Forecast(city="Oslo", celsius=3.5)
    assert results(parent_model.requests[1]) == [("p1", '{"city": "Oslo", "celsius": 3.5}')]


class Brief(BaseModel):
    topic: str
    words: int = 50


@pytest.mark.parametrize("mode", MODES)
def test_input_is_the_argument_model_and_prompt_makes_the_opening(mode: str) -> None:
    child_model = ScriptedChatModel([AiMessage("A short text.")])
    writer = ToolService().as_tool(
        child_model,
        name="writer",
        description="Writes.",
        input=Brief,
        prompt=lambda brief: f"Write {brief.words} words on {brief.topic}.",
    )
    parent_model = ScriptedChatModel(
        [ai_calls(call("writer", '{"topic": "tides"}', id="p1")), AiMessage("Done.")]
    )
    result = run(mode, ToolService().tools(writer), parent_model, "Write on tides")
    assert result.text == "Done."
    assert child_model.requests[0].messages == (UserMessage("Write 50 words on tides."),)
    schema = parent_model.requests[0].parameters.tools[0].input_params
    assert set(schema["properties"]) == {"topic", "words"}
    assert schema["required"] == ["topic"]
    assert names(child_model.requests[0]) == []  # the child has no tools of its own


def test_without_prompt_custom_arguments_reach_the_child_as_json() -> None:
    child_model = ScriptedChatModel([AiMessage("ok")])
    writer = ToolService().as_tool(child_model, name="w", description="W.", input=Brief)
    parent_model = ScriptedChatModel(
        [ai_calls(call("w", '{"topic": "tides", "words": 9}')), AiMessage("ok")]
    )
    ToolService().tools(writer).chat(parent_model, None, "go")
    assert child_model.requests[0].messages == (UserMessage('{"topic":"tides","words":9}'),)


def test_the_default_input_is_one_task_string() -> None:
    made = ToolService().as_tool(ScriptedChatModel([]), name="helper", description="Helps.")
    assert isinstance(made, ConversationTool)
    assert made.input is Task
    assert made.card.input_params["properties"]["task"]["type"] == "string"
    with pytest.raises(TypeError, match="pydantic model"):
        ToolService().as_tool(ScriptedChatModel([]), name="h", description="H.", input=dict)


@pytest.mark.parametrize("mode", MODES)
def test_a_conversation_tool_is_accepted_in_a_toolset(mode: str) -> None:
    _, child_model, _ = weather_pair()
    made = child_model_tool(child_model)
    parent = ToolService(toolsets=[FunctionToolset(made).prefixed("desk")])
    parent_model = ScriptedChatModel(
        [
            ai_calls(call("desk_weather", '{"task": "Weather in Paris?"}', id="p1")),
            AiMessage("Paris: sunny."),
        ]
    )
    result = run(mode, parent, parent_model, "What is the weather in Paris?")
    assert result.text == "Paris: sunny."
    assert [names(r) for r in parent_model.requests] == [["desk_weather"]] * 2
    assert results(parent_model.requests[1]) == [("p1", "Sunny in Paris, 21 C.")]
    assert len(child_model.requests) == 2


def child_model_tool(child_model: ScriptedChatModel) -> ConversationTool:
    return ToolService().tools(forecast).as_tool(child_model, name="weather", description="W.")


# events -------------------------------------------------------------------------------------


def two_levels() -> tuple[ScriptedChatModel, ScriptedChatModel, ScriptedChatModel, ToolService]:
    """parent -> `desk` (a sub-conversation) -> `weather` (a sub-sub-conversation) ->
    `forecast`."""
    grand_model = ScriptedChatModel(
        [ai_calls(call("forecast", '{"city": "Rome"}', id="g1")), AiMessage("Rome: sunny.")]
    )
    weather = ToolService().tools(forecast).as_tool(grand_model, name="weather", description="W.")
    child_model = ScriptedChatModel(
        [ai_calls(call("weather", '{"task": "Rome"}', id="c1")), AiMessage("Sunny, says desk.")]
    )
    desk = ToolService().tools(weather).as_tool(child_model, name="desk", description="D.")
    parent_model = ScriptedChatModel(
        [ai_calls(call("desk", '{"task": "Rome?"}', id="p1")), AiMessage("It is sunny.")]
    )
    return parent_model, child_model, grand_model, ToolService().tools(desk)


def stream(mode: str, service: ToolService, model: Any, messages: Any = "hi") -> list[Any]:
    if mode == "stream":
        return list(service.chat_stream(model, None, messages))

    async def consume() -> list[Any]:
        return [e async for e in service.achat_stream(model, None, messages, eager=True)]

    return asyncio.run(consume())


@pytest.mark.parametrize("mode", ["stream", "astream_eager"])
def test_the_sub_conversations_events_reach_the_parents_stream_with_their_path(
    mode: str,
) -> None:
    parent_model, child_model, grand_model, parent = two_levels()
    events = stream(mode, parent, parent_model, "Rome?")
    assert isinstance(events[-1], ChatCompleted)
    assert events[-1].result.text == "It is sunny."
    nested = [e for e in events if isinstance(e, NestedEvent)]
    assert {e.path for e in nested} == {("p1",), ("p1", "c1")}
    assert all(not isinstance(e.event, NestedEvent) for e in nested)
    assert {e.path: e.tool_names for e in nested} == {
        ("p1",): ("desk",),
        ("p1", "c1"): ("desk", "weather"),
    }
    # the tool events of each level, under their own path
    tools_seen = [
        (e.path, type(e.event).__name__, e.event.request.id)
        for e in nested
        if isinstance(e.event, ToolExecutionStarted)
    ]
    assert tools_seen == [
        (("p1",), "ToolExecutionStarted", "c1"),
        (("p1", "c1"), "ToolExecutionStarted", "g1"),
    ]
    finished = [
        (e.path, e.event.execution.result.result_text())
        for e in nested
        if isinstance(e.event, ToolExecutionFinished)
    ]
    assert finished == [(("p1", "c1"), "Rome: sunny, 21 C"), (("p1",), "Rome: sunny.")]
    completed = [
        (e.path, e.event.result.text) for e in nested if isinstance(e.event, ChatCompleted)
    ]
    assert completed == [(("p1", "c1"), "Rome: sunny."), (("p1",), "Sunny, says desk.")]
    # the nested events come between the parent's start and finish of its call
    top = [
        i
        for i, e in enumerate(events)
        if isinstance(e, ToolExecutionStarted | ToolExecutionFinished)
    ]
    first_nested = events.index(nested[0])
    last_nested = events.index(nested[-1])
    assert top[0] < first_nested and last_nested < top[1]
    assert results(child_model.requests[1]) == [("c1", "Rome: sunny.")]
    assert results(grand_model.requests[1]) == [("g1", "Rome: sunny, 21 C")]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_two_levels_without_streaming(mode: str) -> None:
    parent_model, child_model, grand_model, parent = two_levels()
    result = run(mode, parent, parent_model, "Rome?")
    assert result.text == "It is sunny."
    assert grand_model.requests[0].messages == (UserMessage("Rome"),)
    assert child_model.requests[0].messages == (UserMessage("Rome?"),)
    assert results(parent_model.requests[1]) == [("p1", "Sunny, says desk.")]


# cancellation and timeouts ------------------------------------------------------------------


class Waiter:
    """A tool that reports progress and waits for ever, recording how it ended."""

    def __init__(self) -> None:
        self.started: asyncio.Event | None = None
        """Set when the tool waits (made by an async test, on its loop)."""
        self.ended: list[str] = []

    def tool(self) -> Any:
        @tool
        async def wait_for_signal(ctx: ToolContext) -> str:
            """Waits for a signal."""
            if self.started is not None:
                self.started.set()
            await ctx.areport_progress(1, 2, "waiting")
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                self.ended.append("cancelled")
                raise
            return "never"

        return wait_for_signal


def waiting_pair(
    waiter: Waiter, timeout: float | None = None
) -> tuple[ScriptedChatModel, ToolService]:
    child_model = ScriptedChatModel([ai_calls(call("wait_for_signal", id="c1")), AiMessage("x")])
    helper = (
        ToolService()
        .tools(waiter.tool())
        .as_tool(child_model, name="helper", description="H.", timeout=timeout)
    )
    parent_model = ScriptedChatModel(
        [ai_calls(call("helper", '{"task": "wait"}', id="p1")), AiMessage("It took too long.")]
    )
    return parent_model, ToolService().tools(helper)


def test_cancelling_the_parent_cancels_the_childs_tool_calls_async() -> None:
    waiter = Waiter()
    parent_model, parent = waiting_pair(waiter)

    async def main() -> None:
        waiter.started = asyncio.Event()
        task = asyncio.create_task(parent.achat(parent_model, None, "go"))
        await waiter.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert waiter.ended == ["cancelled"]


def test_cancelling_the_parents_stream_cancels_the_childs_tool_calls_astream() -> None:
    waiter = Waiter()
    parent_model, parent = waiting_pair(waiter)

    async def main() -> None:
        waiter.started = asyncio.Event()

        async def consume() -> None:
            async for _ in parent.achat_stream(parent_model, None, "go", eager=True):
                pass

        task = asyncio.create_task(consume())
        await waiter.started.wait()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    assert waiter.ended == ["cancelled"]


def test_closing_the_parents_sync_stream_cancels_the_childs_tool_calls() -> None:
    waiter = Waiter()
    parent_model, parent = waiting_pair(waiter)
    events = parent.chat_stream(parent_model, None, "go")
    for event in events:
        if isinstance(event, NestedEvent) and isinstance(event.event, ToolProgress):
            assert event.path == ("p1",)
            break
    events.close()  # type: ignore[attr-defined]
    assert waiter.ended == ["cancelled"]


def test_closing_a_sync_stream_cancels_its_running_tool_at_once() -> None:
    waiter = Waiter()
    model = ScriptedChatModel([ai_calls(call("wait_for_signal", id="c1")), AiMessage("x")])
    events = ToolService().tools(waiter.tool()).chat_stream(model, None, "go")
    for event in events:
        if isinstance(event, ToolProgress):
            break
    events.close()  # type: ignore[attr-defined]
    assert waiter.ended == ["cancelled"]


@pytest.mark.parametrize("mode", MODES)
def test_the_calls_timeout_cancels_the_childs_tool_calls(mode: str) -> None:
    waiter = Waiter()
    parent_model, parent = waiting_pair(waiter, timeout=0.2)
    result = run(mode, parent, parent_model, "go")
    assert waiter.ended == ["cancelled"]
    (execution,) = result.tool_executions
    assert execution.has_failed
    assert isinstance(execution.result.error, ToolTimeoutError)
    assert result.text == "It took too long."
    assert_history_valid(result.messages)


# approvals inside a sub-conversation --------------------------------------------------------


class Files:
    """A tool that needs approval, recording what it ran."""

    def __init__(self) -> None:
        self.deleted: list[str] = []

        @tool(requires_approval=True)
        def delete_file(path: str) -> str:
            """Delete a file."""
            self.deleted.append(path)
            return f"deleted {path}"

        self.tool = delete_file


def nested_two_levels(
    files: Files,
) -> tuple[ScriptedChatModel, ScriptedChatModel, ScriptedChatModel, ToolService]:
    """parent -> `desk` -> `cleaner` -> `delete_file` (which needs approval)."""
    grand_model = ScriptedChatModel(
        [ai_calls(call("delete_file", '{"path": "/tmp/x"}', id="g1")), AiMessage("Deleted.")]
    )
    cleaner = ToolService().tools(files.tool).as_tool(grand_model, name="cleaner", description="C.")
    child_model = ScriptedChatModel(
        [ai_calls(call("cleaner", '{"task": "delete /tmp/x"}', id="c1")), AiMessage("Clean.")]
    )
    desk = ToolService().tools(cleaner).as_tool(child_model, name="desk", description="D.")
    parent_model = ScriptedChatModel(
        [ai_calls(call("desk", '{"task": "tidy up"}', id="p1")), AiMessage("All tidy.")]
    )
    return parent_model, child_model, grand_model, ToolService().tools(desk)


SECRET = "a signing key of at least 16 bytes"


@pytest.mark.parametrize("mode", MODES)
def test_a_nested_approval_two_levels_deep_pauses_the_top_and_resumes_it_once(
    mode: str,
) -> None:
    files = Files()
    parent_model, child_model, grand_model, parent = nested_two_levels(files)
    paused = run(mode, parent, parent_model, "Tidy up")
    assert paused.status is ChatStatus.PENDING
    (waiting,) = paused.pending
    assert isinstance(waiting, NestedPendingCall)
    assert (waiting.id, waiting.tool_name, waiting.reason) == ("g1", "delete_file", "approval")
    assert waiting.arguments_as_dict() == {"path": "/tmp/x"}
    assert (waiting.path, waiting.tool_names, waiting.key) == (
        ("p1", "c1"),
        ("desk", "cleaner"),
        "p1/c1/g1",
    )
    assert [p.id for p in paused.state.pending] == ["p1"]  # the top's own call stands for it
    assert files.deleted == []
    assert [len(m.requests) for m in (parent_model, child_model, grand_model)] == [1, 1, 1]

    state = ConversationState.from_json(paused.state.to_json(key=SECRET), key=SECRET)
    done = run(mode, parent, parent_model, state, decisions={"g1": Approve()})
    assert done.status is ChatStatus.COMPLETED
    assert done.text == "All tidy."
    assert files.deleted == ["/tmp/x"]
    # each model was asked once more, with its own call's result; nobody was asked again
    assert grand_model.requests[1].messages == (
        UserMessage("delete /tmp/x"),
        ai_calls(call("delete_file", '{"path": "/tmp/x"}', id="g1")),
        ToolExecutionResultMessage(id="g1", tool_name="delete_file", text="deleted /tmp/x"),
    )
    assert results(child_model.requests[1]) == [("c1", "Deleted.")]
    assert results(parent_model.requests[1]) == [("p1", "Clean.")]
    assert [len(m.requests) for m in (parent_model, child_model, grand_model)] == [2, 2, 2]
    assert_history_valid(done.messages)

    with pytest.raises(CallAlreadyDecidedError):  # the same pause again: nothing runs twice
        run(mode, parent, parent_model, state, decisions={"g1": Approve()})
    assert files.deleted == ["/tmp/x"]


@pytest.mark.parametrize("mode", MODES)
def test_a_nested_call_is_decided_by_its_key_and_a_denial_reaches_the_child(mode: str) -> None:
    files = Files()
    parent_model, _, grand_model, parent = nested_two_levels(files)
    paused = run(mode, parent, parent_model, "Tidy up")
    done = run(mode, parent, parent_model, paused.state, decisions={"p1/c1/g1": Deny("Keep it.")})
    assert done.text == "All tidy."
    assert files.deleted == []
    assert results(grand_model.requests[1]) == [("g1", "Keep it.")]
    assert grand_model.requests[1].messages[-1].is_error


def two_waiting(files: Files) -> tuple[ScriptedChatModel, ScriptedChatModel, ToolService]:
    child_model = ScriptedChatModel(
        [
            ai_calls(
                call("delete_file", '{"path": "a"}', id="d1"),
                call("delete_file", '{"path": "b"}', id="d2"),
            ),
            AiMessage("Handled a and b."),
        ]
    )
    cleaner = ToolService().tools(files.tool).as_tool(child_model, name="cleaner", description="C.")
    parent_model = ScriptedChatModel(
        [ai_calls(call("cleaner", '{"task": "a and b"}', id="p1")), AiMessage("Done.")]
    )
    return parent_model, child_model, ToolService().tools(cleaner)


@pytest.mark.parametrize("mode", MODES)
def test_calls_of_a_sub_conversation_decided_one_at_a_time(mode: str) -> None:
    files = Files()
    parent_model, child_model, parent = two_waiting(files)
    paused = run(mode, parent, parent_model, "go")
    assert [(p.key, p.reason) for p in paused.pending] == [
        ("p1/d1", "approval"),
        ("p1/d2", "approval"),
    ]
    half = run(mode, parent, parent_model, paused.state, decisions={"d1": Approve()})
    assert half.status is ChatStatus.PENDING
    assert [p.key for p in half.pending] == ["p1/d2"]
    assert files.deleted == ["a"]
    assert len(child_model.requests) == 1  # the child's round is not answered yet
    done = run(mode, parent, parent_model, half.state, decisions={"d2": Deny("not b")})
    assert done.text == "Done."
    assert files.deleted == ["a"]
    assert results(child_model.requests[1]) == [("d1", "deleted a"), ("d2", "not b")]
    assert results(parent_model.requests[1]) == [("p1", "Handled a and b.")]


@pytest.mark.parametrize("mode", MODES)
def test_approving_the_sub_conversation_call_approves_every_call_waiting_in_it(
    mode: str,
) -> None:
    files = Files()
    parent_model, _, parent = two_waiting(files)
    paused = run(mode, parent, parent_model, "go")
    done = run(mode, parent, parent_model, paused.state, decisions={"p1": Approve()})
    assert done.text == "Done."
    assert sorted(files.deleted) == ["a", "b"]  # run concurrently


def test_an_id_waiting_in_two_sub_conversations_is_decided_by_key() -> None:
    files = Files()
    child_model = ScriptedChatModel(
        lambda request: (
            AiMessage("ok")
            if results(request)
            else ai_calls(call("delete_file", f'{{"path": "{request.messages[0].text}"}}', id="x"))
        )
    )
    cleaner = ToolService().tools(files.tool).as_tool(child_model, name="cleaner", description="C.")
    parent_model = ScriptedChatModel(
        [
            ai_calls(
                call("cleaner", '{"task": "one"}', id="p1"),
                call("cleaner", '{"task": "two"}', id="p2"),
            ),
            AiMessage("Both."),
        ]
    )
    parent = ToolService().tools(cleaner)
    paused = parent.chat(parent_model, None, "go")
    assert [p.key for p in paused.pending] == ["p1/x", "p2/x"]
    with pytest.raises(InvalidConversationStateError, match="p1/x, p2/x"):
        parent.chat(parent_model, None, paused.state, decisions={"x": Approve()})
    done = parent.chat(
        parent_model, None, paused.state, decisions={"p1/x": Approve(), "p2/x": Deny()}
    )
    assert done.text == "Both."
    assert files.deleted == ["one"]


@pytest.mark.parametrize("mode", MODES)
def test_the_parents_own_waiting_calls_are_listed_with_the_nested_ones(mode: str) -> None:
    files = Files()
    _, _, parent = two_waiting(files)
    parent.deferred("ask_user")
    parent_model = ScriptedChatModel(
        [
            ai_calls(call("ask_user", id="u1"), call("cleaner", '{"task": "a and b"}', id="p1")),
            AiMessage("Done."),
        ]
    )
    paused = run(mode, parent, parent_model, "go")
    assert [(p.id, getattr(p, "path", ())) for p in paused.pending] == [
        ("u1", ()),
        ("d1", ("p1",)),
        ("d2", ("p1",)),
    ]
    done = run(
        mode,
        parent,
        parent_model,
        paused.state,
        decisions={"u1": DeferredResult("yes"), "d1": Approve(), "d2": Approve()},
    )
    assert done.text == "Done."
    assert results(parent_model.requests[1]) == [("u1", "yes"), ("p1", "Handled a and b.")]


@pytest.mark.parametrize("mode", ["stream", "astream_eager"])
def test_a_nested_pause_in_the_stream(mode: str) -> None:
    files = Files()
    parent_model, _, _, parent = nested_two_levels(files)
    events = stream(mode, parent, parent_model, "Tidy up")
    required = [e for e in events if isinstance(e, ApprovalRequired)]
    assert [[p.key for p in e.pending] for e in required] == [["p1/c1/g1"]]
    assert events[-2] is required[0] and isinstance(events[-1], ChatCompleted)
    # the sub-conversations' own pauses are nested events, with their path
    inner = [
        e.path
        for e in events
        if isinstance(e, NestedEvent) and isinstance(e.event, ApprovalRequired)
    ]
    assert inner == [("p1", "c1"), ("p1",)]


def test_a_decision_for_no_waiting_call_is_refused_before_anything_runs() -> None:
    files = Files()
    parent_model, _, _, parent = nested_two_levels(files)
    paused = parent.chat(parent_model, None, "Tidy up")
    with pytest.raises(InvalidConversationStateError, match="not a pending call"):
        parent.chat(parent_model, None, paused.state, decisions={"g9": Approve()})
    with pytest.raises(InvalidConversationStateError, match="waits for approval"):
        parent.chat(parent_model, None, paused.state, decisions={"g1": DeferredResult("x")})
    with pytest.raises(InvalidConversationStateError, match="denied"):
        parent.chat(parent_model, None, paused.state, decisions={"p1": Deny(), "g1": Approve()})
    assert files.deleted == []
    done = parent.chat(parent_model, None, paused.state, decisions={"p1": Deny("No.")})
    assert done.text == "All tidy."  # the whole sub-conversation was denied
    assert results(parent_model.requests[1]) == [("p1", "No.")]


@pytest.mark.parametrize("mode", MODES)
def test_the_parents_allow_rule_does_not_answer_the_calls_inside(mode: str) -> None:
    files = Files()
    parent_model, _, _, parent = nested_two_levels(files)
    parent.allow("desk", "*")  # the parent's rules cover its own calls, not the child's
    paused = run(mode, parent, parent_model, "Tidy up")
    assert [p.key for p in paused.pending] == ["p1/c1/g1"]
    assert files.deleted == []
    done = run(mode, parent, parent_model, paused.state, decisions={"g1": Approve()})
    assert done.text == "All tidy."
    assert files.deleted == ["/tmp/x"]


@pytest.mark.parametrize("mode", MODES)
def test_the_childs_own_rules_apply_inside_it(mode: str) -> None:
    files = Files()
    grand_model = ScriptedChatModel(
        [ai_calls(call("delete_file", '{"path": "/tmp/x"}', id="g1")), AiMessage("Deleted.")]
    )
    child = ToolService().tools(files.tool).allow("delete_file", when={"path": {"$glob": "/tmp/*"}})
    cleaner = child.as_tool(grand_model, name="cleaner", description="C.")
    parent_model = ScriptedChatModel(
        [ai_calls(call("cleaner", '{"task": "x"}', id="p1")), AiMessage("Done.")]
    )
    result = run(mode, ToolService().tools(cleaner), parent_model, "go")
    assert result.status is ChatStatus.COMPLETED
    assert files.deleted == ["/tmp/x"]


# the parent's budget ------------------------------------------------------------------------


@pytest.mark.parametrize("mode", MODES)
def test_the_sub_conversations_requests_count_into_the_parents_budget(mode: str) -> None:
    parent_model, child_model, parent = weather_pair()
    # the parent's first request and the child's two: a fourth would be one too many
    with pytest.raises(UsageLimitExceeded) as raised:
        run(mode, parent, parent_model, "Paris?", usage_limits=UsageLimits(requests=3))
    assert (raised.value.limit, raised.value.used) == ("requests", 3)
    assert len(parent_model.requests) == 1
    assert len(child_model.requests) == 2
    assert raised.value.usage.tool_calls == 2  # the parent's call and the child's


@pytest.mark.parametrize("mode", MODES)
def test_the_sub_conversation_gets_what_is_left_of_the_parents_budget(mode: str) -> None:
    parent_model, child_model, parent = weather_pair()
    parent_model = ScriptedChatModel(
        [
            ai_calls(call("weather", '{"task": "Weather in Paris?"}', id="p1")),
            AiMessage("I could not find out."),
        ]
    )
    limits = UsageLimits(requests=2, on_exceeded="answer")
    result = run(mode, parent, parent_model, "Paris?", usage_limits=limits)
    # the child had one request left: it made it, then stopped before its second
    assert len(child_model.requests) == 1
    (execution,) = result.tool_executions
    assert execution.has_failed
    assert isinstance(execution.result.error, UsageLimitExceeded)
    assert "stopped" in execution.result.result_text()
    # the parent's budget is spent too: its model is told so and answers, without tools
    assert result.text == "I could not find out."
    last = parent_model.requests[-1]
    assert last.parameters.tool_choice == ToolChoice.NONE
    assert "budget" in (last.messages[-1].text or "")


@pytest.mark.parametrize("mode", MODES)
def test_the_sub_conversations_tokens_count_into_the_parents_token_budget(mode: str) -> None:
    parent_model, child_model, parent = weather_pair()
    # the parent's first response used 11 tokens, the child's two 6 + 9: 26 before the
    # parent's second request, more than the 20 allowed
    with pytest.raises(UsageLimitExceeded) as raised:
        run(mode, parent, parent_model, "Paris?", usage_limits=UsageLimits(total_tokens=20))
    assert (raised.value.limit, raised.value.used) == ("total_tokens", 26)
    assert len(child_model.requests) == 2


@pytest.mark.parametrize("mode", MODES)
def test_the_sub_conversations_own_budget_still_holds(mode: str) -> None:
    child_model = ScriptedChatModel([ai_calls(call("forecast", '{"city": "Rome"}', id="c1"))])
    child = ToolService(usage_limits=UsageLimits(tool_calls=0))
    weather = child.tools(forecast).as_tool(child_model, name="weather", description="W.")
    parent_model = ScriptedChatModel(
        [ai_calls(call("weather", '{"task": "Rome"}', id="p1")), AiMessage("Unknown.")]
    )
    parent = ToolService().tools(weather)
    result = run(mode, parent, parent_model, "Rome?", usage_limits=UsageLimits(requests=10))
    (execution,) = result.tool_executions
    assert isinstance(execution.result.error, UsageLimitExceeded)
    assert execution.result.error.limit == "tool_calls"
    assert result.text == "Unknown."


@pytest.mark.parametrize("mode", MODES)
def test_requires_approval_gates_the_conversation_tool_call_itself(mode: str) -> None:
    child_model = ScriptedChatModel([AiMessage("Checked.")])
    checker = ToolService().as_tool(
        child_model,
        name="checker",
        description="Checks.",
        requires_approval=True,
        prompt=lambda task: [SystemMessage("Be brief."), UserMessage(f"Check: {task.task}")],
    )
    parent_model = ScriptedChatModel(
        [ai_calls(call("checker", '{"task": "the door"}', id="p1")), AiMessage("Door checked.")]
    )
    parent = ToolService().tools(checker)
    paused = run(mode, parent, parent_model, "Check the door")
    (waiting,) = paused.pending
    assert not isinstance(waiting, NestedPendingCall)  # the call itself, before it runs
    assert (waiting.id, waiting.tool_name) == ("p1", "checker")
    assert child_model.requests == []
    done = run(mode, parent, parent_model, paused.state, decisions={"p1": Approve()})
    assert done.text == "Door checked."
    assert child_model.requests[0].messages == (
        SystemMessage("Be brief."),
        UserMessage("Check: the door"),
    )
