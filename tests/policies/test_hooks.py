"""Hooks (issue 29 item 1): before each model request (rewrite the request and the history),
around the model call, around each tool call, after each tool result — ordered, composable,
sync or async, the same through every face, with the scripted model asserting what the
model received; a rewrite that breaks the history is refused (or, for a result whose call
is gone, repaired)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from service.helpers import MODES, ai_calls, assert_history_valid, call, run
from toolweave import (
    AiMessage,
    CallbackFramework,
    ChatCompleted,
    ChatRequest,
    ChatResponse,
    ResponseCompleted,
    ScriptedChatModel,
    StepContext,
    SystemMessage,
    TextDelta,
    ToolCallEvents,
    ToolContext,
    ToolExecutionRequest,
    ToolExecutionResult,
    ToolExecutionResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from toolweave.errors import ErrorCode
from toolweave.policies import (
    Hook,
    InvalidHistoryError,
    after_tool_result,
    around_model_call,
    around_tool_call,
    before_model_request,
    history_processor,
)


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def adds(n: int, final: str = "done") -> list[AiMessage]:
    """A script of `n` rounds of one `add` call (ids c0, c1, ...), then `final`."""
    rounds = [ai_calls(call("add", f'{{"a": 1, "b": {i}}}', id=f"c{i}")) for i in range(n)]
    return [*rounds, AiMessage(final)]


def results(model: ScriptedChatModel, request: int = -1) -> list[tuple[str, str, bool]]:
    """The tool results the model received in request #`request`: (id, text, is_error)."""
    return [
        (m.id, m.text, m.is_error)
        for m in model.requests[request].messages
        if isinstance(m, ToolExecutionResultMessage)
    ]


def streamed(service: ToolService, model: Any, **kw: Any) -> list[Any]:
    return list(service.chat_stream(model, None, "go", **kw))


# before each model request -------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_history_processor_trims_what_the_model_receives_and_the_history(mode: str) -> None:
    seen: list[int] = []

    def last_turn(messages: list[Any]) -> list[Any]:
        seen.append(len(messages))
        # the first user message and the last model turn with its results
        return [messages[0], *messages[-2:]] if len(messages) > 3 else messages

    model = ScriptedChatModel(adds(3))
    service = ToolService(hooks=[history_processor(last_turn)]).tools(add)
    result = run(mode, service, model)

    assert result.text == "done"
    assert [len(r.messages) for r in model.requests] == [1, 3, 3, 3]
    assert [r.messages[0].text for r in model.requests] == ["hi"] * 4  # type: ignore[union-attr]
    assert results(model) == [("c2", "3", False)]
    assert seen == [1, 3, 5, 5]  # each step sees the history the previous one kept
    assert [m.type for m in result.messages] == ["user", "ai", "tool_result", "ai"]
    assert_history_valid(result.messages)
    assert len(result.tool_executions) == 3  # every result is still in the executions


@pytest.mark.parametrize("mode", MODES)
def test_an_async_history_processor_summarises_old_turns_with_the_users_function(
    mode: str,
) -> None:
    summaries: list[int] = []

    async def summarise(messages: list[Any]) -> str:  # the user's own (a model, usually)
        await asyncio.sleep(0)
        summaries.append(len(messages))
        return f"summary of {len(messages)} messages"

    async def compact(messages: list[Any]) -> list[Any]:
        if len(messages) < 5:
            return messages
        head, tail = messages[:-2], messages[-2:]
        return [UserMessage(await summarise(head)), *tail]

    model = ScriptedChatModel(adds(3))
    result = run(mode, ToolService(hooks=[history_processor(compact)]).tools(add), model)

    assert result.text == "done"
    assert model.requests[2].messages[0].text == "summary of 3 messages"  # type: ignore[union-attr]
    assert model.requests[3].messages[0].text == "summary of 3 messages"  # type: ignore[union-attr]
    assert summaries == [3, 3]
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_old_tool_results_are_stubbed_and_every_call_stays_answered(mode: str) -> None:
    def stub_old(messages: list[Any]) -> list[Any]:
        last_ai = max(i for i, m in enumerate(messages) if isinstance(m, AiMessage) or i == 0)
        return [
            m.model_copy(update={"text": f"[{m.tool_name} result removed]"})
            if isinstance(m, ToolExecutionResultMessage) and i < last_ai
            else m
            for i, m in enumerate(messages)
        ]

    model = ScriptedChatModel(adds(2))
    result = run(mode, ToolService(hooks=[history_processor(stub_old)]).tools(add), model)

    assert results(model) == [("c0", "[add result removed]", False), ("c1", "2", False)]
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_a_request_hook_changes_one_request_and_sees_the_step(mode: str) -> None:
    steps: list[StepContext] = []

    def cooler(request: ChatRequest, ctx: StepContext) -> ChatRequest | None:
        steps.append(ctx)
        if ctx.round == 0:
            return None  # unchanged
        parameters = request.parameters.model_copy(update={"temperature": 0.0})
        return request.model_copy(update={"parameters": parameters})

    model = ScriptedChatModel(adds(1))
    run(mode, ToolService(hooks=[before_model_request(cooler)]).tools(add), model, memory_id="m")

    assert [r.parameters.temperature for r in model.requests] == [None, 0.0]
    assert [s.round for s in steps] == [0, 1]
    assert steps[1].memory_id == "m" and len(steps[1].messages) == 3


@pytest.mark.parametrize("mode", MODES)
def test_before_hooks_run_in_order_each_seeing_what_the_previous_returned(mode: str) -> None:
    def tag(name: str) -> Any:
        def hook(request: ChatRequest, ctx: StepContext) -> ChatRequest:
            first = request.messages[0]
            text = f"{first.text}+{name}"  # type: ignore[union-attr]
            return request.model_copy(
                update={"messages": (UserMessage(text), *request.messages[1:])}
            )

        return before_model_request(hook)

    model = ScriptedChatModel([AiMessage("ok")])
    service = ToolService(hooks=[tag("service")])
    result = run(mode, service, model, hooks=[tag("a"), tag("b")])

    assert model.requests[0].messages[0].text == "hi+service+a+b"  # type: ignore[union-attr]
    assert result.messages[0].text == "hi+service+a+b"  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
def test_the_model_request_observers_see_the_rewritten_request(mode: str) -> None:
    callbacks = CallbackFramework()
    observed: list[int] = []
    callbacks.register(
        ToolCallEvents.MODEL_REQUEST, lambda request: observed.append(len(request.messages))
    )
    model = ScriptedChatModel(adds(2))
    service = ToolService(
        callbacks=callbacks,
        hooks=[history_processor(lambda m: m if len(m) < 3 else [m[0], *m[-2:]])],
    ).tools(add)
    run(mode, service, model)
    assert observed == [len(r.messages) for r in model.requests] == [1, 3, 3]


@pytest.mark.parametrize("mode", MODES)
def test_a_rewrite_leaving_a_call_without_its_result_is_refused(mode: str) -> None:
    def drop_results(messages: list[Any]) -> list[Any]:
        return [m for m in messages if not isinstance(m, ToolExecutionResultMessage)]

    model = ScriptedChatModel(adds(1))
    service = ToolService(hooks=[history_processor(drop_results)]).tools(add)
    with pytest.raises(InvalidHistoryError) as caught:
        run(mode, service, model)

    e = caught.value
    assert e.code == ErrorCode.HISTORY_INVALID
    assert (e.call_id, e.tool_name) == ("c0", "add")
    assert "drop_results" in (e.hook or "") and "'c0'" in e.message
    assert len(model.requests) == 1  # refused before the second request was sent
    assert_history_valid(e.partial_result.messages)  # the history as it was
    assert [m.type for m in e.partial_result.messages] == ["user", "ai", "tool_result"]


@pytest.mark.parametrize("mode", MODES)
def test_a_rewrite_answering_a_call_twice_is_refused(mode: str) -> None:
    def twice(messages: list[Any]) -> list[Any]:
        extra = [m for m in messages if isinstance(m, ToolExecutionResultMessage)]
        return [*messages, *extra]

    service = ToolService(hooks=[history_processor(twice)]).tools(add)
    with pytest.raises(InvalidHistoryError, match="answers the call 'c0' of 'add' twice"):
        run(mode, service, ScriptedChatModel(adds(1)))


@pytest.mark.parametrize("mode", MODES)
def test_a_trim_cutting_between_a_call_and_its_result_drops_the_orphan(mode: str) -> None:
    def first_and_last(messages: list[Any]) -> list[Any]:  # a naive trim by position
        return [messages[0], messages[-1]] if len(messages) > 2 else messages

    model = ScriptedChatModel(
        [ai_calls(call("add", '{"a": 1, "b": 1}', id="x"), call("add", id="y")), AiMessage("ok")]
    )
    result = run(mode, ToolService(hooks=[history_processor(first_and_last)]).tools(add), model)

    # the last result was kept, its AI message was not: the result is dropped too
    assert model.requests[1].messages == (UserMessage("hi"),)
    assert result.text == "ok"
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_a_trim_keeping_the_last_turn_repairs_orphans_before_it(mode: str) -> None:
    model = ScriptedChatModel(
        [
            ai_calls(
                call("add", '{"a": 1, "b": 1}', id="x"), call("add", '{"a": 1, "b": 2}', id="y")
            ),
            adds(1)[0],
            AiMessage("ok"),
        ]
    )

    def from_the_second_result(messages: list[Any]) -> list[Any]:
        return messages[3:] if len(messages) > 4 else messages  # starts at y's result

    result = run(
        mode, ToolService(hooks=[history_processor(from_the_second_result)]).tools(add), model
    )
    assert [m.type for m in model.requests[2].messages] == ["ai", "tool_result"]
    assert results(model, 2) == [("c0", "1", False)]
    assert result.text == "ok"
    assert_history_valid(result.messages)


def test_a_hook_returning_something_else_is_a_type_error() -> None:
    model = ScriptedChatModel([AiMessage("ok")])
    service = ToolService(hooks=[before_model_request(lambda request, ctx: "nope")])
    with pytest.raises(TypeError, match="must return a ChatRequest"):
        service.chat(model, None, "hi")
    with pytest.raises(TypeError, match="must return a list of messages"):
        ToolService(hooks=[history_processor(lambda m: None)]).chat(model, None, "hi")
    with pytest.raises(
        TypeError, match=r"around_model_call hook .*<lambda> must return a ChatResponse"
    ):
        ToolService(hooks=[around_model_call(lambda r, c, x: "text")]).chat(model, None, "hi")
    model = ScriptedChatModel(adds(1))
    service = ToolService(hooks=[around_tool_call(lambda c, t, x: "text")]).tools(add)
    service.chat(model, None, "hi")  # the call fails, the model is told why
    assert "must return a ToolExecutionResult, got str" in results(model)[0][1]


def test_hooks_take_hook_objects() -> None:
    with pytest.raises(TypeError, match=r"wrap a function with history_processor\(f\)"):
        ToolService(hooks=[lambda messages: messages])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="wrap a function"):
        ToolService().chat(ScriptedChatModel([]), None, "hi", hooks=[print])  # type: ignore[list-item]


# around the model call -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_model_hook_changes_what_is_sent_not_the_history(mode: str) -> None:
    async def with_rules(request: ChatRequest, call_model: Any, ctx: StepContext) -> ChatResponse:
        sent = request.model_copy(
            update={"messages": (SystemMessage("be brief"), *request.messages)}
        )
        return await call_model(sent)

    model = ScriptedChatModel(adds(1))
    result = run(mode, ToolService(hooks=[around_model_call(with_rules)]).tools(add), model)

    assert [type(r.messages[0]).__name__ for r in model.requests] == ["SystemMessage"] * 2
    assert result.messages[0] == UserMessage("hi")  # the history is not changed
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_a_model_hook_retries_a_failed_call(mode: str) -> None:
    attempts: list[int] = []

    def flaky(request: ChatRequest) -> AiMessage:
        attempts.append(len(request.messages))
        if len(attempts) == 1:
            raise ConnectionError("the provider hung up")
        return AiMessage("second try")

    async def retry(request: ChatRequest, call_model: Any, ctx: StepContext) -> ChatResponse:
        try:
            return await call_model(request)
        except ConnectionError:
            return await call_model(request)

    result = run(mode, ToolService(hooks=[around_model_call(retry)]), ScriptedChatModel(flaky))
    assert result.text == "second try" and attempts == [1, 1]


@pytest.mark.parametrize("mode", MODES)
def test_a_model_hook_answers_without_calling_the_model(mode: str) -> None:
    def cached(request: ChatRequest, call_model: Any, ctx: StepContext) -> ChatResponse:
        return ChatResponse(AiMessage("from the cache"))  # a sync hook, never calls the model

    model = ScriptedChatModel([])
    result = run(mode, ToolService(hooks=[around_model_call(cached)]), model)
    assert result.text == "from the cache" and model.requests == []


def test_a_streamed_model_hook_forwards_the_stream_and_ends_it_with_its_response() -> None:
    async def shout(request: ChatRequest, call_model: Any, ctx: StepContext) -> ChatResponse:
        response = await call_model(request)
        return response.model_copy(
            update={"ai_message": AiMessage((response.ai_message.text or "").upper())}
        )

    model = ScriptedChatModel([AiMessage("hello there")], chunk_size=4)
    events = streamed(ToolService(hooks=[around_model_call(shout)]), model)

    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "hello there"
    completed = [e for e in events if isinstance(e, ResponseCompleted)]
    assert [c.response.ai_message.text for c in completed] == ["HELLO THERE"]
    assert isinstance(events[-1], ChatCompleted) and events[-1].result.text == "HELLO THERE"


@pytest.mark.parametrize("mode", MODES)
def test_around_hooks_nest_the_first_outermost(mode: str) -> None:
    order: list[str] = []

    def layer(name: str) -> Hook:
        class Layer(Hook):
            async def around_model_call(self, request: Any, call_model: Any, ctx: Any) -> Any:
                order.append(f"{name}>")
                out = await call_model(request)
                order.append(f"<{name}")
                return out

            async def around_tool_call(self, c: Any, call_tool: Any, ctx: Any) -> Any:
                order.append(f"{name}[")
                out = await call_tool(c)
                order.append(f"]{name}")
                return out

        return Layer()

    service = ToolService(hooks=[layer("a")]).tools(add)
    run(mode, service, ScriptedChatModel(adds(1)), hooks=[layer("b")])
    assert order == ["a>", "b>", "<b", "<a", "a[", "b[", "]b", "]a", "a>", "b>", "<b", "<a"]


# around each tool call -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_tool_hook_changes_the_arguments(mode: str) -> None:
    async def doubled(c: ToolExecutionRequest, call_tool: Any, ctx: ToolContext) -> Any:
        assert ctx.tool_name == "add" and ctx.request_id == c.id
        return await call_tool(c.model_copy(update={"arguments": '{"a": 10, "b": 20}'}))

    model = ScriptedChatModel(adds(1))
    result = run(mode, ToolService(hooks=[around_tool_call(doubled)]).tools(add), model)
    assert results(model) == [("c0", "30", False)]
    assert result.tool_executions[0].result.text == "30"


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_hook_answers_without_running_the_tool(mode: str) -> None:
    ran: list[int] = []

    @tool
    def launch(n: int) -> str:
        """Launch something."""
        ran.append(n)
        return "launched"

    async def refuse(c: ToolExecutionRequest, call_tool: Any, ctx: ToolContext) -> Any:
        return ToolExecutionResult.error_result("not today")

    model = ScriptedChatModel([ai_calls(call("launch", '{"n": 1}')), AiMessage("ok")])
    run(mode, ToolService(hooks=[around_tool_call(refuse)]).tools(launch), model)
    assert ran == [] and results(model) == [("id_launch", "not today", True)]


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_hook_retries_a_failing_call(mode: str) -> None:
    failures = [1]

    @tool
    def fetch(url: str) -> str:
        """Fetch a page."""
        if failures:
            failures.pop()
            raise ConnectionError("reset by peer")
        return f"page {url}"

    async def once_more(c: ToolExecutionRequest, call_tool: Any, ctx: ToolContext) -> Any:
        try:
            return await call_tool(c)
        except Exception:
            return await call_tool(c)

    model = ScriptedChatModel([ai_calls(call("fetch", '{"url": "u"}')), AiMessage("ok")])
    run(mode, ToolService(hooks=[around_tool_call(once_more)]).tools(fetch), model)
    assert results(model) == [("id_fetch", "page u", False)]


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_hook_that_raises_fails_the_call_like_the_tool(mode: str) -> None:
    def forbid(c: ToolExecutionRequest, call_tool: Any, ctx: ToolContext) -> Any:
        raise PermissionError("add is off limits")

    model = ScriptedChatModel(adds(1))
    result = run(mode, ToolService(hooks=[around_tool_call(forbid)]).tools(add), model)
    assert results(model) == [("c0", "add is off limits", True)]
    assert result.text == "done"


@pytest.mark.parametrize("mode", MODES)
def test_argument_errors_reach_a_tool_hook_which_may_fix_them(mode: str) -> None:
    from toolweave import ToolArgumentsError

    async def default_b(c: ToolExecutionRequest, call_tool: Any, ctx: ToolContext) -> Any:
        try:
            return await call_tool(c)
        except ToolArgumentsError:
            return await call_tool(c.model_copy(update={"arguments": '{"a": 1, "b": 0}'}))

    model = ScriptedChatModel([ai_calls(call("add", '{"a": "x"}')), AiMessage("ok")])
    run(mode, ToolService(hooks=[around_tool_call(default_b)]).tools(add), model)
    assert results(model) == [("id_add", "1", False)]


@pytest.mark.parametrize("mode", MODES)
def test_a_sync_tool_hook_runs_in_a_thread_with_a_blocking_call_tool(mode: str) -> None:
    threads: list[bool] = []

    def bracket(c: ToolExecutionRequest, call_tool: Any, ctx: ToolContext) -> Any:
        threads.append(threading.current_thread() is threading.main_thread())
        result = call_tool(c)  # returns the result directly
        return ToolExecutionResult(text=f"[{result.text}]")

    model = ScriptedChatModel(adds(1))
    run(mode, ToolService(hooks=[around_tool_call(bracket)]).tools(add), model)
    assert results(model) == [("c0", "[1]", False)] and threads == [False]


def test_a_tool_hook_may_not_change_the_calls_id() -> None:
    async def renamed(c: ToolExecutionRequest, call_tool: Any, ctx: ToolContext) -> Any:
        return await call_tool(c.model_copy(update={"id": "other"}))

    model = ScriptedChatModel(adds(1))
    ToolService(hooks=[around_tool_call(renamed)]).tools(add).chat(model, None, "hi")
    assert "not its id or tool" in results(model)[0][1]


# after each tool result ----------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_an_after_hook_rewrites_the_result_the_model_receives(mode: str) -> None:
    def annotate(c: ToolExecutionRequest, result: ToolExecutionResult, ctx: ToolContext) -> Any:
        return ToolExecutionResult(text=f"{c.name} said {result.text}")

    async def keep(c: ToolExecutionRequest, result: ToolExecutionResult, ctx: ToolContext) -> Any:
        return None  # unchanged

    model = ScriptedChatModel(
        [ai_calls(call("add", '{"a": 1, "b": 1}'), call("nope", id="n")), AiMessage("ok")]
    )
    hooks = [after_tool_result(annotate), after_tool_result(keep)]
    result = run(mode, ToolService(hooks=hooks).tools(add), model)
    assert results(model)[0][1] == "add said 2"
    assert results(model)[1][1].startswith("nope said There is no tool named 'nope'")
    assert result.tool_executions[0].result.text == "add said 2"


@pytest.mark.parametrize("mode", MODES)
def test_an_after_hook_that_raises_ends_the_conversation_with_a_valid_history(
    mode: str,
) -> None:
    def stop(c: ToolExecutionRequest, result: ToolExecutionResult, ctx: ToolContext) -> Any:
        raise RuntimeError("stop here")

    model = ScriptedChatModel(adds(2))
    with pytest.raises(RuntimeError, match="stop here") as caught:
        run(mode, ToolService(hooks=[after_tool_result(stop)]).tools(add), model)
    assert len(model.requests) == 1
    messages = caught.value.partial_result.messages  # type: ignore[attr-defined]
    assert_history_valid(messages)
    assert messages[-1].text == "1"  # the call keeps its result


# a Hook of several points --------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_hook_subclass_overrides_only_what_it_needs(mode: str) -> None:
    class Audit(Hook):
        name = "audit"

        def __init__(self) -> None:
            self.log: list[str] = []

        def before_model_request(self, request: ChatRequest, ctx: StepContext) -> None:
            self.log.append(f"request {ctx.round}")

        async def after_tool_result(self, c: Any, result: Any, ctx: Any) -> None:
            self.log.append(f"result {c.id}={result.text}")

    audit = Audit()
    run(mode, ToolService().tools(add), ScriptedChatModel(adds(2)), hooks=[audit])
    assert audit.log == ["request 0", "result c0=1", "request 1", "result c1=2", "request 2"]
    assert repr(audit) == "<Audit audit>"


def test_the_sync_face_still_runs_a_sync_tool_on_its_own_thread_under_a_tool_hook() -> None:
    where: list[bool] = []

    @tool
    def here() -> str:
        """Say where it runs."""
        where.append(threading.current_thread() is threading.main_thread())
        return "ok"

    async def passthrough(c: ToolExecutionRequest, call_tool: Any, ctx: ToolContext) -> Any:
        return await call_tool(c)

    model = ScriptedChatModel([ai_calls(call("here")), AiMessage("done")])
    ToolService(hooks=[around_tool_call(passthrough)]).tools(here).chat(model, None, "hi")
    asyncio.run(
        ToolService(hooks=[around_tool_call(passthrough)])
        .tools(here)
        .achat(ScriptedChatModel([ai_calls(call("here")), AiMessage("done")]), None, "hi")
    )
    assert where == [True, False]  # inline in `chat` (no thread hop), a worker in `achat`


def test_cancelling_a_conversation_stops_what_a_sync_tool_hook_started() -> None:
    started, cancelled, hook_done = threading.Event(), threading.Event(), threading.Event()

    @tool
    async def slow() -> str:
        """Take long."""
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    def blocking(c: ToolExecutionRequest, call_tool: Any, ctx: ToolContext) -> Any:
        try:
            return call_tool(c)
        finally:
            hook_done.set()

    service = ToolService(hooks=[around_tool_call(blocking)]).tools(slow)
    model = ScriptedChatModel([ai_calls(call("slow")), AiMessage("done")])

    async def main() -> None:
        task = asyncio.create_task(service.achat(model, None, "hi"))
        assert await asyncio.to_thread(started.wait, 5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        # while the loop still runs: the tool stopped, the hook's thread is free
        assert await asyncio.to_thread(cancelled.wait, 5)
        assert await asyncio.to_thread(hook_done.wait, 5)

    asyncio.run(main())
