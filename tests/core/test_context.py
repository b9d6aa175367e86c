"""ToolContext injection, contextvars isolation, threads."""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
from typing import Annotated, Any

import pytest

from toolweave import (
    DefaultToolExecutor,
    Injected,
    ToolContext,
    ToolExecutionRequest,
    tool,
)

REQUEST_USER: contextvars.ContextVar[str | None] = contextvars.ContextVar("user", default=None)


def test_tool_context_from_executor() -> None:
    seen: list[ToolContext] = []

    @tool
    def who(x: int, ctx: ToolContext) -> str:
        seen.append(ctx)
        return f"{x}:{ctx.request_id}:{ctx.memory_id}:{ctx.context}"

    assert "ctx" not in who.card.input_params["properties"]
    executor = DefaultToolExecutor(who)
    text = executor.execute_with_result(
        ToolExecutionRequest(id="call_9", name="who", arguments='{"x": 1}'),
        "mem-1",
        context={"tenant": "acme"},
    ).text
    assert text == "1:call_9:mem-1:{'tenant': 'acme'}"
    assert seen[0].tool_name == "who"
    assert seen[0].callbacks is who.callbacks


def test_tool_context_default_when_invoked_directly() -> None:
    @tool
    def who(ctx: ToolContext) -> str:
        return f"{ctx.tool_name}:{ctx.request_id}"

    assert who.invoke({}) == "who:None"


def test_direct_invoke_keywords_reach_the_tool_context() -> None:
    @tool
    def who(ctx: ToolContext) -> str:
        return f"{ctx.context}:{ctx.memory_id}:{ctx.extra}"

    assert who.invoke({}, context="C", memory_id="M", session="S") == "C:M:{'session': 'S'}"


def test_hand_written_card_function_gets_its_tool_context() -> None:
    """`LocalFunction(card, fn)` without a generated schema: a `ToolContext` parameter is
    filled like a declared tool's (it is not in the card's schema)."""
    from toolweave import AiMessage, ScriptedChatModel, ToolCard, ToolService
    from toolweave.tools import LocalFunction

    def lookup(key: str, ctx: ToolContext) -> str:
        return f"{key}:{ctx.request_id}:{ctx.memory_id}:{ctx.context}"

    card = ToolCard(
        name="lookup",
        input_params={
            "type": "object",
            "properties": {"key": {"type": "string"}},
            "required": ["key"],
        },
    )
    fn = LocalFunction(card, lookup)
    assert fn.invoke({"key": "k"}, context="C", memory_id="M") == "k:None:M:C"
    call = ToolExecutionRequest(id="c1", name="lookup", arguments='{"key": "k"}')
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[call]), AiMessage("ok")])
    result = ToolService().tools(fn).chat(model, None, "go", memory_id="mem", context="ctx")
    assert result.tool_executions[0].result.text == "k:c1:mem:ctx"


def test_injected_from_user_context_object() -> None:
    @tool
    def f(db: Annotated[str, Injected()], ctx: ToolContext) -> str:
        return db

    executor = DefaultToolExecutor(f)
    result = executor.execute_with_result(ToolExecutionRequest(name="f"), context={"db": "pg"})
    assert result.text == "pg"


def test_missing_injected_value_is_an_error_result() -> None:
    @tool
    def f(db: Annotated[str, Injected()]) -> str:
        return db

    result = DefaultToolExecutor(f).execute_with_result(ToolExecutionRequest(name="f"))
    assert result.is_error
    assert "the injected parameter 'db' was not supplied" in result.text


async def test_contextvars_isolated_for_parallel_sync_tools() -> None:
    @tool
    def read_and_set(tag: str) -> str:
        before = REQUEST_USER.get()
        REQUEST_USER.set("changed-by-" + tag)
        time.sleep(0.02)
        return f"{before}|{REQUEST_USER.get()}"

    async def call(tag: str) -> str:
        REQUEST_USER.set(tag)
        out: str = await read_and_set.ainvoke({"tag": tag})
        assert REQUEST_USER.get() == tag  # the tool's set did not leak back
        return out

    results = await asyncio.gather(*(call(str(i)) for i in range(6)))
    assert results == [f"{i}|changed-by-{i}" for i in range(6)]
    assert REQUEST_USER.get() is None


async def test_sync_function_runs_off_the_event_loop_thread() -> None:
    loop_thread = threading.get_ident()

    @tool
    def where() -> int:
        return threading.get_ident()

    assert await where.ainvoke({}) != loop_thread
    executor = DefaultToolExecutor(where)
    result = await executor.aexecute_with_result(ToolExecutionRequest(name="where"))
    assert int(result.text) != loop_thread


async def test_sync_tools_do_not_block_the_loop() -> None:
    @tool
    def slow() -> str:
        time.sleep(0.2)
        return "done"

    ticks = 0

    async def ticker() -> None:
        nonlocal ticks
        for _ in range(5):
            await asyncio.sleep(0.01)
            ticks += 1

    result, _ = await asyncio.gather(slow.ainvoke({}), ticker())
    assert result == "done"
    assert ticks == 5  # the ticker ran to completion while the tool slept


async def test_async_tool_sees_caller_context() -> None:
    @tool
    async def read() -> str | None:
        return REQUEST_USER.get()

    REQUEST_USER.set("ann")
    try:
        assert await read.ainvoke({}) == "ann"
        assert await asyncio.to_thread(read.invoke, {}) == "ann"
    finally:
        REQUEST_USER.set(None)


def test_sync_stream_of_async_generator_sees_context() -> None:
    @tool
    async def gen(n: int) -> Any:
        for _ in range(n):
            yield REQUEST_USER.get()

    token = REQUEST_USER.set("bo")
    try:
        assert list(gen.stream({"n": 2})) == ["bo", "bo"]
    finally:
        REQUEST_USER.reset(token)


async def test_sync_stream_of_async_generator_inside_running_loop() -> None:
    closed: list[bool] = []

    @tool
    async def gen(n: int) -> Any:
        try:
            for i in range(n):
                yield i
        finally:
            closed.append(True)

    it = gen.stream({"n": 100})
    assert next(it) == 0 and next(it) == 1
    it.close()  # an early stop closes the async generator
    assert closed == [True]


@pytest.mark.parametrize("n", [1, 3])
def test_tool_context_is_frozen(n: int) -> None:
    ctx = ToolContext(tool_name="t", request_id=str(n))
    with pytest.raises(AttributeError):
        ctx.tool_name = "x"  # type: ignore[misc]
