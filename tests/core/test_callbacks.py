"""Callback framework (openJiuwen test_metaclass_callbacks.py and the framework rules) and the
OpenTelemetry bridge."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from toolweave import (
    AbortError,
    DefaultToolExecutor,
    ToolArgumentsError,
    ToolCallEvents,
    ToolExecutionRequest,
    tool,
)
from toolweave.callbacks import LOOP_EVENTS, TOOL_EVENTS, CallbackFramework


def make_tool(fw: CallbackFramework) -> Any:
    @tool(callbacks=fw)
    def shout(text: str) -> str:
        """Upper-case the text."""
        return text.upper()

    return shout


def test_event_registry() -> None:
    assert ToolCallEvents.TOOL_CALL_STARTED == "tool_call_started"
    assert len(TOOL_EVENTS) == 13
    assert {"tool_progress", "tool_log"} <= TOOL_EVENTS
    assert sorted(LOOP_EVENTS) == [
        "model_request",
        "model_response",
        "round_finished",
        "round_paused",
        "round_started",
    ]


async def test_trigger_skips_transforms(fw: CallbackFramework) -> None:
    fw.register("e", lambda value: "transformed", transform=True)
    fw.register("e", lambda: "observed")
    assert await fw.trigger("e") == ["observed"]
    assert fw.trigger_sync("e") == ["observed"]
    assert await fw.transform("e", "v") == "transformed"


def test_input_trigger_sees_transformed_args(fw: CallbackFramework) -> None:
    order: list[str] = []
    seen: list[Any] = []

    def transform(value: dict[str, Any]) -> dict[str, Any]:
        order.append("transform")
        return {"text": value["text"] + "!"}

    def observe(inputs: dict[str, Any]) -> None:
        order.append("trigger")
        seen.append(inputs)

    fw.register("tool_invoke_input", observe)  # registered first, still runs after
    fw.register("tool_invoke_input", transform, transform=True)
    assert make_tool(fw).invoke({"text": "x"}) == "X!"
    assert order == ["transform", "trigger"]
    assert seen == [{"text": "x!"}]


async def test_output_trigger_sees_transformed_result(fw: CallbackFramework) -> None:
    seen: list[Any] = []
    fw.register("tool_invoke_output", lambda value: value + "!", transform=True)
    fw.register("tool_invoke_output", lambda result: seen.append(result))
    assert await make_tool(fw).ainvoke({"text": "x"}) == "X!"
    assert seen == ["X!"]


def test_both_transforms(fw: CallbackFramework) -> None:
    fw.register("tool_invoke_input", lambda value: {"text": value["text"] * 2}, transform=True)
    fw.register("tool_invoke_output", lambda value: value + "!", transform=True)
    assert make_tool(fw).invoke({"text": "x"}) == "XX!"


def test_transforms_chain_in_priority_order(fw: CallbackFramework) -> None:
    fw.register("tool_invoke_output", lambda value: value + "a", transform=True, priority=1)
    fw.register("tool_invoke_output", lambda value: value + "b", transform=True, priority=5)
    fw.register("tool_invoke_output", lambda value: None, transform=True)  # None keeps value
    assert make_tool(fw).invoke({"text": "x"}) == "Xba"


def test_transform_exception_propagates(fw: CallbackFramework) -> None:
    def bad(value: Any) -> Any:
        raise LookupError("transform failed")

    fw.register("tool_invoke_input", bad, transform=True)
    with pytest.raises(LookupError, match="transform failed"):
        make_tool(fw).invoke({"text": "x"})


@pytest.mark.parametrize("use_async", [False, True])
async def test_stream_input_and_per_item_output_transforms(
    fw: CallbackFramework, use_async: bool
) -> None:
    @tool(callbacks=fw)
    def letters(text: str) -> Iterator[str]:
        yield from text

    received: list[Any] = []
    outputs: list[Any] = []
    fw.register("tool_stream_input", lambda value: {"text": value["text"] + "z"}, transform=True)
    fw.register("tool_stream_output", lambda value: value.upper(), transform=True)
    fw.register("tool_result_received", lambda result: received.append(result))
    fw.register("tool_stream_output", lambda result: outputs.append(result))
    if use_async:
        chunks = [c async for c in letters.astream({"text": "ab"})]
    else:
        chunks = list(letters.stream({"text": "ab"}))
    assert chunks == ["A", "B", "Z"]
    assert received == ["a", "b", "z"]
    assert outputs == ["A", "B", "Z"]


def test_priorities_higher_first_and_stable(fw: CallbackFramework) -> None:
    calls: list[str] = []
    fw.register("tool_call_started", lambda: calls.append("p0-first"))
    fw.register("tool_call_started", lambda: calls.append("p5"), priority=5)
    fw.register("tool_call_started", lambda: calls.append("p0-second"))
    fw.register("tool_call_started", lambda: calls.append("p-1"), priority=-1)
    make_tool(fw).invoke({"text": "x"})
    assert calls == ["p5", "p0-first", "p0-second", "p-1"]


def test_once(fw: CallbackFramework) -> None:
    calls: list[str] = []
    handle = fw.register("tool_call_started", lambda: calls.append("once"), once=True)
    fw.register("tool_call_started", lambda: calls.append("always"))
    t = make_tool(fw)
    t.invoke({"text": "x"})
    t.invoke({"text": "x"})
    assert calls == ["once", "always", "always"]
    assert not fw.unregister("tool_call_started", handle)
    assert fw.count == 1


def test_async_callbacks_in_sync_invoke(fw: CallbackFramework) -> None:
    calls: list[str] = []

    async def observer(tool_name: str) -> None:
        await asyncio.sleep(0)
        calls.append(tool_name)

    async def transform(value: str) -> str:
        await asyncio.sleep(0)
        return value + "?"

    fw.register("tool_call_finished", observer)
    fw.register("tool_invoke_output", transform, transform=True)
    assert make_tool(fw).invoke({"text": "x"}) == "X?"
    assert calls == ["shout"]


async def test_sync_invoke_with_async_callbacks_inside_running_loop(fw: CallbackFramework) -> None:
    calls: list[str] = []

    async def observer() -> None:
        calls.append("ran")

    fw.register("tool_call_started", observer)
    assert make_tool(fw).invoke({"text": "x"}) == "X"  # sync API called from async code
    assert calls == ["ran"]


def test_failing_observer_is_logged_not_raised(
    fw: CallbackFramework, caplog: pytest.LogCaptureFixture
) -> None:
    def broken() -> None:
        raise RuntimeError("observer broken")

    after: list[str] = []
    fw.register("tool_call_finished", broken, priority=1)
    fw.register("tool_call_finished", lambda: after.append("still runs"))
    with caplog.at_level(logging.WARNING, logger="toolweave.callbacks"):
        assert make_tool(fw).invoke({"text": "x"}) == "X"
    assert after == ["still runs"]
    assert "observer broken" in caplog.text and "RuntimeError" in caplog.text


@pytest.mark.parametrize("use_async", [False, True])
async def test_abort_error_vetoes_the_call(fw: CallbackFramework, use_async: bool) -> None:
    ran: list[str] = []

    @tool(callbacks=fw)
    def guarded(x: int) -> int:
        ran.append("ran")
        return x

    def veto(inputs: dict[str, Any]) -> None:
        raise AbortError("not allowed")

    fw.register("tool_invoke_input", veto)
    with pytest.raises(AbortError) as e:
        if use_async:
            await guarded.ainvoke({"x": 1})
        else:
            guarded.invoke({"x": 1})
    assert e.value.reason == "not allowed" and e.value.code == 110600
    assert ran == []


def test_abort_error_with_cause_raises_the_cause(fw: CallbackFramework) -> None:
    def veto() -> None:
        raise AbortError("denied", cause=PermissionError("no access"))

    fw.register("tool_call_started", veto)
    with pytest.raises(PermissionError, match="no access") as e:
        make_tool(fw).invoke({"text": "x"})
    assert isinstance(e.value.__cause__, AbortError)


def test_abort_propagates_through_executor(fw: CallbackFramework) -> None:
    fw.register("tool_call_started", lambda: (_ for _ in ()).throw(AbortError("stop")))
    with pytest.raises(AbortError):
        DefaultToolExecutor(make_tool(fw)).execute(
            ToolExecutionRequest(name="shout", arguments='{"text": "a"}')
        )


def test_callbacks_receive_only_named_kwargs(fw: CallbackFramework) -> None:
    got: list[Any] = []
    fw.register("tool_call_finished", lambda result: got.append(("named", result)))
    fw.register("tool_call_finished", lambda **kw: got.append(("all", sorted(kw))))
    make_tool(fw).invoke({"text": "x"})
    assert got == [("named", "X"), ("all", ["inputs", "result", "tool_id", "tool_name"])]


def test_unregister_and_clear(fw: CallbackFramework) -> None:
    def cb() -> None: ...

    fw.register("a", cb)
    fw.register("b", cb)
    assert fw.has("a") and fw.count == 2
    assert fw.unregister("a", cb) and not fw.has("a")
    fw.clear("b")
    assert fw.count == 0


def test_decorator_forms(fw: CallbackFramework) -> None:
    @fw.on("tool_call_started", priority=3)
    def observer() -> None: ...

    @fw.on_transform("tool_invoke_output")
    def tr(value: str) -> str:
        return value * 2

    assert make_tool(fw).invoke({"text": "x"}) == "XX"
    assert fw.count == 2


# OpenTelemetry ---------------------------------------------------------------------------------
def test_span_on_success_via_executor(spans: InMemorySpanExporter) -> None:
    t = make_tool(CallbackFramework())
    DefaultToolExecutor(t).execute(
        ToolExecutionRequest(id="call_42", name="shout", arguments='{"text": "a"}')
    )
    (span,) = spans.get_finished_spans()
    assert span.name == "execute_tool shout"
    assert span.attributes is not None
    assert span.attributes["gen_ai.tool.name"] == "shout"
    assert span.attributes["gen_ai.tool.call.id"] == "call_42"
    assert span.attributes["gen_ai.operation.name"] == "execute_tool"
    assert span.attributes["gen_ai.tool.description"] == "Upper-case the text."
    assert "error.type" not in span.attributes
    assert span.status.status_code is StatusCode.UNSET


async def test_span_on_failure(spans: InMemorySpanExporter) -> None:
    @tool
    def boom() -> None:
        raise KeyError("k")

    result = await DefaultToolExecutor(boom).aexecute_with_result(
        ToolExecutionRequest(id="c1", name="boom")
    )
    assert result.is_error
    with pytest.raises(ToolArgumentsError):
        DefaultToolExecutor(make_tool(CallbackFramework())).execute(
            ToolExecutionRequest(id="c2", name="shout", arguments="[]")
        )
    first, second = spans.get_finished_spans()
    assert first.attributes is not None and second.attributes is not None
    assert first.attributes["error.type"] == "KeyError"
    assert first.status.status_code is StatusCode.ERROR
    assert second.attributes["error.type"] == "ToolArgumentsError"
    assert second.attributes["gen_ai.tool.call.id"] == "c2"


def test_no_span_without_provider() -> None:
    from toolweave.callbacks.otel import tracing_enabled

    assert not tracing_enabled()
    assert make_tool(CallbackFramework()).invoke({"text": "x"}) == "X"
