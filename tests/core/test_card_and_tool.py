"""ToolCard (ToolCardTest), Tool (ToolTest) and LocalFunction (LocalFunctionTest)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from typing import Any

import pytest
from core_support import Recorder

from toolweave import (
    ErrorCode,
    LocalFunction,
    ReturnBehavior,
    Tool,
    ToolArgumentsError,
    ToolCard,
    ToolCardError,
    ToolContext,
    ToolInfo,
    ToolNotSupportedError,
    tool,
)
from toolweave.callbacks import CallbackFramework

SCHEMA = {
    "type": "object",
    "properties": {"path": {"type": "string"}, "mode": {"type": "string", "default": "text"}},
    "required": ["path"],
}


# ToolCard ------------------------------------------------------------------------------------
def test_card_flag_defaults() -> None:
    card = ToolCard(name="t")
    assert (card.parallel_safe, card.stateless, card.idempotent) == (True, False, False)
    assert card.strict is None and card.timeout is None
    assert card.return_behavior is ReturnBehavior.TO_LLM
    assert card.input_params == {"type": "object", "properties": {}}
    assert card.metadata == {} and card.properties == {}
    assert card.description == ""


def test_card_auto_id_is_32_hex() -> None:
    a, b = ToolCard(name="t"), ToolCard(name="t")
    assert len(a.id) == 32 and int(a.id, 16) >= 0 and a.id == a.id.lower()
    assert a.id != b.id
    assert a != b  # two auto ids are never equal


def test_card_equality_and_hash_by_value() -> None:
    def make(**kw: Any) -> ToolCard:
        return ToolCard(id="x1", name="t", description="d", input_params=SCHEMA, **kw)

    assert make() == make()
    assert hash(make()) == hash(make())
    assert make() != make(idempotent=True)
    assert make(metadata={"a": 1}) != make(metadata={"a": 2})
    mapping = {make(): "executor"}
    assert mapping[make()] == "executor"
    assert len({make(), make(), make(timeout=3)}) == 2


def test_card_is_immutable_and_copies_schema() -> None:
    schema = {"type": "object", "properties": {"a": {"type": "integer"}}}
    card = ToolCard(name="t", input_params=schema)
    schema["properties"]["b"] = {"type": "string"}
    assert "b" not in card.input_params["properties"]
    with pytest.raises(Exception):  # noqa: B017 - pydantic frozen error
        card.name = "other"  # type: ignore[misc]
    copy = card.model_copy(update={"description": "new"})
    assert copy.id == card.id and copy.description == "new"


def test_card_tool_info_and_to_str() -> None:
    card = ToolCard(id="abc", name="t", description="d", input_params=SCHEMA)
    assert card.tool_info() == ToolInfo(
        type="function", name="t", description="d", parameters=SCHEMA
    )
    assert ToolInfo().type == "function" and ToolInfo().parameters == {}
    assert card.to_str() == "id=abc,name=t"


def test_card_validation_errors_are_card_errors() -> None:
    with pytest.raises(ToolCardError, match="timeout must be positive") as e:
        ToolCard(name="t", timeout=0)
    assert e.value.code == ErrorCode.TOOL_CARD_INVALID == 182000
    with pytest.raises(ToolCardError, match="input_params must be an object schema"):
        ToolCard(name="t", input_params={"type": "array"})
    with pytest.raises(ToolCardError, match="input_params must be a JSON Schema object"):
        ToolCard(name="t", input_params=None)  # type: ignore[arg-type]
    with pytest.raises(ToolCardError, match="bogus"):
        ToolCard(name="t", bogus=1)  # type: ignore[call-arg]


def test_card_accepts_pydantic_model_as_schema() -> None:
    from pydantic import BaseModel

    class Args(BaseModel):
        city: str

    card = ToolCard(name="t", input_params=Args)  # type: ignore[arg-type]
    assert card.input_params["properties"] == {"city": {"title": "City", "type": "string"}}
    assert "title" not in card.input_params


# Tool ----------------------------------------------------------------------------------------
class Adder(Tool):
    def invoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        return inputs["a"] + inputs["b"]


class Failing(Tool):
    def invoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        raise KeyError("original")


class Chunks(Tool):
    async def astream_internal(self, inputs: dict[str, Any], **kwargs: Any) -> AsyncIterator[Any]:
        for i in range(inputs["n"]):
            yield i


ADD_SCHEMA = {
    "type": "object",
    "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"],
}


def test_tool_rejects_null_card_and_empty_id() -> None:
    with pytest.raises(ToolCardError) as e:
        Adder(None)  # type: ignore[arg-type]
    assert e.value.code == 182000 and e.value.message == "card is None"
    with pytest.raises(ToolCardError) as e:
        Adder(ToolCard(id="", name="t"))
    assert e.value.code == 182000 and e.value.message == "card id is None or empty"


def test_tool_card_is_read_only_and_tool_info() -> None:
    card = ToolCard(name="add", input_params=ADD_SCHEMA)
    t = Adder(card)
    assert t.card is card and t.name == "add"
    with pytest.raises(AttributeError):
        t.card = card  # type: ignore[misc]
    assert t.tool_info() == card.tool_info()


def test_tool_event_order_and_transforms(fw: CallbackFramework, recorder: Recorder) -> None:
    t = Adder(ToolCard(name="add", input_params=ADD_SCHEMA), callbacks=fw)
    fw.register("tool_invoke_input", lambda value: {**value, "b": 5}, transform=True)
    fw.register("tool_invoke_output", lambda value: value * 11, transform=True)
    assert t.invoke({"a": 3, "b": 1}) == 88
    assert recorder.names == [
        "tool_invoke_input",
        "tool_call_started",
        "tool_parse_started",
        "tool_parse_finished",
        "tool_call_finished",
        "tool_invoke_output",
    ]
    assert recorder.first("tool_invoke_input")["inputs"] == {"a": 3, "b": 5}
    assert recorder.first("tool_call_finished")["result"] == 8
    assert recorder.first("tool_invoke_output")["result"] == 88
    assert recorder.first("tool_invoke_output")["tool_info"] == t.tool_info()


async def test_tool_event_order_async(fw: CallbackFramework, recorder: Recorder) -> None:
    t = Adder(ToolCard(name="add", input_params=ADD_SCHEMA), callbacks=fw)
    assert await t.ainvoke({"a": 3, "b": 1}) == 4
    assert recorder.names == [
        "tool_invoke_input",
        "tool_call_started",
        "tool_parse_started",
        "tool_parse_finished",
        "tool_call_finished",
        "tool_invoke_output",
    ]


@pytest.mark.parametrize("use_async", [False, True])
async def test_tool_error_fires_error_not_finished_and_reraises(
    fw: CallbackFramework, recorder: Recorder, use_async: bool
) -> None:
    t = Failing(ToolCard(name="f"), callbacks=fw)
    with pytest.raises(KeyError, match="original") as e:
        if use_async:
            await t.ainvoke({})
        else:
            t.invoke({})
    assert type(e.value) is KeyError  # not wrapped
    assert "tool_call_error" in recorder.names
    assert "tool_call_finished" not in recorder.names
    assert "tool_invoke_output" not in recorder.names
    assert recorder.first("tool_call_error")["error"] is e.value


def test_tool_stream_events_and_per_chunk_transform(
    fw: CallbackFramework, recorder: Recorder
) -> None:
    card = ToolCard(
        name="chunks", input_params={"type": "object", "properties": {"n": {"type": "integer"}}}
    )
    t = Chunks(card, callbacks=fw)
    fw.register("tool_stream_output", lambda value: value * 10, transform=True)
    assert list(t.stream({"n": 3})) == [0, 10, 20]
    assert recorder.names == [
        "tool_stream_input",
        "tool_call_started",
        "tool_parse_started",
        "tool_parse_finished",
        *["tool_result_received", "tool_stream_output"] * 3,
        "tool_call_finished",
    ]
    received = [kw["result"] for name, kw in recorder.events if name == "tool_result_received"]
    outputs = [kw["result"] for name, kw in recorder.events if name == "tool_stream_output"]
    assert received == [0, 1, 2] and outputs == [0, 10, 20]


async def test_tool_astream(fw: CallbackFramework, recorder: Recorder) -> None:
    card = ToolCard(
        name="chunks", input_params={"type": "object", "properties": {"n": {"type": "integer"}}}
    )
    t = Chunks(card, callbacks=fw)
    assert [c async for c in t.astream({"n": 2})] == [0, 1]
    assert recorder.names[-1] == "tool_call_finished"


async def test_unsupported_kinds_raise_codes() -> None:
    chunks = Chunks(ToolCard(name="c"))
    with pytest.raises(ToolNotSupportedError) as e:
        chunks.invoke({})
    assert e.value.code == ErrorCode.TOOL_INVOKE_NOT_SUPPORTED == 182011
    with pytest.raises(ToolNotSupportedError) as e:
        await chunks.ainvoke({})
    assert e.value.code == 182011
    adder = Adder(ToolCard(name="a"))
    with pytest.raises(ToolNotSupportedError) as e:
        adder.stream({})
    assert e.value.code == ErrorCode.TOOL_STREAM_NOT_SUPPORTED == 182010
    with pytest.raises(ToolNotSupportedError) as e:
        adder.astream({})
    assert e.value.code == 182010


def test_skip_options() -> None:
    t = Adder(ToolCard(name="add", input_params=ADD_SCHEMA))
    # skip_inputs_validate: no coercion, no rejection
    assert t.invoke({"a": "x", "b": "y"}, skip_inputs_validate=True) == "xy"
    echo = LocalFunction(ToolCard(name="echo", input_params=SCHEMA), lambda **kw: kw)
    assert echo.invoke({"path": "p", "mode": None}, skip_none_value=True) == {
        "path": "p",
        "mode": "text",
    }


# LocalFunction -------------------------------------------------------------------------------
def test_local_function_null_func() -> None:
    with pytest.raises(ToolCardError) as e:
        LocalFunction(ToolCard(name="t"), None)  # type: ignore[arg-type]
    assert e.value.code == ErrorCode.LOCAL_FUNCTION_FUNC_NOT_SUPPORTED == 182200


def test_local_function_default_fill_and_parse_events(
    fw: CallbackFramework, recorder: Recorder
) -> None:
    card = ToolCard(id="read_id", name="read", input_params=SCHEMA)
    lf = LocalFunction(card, lambda path, mode: f"{path}:{mode}", callbacks=fw)
    assert lf.func is not None
    assert lf.invoke({"path": "readme.md"}) == "readme.md:text"
    started = recorder.first("tool_parse_started")
    assert started["tool_name"] == "read" and started["tool_id"] == "read_id"
    assert started["raw_inputs"] == {"path": "readme.md"}
    assert started["schema"] == SCHEMA
    finished = recorder.first("tool_parse_finished")
    assert finished["tool_name"] == "read" and finished["tool_id"] == "read_id"
    assert finished["formatted_inputs"] == {"path": "readme.md", "mode": "text"}


def test_awaitable_result_is_awaited() -> None:
    def later(x: int) -> Any:
        async def inner() -> int:
            await asyncio.sleep(0)
            return x + 1

        return inner()

    t = tool(later)
    assert t.invoke({"x": 1}) == 2
    assert asyncio.run(t.ainvoke({"x": 2})) == 3


async def test_async_function_invoked_both_ways() -> None:
    @tool
    async def double(x: int) -> int:
        await asyncio.sleep(0)
        return 2 * x

    assert await double.ainvoke({"x": 2}) == 4
    assert await asyncio.to_thread(double.invoke, {"x": 3}) == 6


def test_sync_invoke_of_async_function_without_loop() -> None:
    @tool
    async def double(x: int) -> int:
        return 2 * x

    assert double.invoke({"x": 5}) == 10


def gen_numbers(n: int) -> Iterator[int]:
    yield from range(n)


async def agen_numbers(n: int) -> AsyncIterator[int]:
    for i in range(n):
        await asyncio.sleep(0)
        yield i


@pytest.mark.parametrize("func", [gen_numbers, agen_numbers])
async def test_invoke_on_generator_is_rejected(func: Any) -> None:
    t = tool(func)
    with pytest.raises(ToolNotSupportedError, match="func can not be generator") as e:
        t.invoke({"n": 2})
    assert e.value.code == ErrorCode.LOCAL_FUNCTION_EXECUTION_ERROR == 182205
    with pytest.raises(ToolNotSupportedError, match="func can not be generator"):
        await t.ainvoke({"n": 2})


@pytest.mark.parametrize("func", [gen_numbers, agen_numbers])
async def test_stream_on_generators(func: Any, fw: CallbackFramework, recorder: Recorder) -> None:
    t = tool(func, callbacks=fw)
    assert list(t.stream({"n": 3})) == [0, 1, 2]
    assert [c async for c in t.astream({"n": 2})] == [0, 1]
    assert recorder.names.count("tool_parse_started") == 2
    assert recorder.names.count("tool_result_received") == 5


async def test_stream_on_plain_function_yields_single_result() -> None:
    @tool
    def single(x: int) -> dict[str, int]:
        return {"x": x}

    @tool
    def many(n: int) -> list[int]:
        return list(range(n))

    assert list(single.stream({"x": 1})) == [{"x": 1}]
    assert [c async for c in single.astream({"x": 1})] == [{"x": 1}]
    assert list(many.stream({"n": 3})) == [0, 1, 2]
    assert [c async for c in many.astream({"n": 2})] == [0, 1]


def test_stream_error_fires_error_event(fw: CallbackFramework, recorder: Recorder) -> None:
    def broken(n: int) -> Iterator[int]:
        yield 1
        raise RuntimeError("mid-stream")

    t = tool(broken, callbacks=fw)
    got: list[int] = []
    with pytest.raises(RuntimeError, match="mid-stream"):
        for chunk in t.stream({"n": 1}):
            got.append(chunk)
    assert got == [1]
    assert "tool_call_error" in recorder.names and "tool_call_finished" not in recorder.names


# extension points (docs/custom-tools.md) --------------------------------------------------
def test_a_subclass_implementing_no_extension_point_is_rejected_at_class_creation() -> None:
    with pytest.raises(TypeError) as e:

        class Seedlike(Tool):  # the seed's Java name, and our old private one
            def invokeInternal(self, inputs: dict[str, Any]) -> Any:
                return inputs

            def _ainvoke(self, inputs: dict[str, Any]) -> Any:
                return inputs

    message = str(e.value)
    assert message.startswith(
        "Seedlike subclasses Tool but implements none of invoke_internal, ainvoke_internal, "
        "stream_internal, astream_internal"
    )
    assert "it defines invokeInternal(): implement invoke_internal()" in message
    assert "it defines _ainvoke(): implement ainvoke_internal()" in message
    with pytest.raises(TypeError, match=r"it defines invoke\(\): implement invoke_internal\(\)"):

        class OverridesInvoke(Tool):
            def invoke(self, inputs: Any = None, **kwargs: Any) -> Any:
                return inputs

    class Base(Tool, abstract=True):  # a base meant for further subclassing is fine
        def describe(self) -> str:
            return self.name

    class Concrete(Base):
        async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
            return self.describe()

    assert Concrete(ToolCard(name="c")).invoke({}) == "c"


def test_the_public_extension_points_run_with_validation_and_callbacks(
    fw: CallbackFramework, recorder: Recorder
) -> None:
    t = Adder(ToolCard(name="add", input_params=ADD_SCHEMA))
    assert t.callbacks is not fw
    t.callbacks = fw  # settable after construction (openJiuwen's setCallbackFramework)
    assert t.callbacks is fw
    assert t.invoke('{"a": 1, "b": "2"}') == 3
    assert "tool_call_finished" in recorder.names
    assert asyncio.run(t.ainvoke({"a": 2, "b": 2})) == 4
    n_schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
    assert list(Chunks(ToolCard(name="n", input_params=n_schema)).stream({"n": 3})) == [0, 1, 2]
    t.callbacks = None  # back to the global framework
    assert t.callbacks is not fw
    with pytest.raises(TypeError, match="CallbackFramework or None"):
        t.callbacks = "nope"  # type: ignore[assignment]


class _SyncThenAsync(Adder):
    """Inherits the sync implementation and adds an async one."""

    async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        return ("async", inputs["a"] + inputs["b"])


async def test_each_subclass_runs_the_implementations_it_has() -> None:
    card = ToolCard(name="add", input_params=ADD_SCHEMA)
    assert await Adder(card).ainvoke({"a": 1, "b": 2}) == 3  # sync one, in a thread
    both = _SyncThenAsync(card)
    assert await both.ainvoke('{"a": 1, "b": 2}') == ("async", 3)
    assert both.invoke({"a": 1, "b": 2}) == 3
    assert await both.ainvoke({"a": 1, "b": 2}, timeout=5) == ("async", 3)
    assert await Adder(card).ainvoke({"a": 1, "b": 2}, timeout=5) == 3


async def test_an_async_function_gets_what_it_declares_on_every_path() -> None:
    @tool
    async def plain(a: int, b: int = 2) -> int:
        """Add."""
        return a + b

    @tool
    async def with_context(a: int, ctx: ToolContext) -> str:
        """Name the tool."""
        return f"{ctx.tool_name}:{a}"

    assert await plain.ainvoke('{"a": 1}') == 3
    assert await plain.ainvoke({"a": 1, "b": 5}, timeout=5) == 6
    assert plain.invoke('{"a": 1}') == 3
    assert await with_context.ainvoke('{"a": 4}') == "with_context:4"
    with pytest.raises(ToolArgumentsError):
        await plain.ainvoke('{"a": "one"}')


async def test_a_function_with_only_star_args_receives_them() -> None:
    @tool
    def join(*names: str) -> str:
        """Join."""
        return ",".join(names)

    @tool
    async def ajoin(*names: str) -> str:
        """Join."""
        return ",".join(names)

    for t in (join, ajoin):
        assert t.invoke('{"names": ["x", "y"]}') == "x,y"
        assert await t.ainvoke('{"names": ["x"]}') == "x"
        assert await t.ainvoke("{}") == ""
