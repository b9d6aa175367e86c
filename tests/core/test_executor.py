"""DefaultToolExecutor (LangChain4j DefaultToolExecutorTest): coercion table, exact error texts,
results, errors, timeouts."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import decimal
import enum
import json
import time
import uuid
from typing import Any, Optional

import pytest
from pydantic import BaseModel

from toolweave import (
    DefaultToolExecutor,
    ErrorCode,
    ImageContent,
    TextContent,
    ToolArgumentsError,
    ToolCard,
    ToolExecution,
    ToolExecutionError,
    ToolExecutionRequest,
    ToolExecutionResult,
    ToolTimeoutError,
    result_to_text,
    tool,
)
from toolweave.tools import LocalFunction


def run(t: Any, arguments: str, **kwargs: Any) -> ToolExecutionResult:
    return DefaultToolExecutor(t).execute_with_result(
        ToolExecutionRequest(id="call_1", name=t.name, arguments=arguments), **kwargs
    )


@tool
def add(a: int, b: int = 2) -> int:
    return a + b


@tool
def kinds(i: int = 0, f: float = 0.0, s: str = "", flag: bool = False) -> str:
    return repr((i, f, s, flag))


# coercion table --------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"i": 1.0}', "(1, 0.0, '', False)"),
        ('{"i": "12"}', "(12, 0.0, '', False)"),
        ('{"f": "1.1"}', "(0, 1.1, '', False)"),
        ('{"f": 3}', "(0, 3.0, '', False)"),
        ('{"s": 12}', "(0, 0.0, '12', False)"),
        ('{"s": 1.5}', "(0, 0.0, '1.5', False)"),
        ('{"flag": true}', "(0, 0.0, '', True)"),
    ],
)
def test_coercions_accepted(arguments: str, expected: str) -> None:
    result = run(kinds, arguments)
    assert not result.is_error
    assert result.text == expected


@pytest.mark.parametrize(
    ("arguments", "line"),
    [
        (
            '{"i": "abc"}',
            '- i: Input should be a valid integer, unable to parse string as an integer (got "abc")',
        ),
        (
            '{"i": 2.1}',
            "- i: Input should be a valid integer, got a number with a fractional part (got 2.1)",
        ),
        ('{"i": true}', "- i: Input should be a valid integer, not a boolean (got true)"),
        (
            '{"f": "abc"}',
            '- f: Input should be a valid number, unable to parse string as a number (got "abc")',
        ),
        ('{"f": false}', "- f: Input should be a valid number, not a boolean (got false)"),
        ('{"flag": "true"}', '- flag: Input should be a valid boolean (got "true")'),
        ('{"flag": 1}', "- flag: Input should be a valid boolean (got 1)"),
        ('{"s": {"a": 1}}', '- s: Input should be a valid string (got {"a": 1})'),
        ('{"s": true}', "- s: Input should be a valid string (got true)"),
    ],
)
def test_coercions_rejected_with_exact_text(arguments: str, line: str) -> None:
    with pytest.raises(ToolArgumentsError) as e:
        run(kinds, arguments)
    assert e.value.message == (
        "Invalid arguments for tool 'kinds':\n"
        f"{line}\n"
        "Expected parameters: i, f, s, flag.\n"
        "Fix these arguments and call the tool again."
    )
    assert e.value.code == ErrorCode.SCHEMA_VALIDATE_INVALID == 189001
    assert e.value.tool_name == "kinds"
    assert len(e.value.errors) == 1


def test_missing_and_unknown_exact_text() -> None:
    with pytest.raises(ToolArgumentsError) as e:
        run(add, '{"b": 1, "c": 3}')
    assert e.value.message == (
        "Invalid arguments for tool 'add':\n"
        "- a: missing required argument\n"
        "- c: unknown argument (got 3)\n"
        "Expected parameters: a, b.\n"
        "Fix these arguments and call the tool again."
    )


def test_big_ints_are_exact() -> None:
    @tool
    def ident(n: int) -> str:
        return str(n)

    assert run(ident, '{"n": 9007199254740993}').text == "9007199254740993"
    assert run(ident, '{"n": "9007199254740993"}').text == "9007199254740993"
    assert run(ident, '{"n": 123456789012345678901234567890}').text == (
        "123456789012345678901234567890"
    )


def test_decimal_exact() -> None:
    @tool
    def money(amount: decimal.Decimal) -> str:
        return str(amount)

    assert run(money, '{"amount": 0.1}').text == "0.1"
    assert run(money, '{"amount": "2.50"}').text == "2.50"


def test_optional_present_and_absent() -> None:
    @tool
    def opt(x: Optional[int]) -> str:  # noqa: UP045
        return repr(x)

    assert run(opt, '{"x": 5}').text == "5"
    assert run(opt, "{}").text == "None"
    assert run(opt, '{"x": null}').text == "None"
    assert run(opt, "").text == "None"


class Color(enum.Enum):
    A = "A"
    B = "B"


class Person(BaseModel):
    name: str
    age: int


@dataclasses.dataclass
class Point:
    x: int
    y: int


def test_pojo_list_set_dict_arguments() -> None:
    @tool
    def complex_args(
        person: Person,
        people: list[Person],
        colors: set[Color],
        counts: dict[str, int],
        by_name: dict[str, Person],
        point: Point,
        day: datetime.date,
        ident: uuid.UUID,
    ) -> str:
        return repr(
            (person, people, sorted(c.value for c in colors), counts, by_name, point, day, ident)
        )

    args = {
        "person": {"name": "ann", "age": 3},
        "people": [{"name": "bo", "age": "4"}],
        "colors": ["A", "B"],
        "counts": {"A": 1.0},
        "by_name": {"cy": {"name": "cy", "age": 5}},
        "point": {"x": 1, "y": 2},
        "day": "2024-01-02",
        "ident": str(uuid.UUID(int=7)),
    }
    result = run(complex_args, json.dumps(args))
    assert not result.is_error, result.text
    assert result.text == repr(
        (
            Person(name="ann", age=3),
            [Person(name="bo", age=4)],
            ["A", "B"],
            {"A": 1},
            {"cy": Person(name="cy", age=5)},
            Point(1, 2),
            datetime.date(2024, 1, 2),
            uuid.UUID(int=7),
        )
    )


def test_doubly_encoded_object_argument() -> None:
    @tool
    def greet(person: Person, tags: list[str]) -> str:
        return f"{person.name}:{','.join(tags)}"

    arguments = json.dumps({"person": json.dumps({"name": "ann", "age": 1}), "tags": '["x", "y"]'})
    assert run(greet, arguments).text == "ann:x,y"


def test_unknown_key_inside_list_of_models_reported_with_path() -> None:
    @tool
    def ages(people: list[Person]) -> int:
        return sum(p.age for p in people)

    with pytest.raises(ToolArgumentsError) as e:
        run(ages, '{"people": [{"name": "a", "age": 1}, {"name": "b"}]}')
    assert "- people.1.age: missing required argument" in e.value.message


# strict-mode nulls ---------------------------------------------------------------------------
class Node(BaseModel):
    value: int
    children: list[Node] = []
    label: str = "leaf"


def test_null_for_defaulted_param_applies_default() -> None:
    @tool
    def tree(root: Node, depth: int = 3) -> str:
        return f"{root.value}/{root.children}/{root.label}/{depth}"

    arguments = '{"root": {"value": 1, "children": null, "label": null}, "depth": null}'
    assert run(tree, arguments).text == "1/[]/leaf/3"
    # a null for a required value is still an error
    with pytest.raises(
        ToolArgumentsError, match=r"root\.value: Input should be a valid integer \(got null\)"
    ):
        run(tree, '{"root": {"value": null}}')


def test_null_for_optional_param_without_default_means_absent() -> None:
    """A hand-written schema (HTTP, OpenAPI, MCP-like tools): OpenAI's strict form makes the
    optional `limit` required and nullable, so the model sends null; that null means "not
    given", at the top level and in nested objects. Nullable and unconstrained properties
    keep their null; a required property's null stays an error."""
    from toolweave.dialects import openai_tool
    from toolweave.tools import LocalFunction

    schema = {
        "type": "object",
        "properties": {
            "q": {"type": "string"},
            "limit": {"type": "integer"},
            "opts": {
                "type": "object",
                "properties": {"deep": {"type": "boolean"}, "tag": {"type": ["string", "null"]}},
            },
            "anything": {},
        },
        "required": ["q"],
    }
    typed = {**schema, "properties": {k: v for k, v in schema["properties"].items() if v}}
    strict = openai_tool(ToolCard(name="s", input_params=typed), strict=True)["function"]
    assert "limit" in strict["parameters"]["required"]
    assert "null" in strict["parameters"]["properties"]["limit"]["type"]
    search = LocalFunction(ToolCard(name="search", input_params=schema), lambda **kw: kw)
    sent = '{"q": "x", "limit": null, "opts": {"deep": null, "tag": null}, "anything": null}'
    assert search.invoke(sent) == {"q": "x", "opts": {"tag": None}, "anything": None}
    with pytest.raises(ToolArgumentsError, match=r"q: None is not of type 'string'"):
        search.invoke('{"q": null}')


# results -------------------------------------------------------------------------------------
def test_tool_exception_becomes_error_result() -> None:
    @tool
    def boom(x: int) -> int:
        raise ValueError(f"bad x {x}")

    @tool
    def silent() -> None:
        raise KeyError()

    result = run(boom, '{"x": 1}')
    assert result.is_error and result.text == "bad x 1"
    assert isinstance(result.error, ToolExecutionError)
    assert isinstance(result.error.cause, ValueError)
    assert result.error.__cause__ is result.error.cause
    empty = run(silent, "{}")
    assert empty.is_error and empty.text == "KeyError"


def test_propagate_errors_keeps_original_cause() -> None:
    @tool
    def boom() -> None:
        raise ConnectionError("down")

    executor = DefaultToolExecutor(boom, propagate_errors=True)
    with pytest.raises(ToolExecutionError) as e:
        executor.execute_with_result(ToolExecutionRequest(name="boom"))
    assert type(e.value.cause) is ConnectionError
    assert e.value.message == "tool 'boom' failed: down"


def test_result_text_rules() -> None:
    assert result_to_text("plain") == "plain"
    assert result_to_text(None) == "Success"
    assert result_to_text({"a": [1, 2]}) == '{"a":[1,2]}'
    assert result_to_text(Person(name="a", age=1)) == '{"name":"a","age":1}'
    assert result_to_text(Point(1, 2)) == '{"x":1,"y":2}'
    assert (
        result_to_text({"d": datetime.date(2024, 1, 1), "n": decimal.Decimal("1.5"), "c": Color.A})
        == '{"d":"2024-01-01","n":"1.5","c":"A"}'
    )
    assert result_to_text("") == ""
    # no JSON form: its str() (the call succeeds); only a failing str() is an error
    assert result_to_text({"o": _Plain()}) == '{"o":"plain!"}'
    with pytest.raises(ToolExecutionError, match="cannot be converted to text") as info:
        result_to_text({"items": [1, 2, 3, _Unprintable()]}, tool_name="t")
    assert 'result["items"][3]' in info.value.message
    assert info.value.details["path"] == 'result["items"][3]'


class _Plain:
    def __str__(self) -> str:
        return "plain!"


class _Unprintable:
    def __str__(self) -> str:
        raise RuntimeError("no text for me")


def test_execute_returns_text_and_keeps_raw_result() -> None:
    @tool
    def person() -> Person:
        return Person(name="ann", age=3)

    executor = DefaultToolExecutor(person)
    request = ToolExecutionRequest(name="person")
    assert executor.execute(request) == '{"name":"ann","age":3}'
    result = executor.execute_with_result(request)
    assert result.result == Person(name="ann", age=3)
    assert not result.is_error


def test_none_result_is_success() -> None:
    @tool
    def nothing() -> None:
        return None

    assert DefaultToolExecutor(nothing).execute(ToolExecutionRequest(name="nothing")) == "Success"


def test_content_parts_result() -> None:
    @tool
    def picture() -> list[Any]:
        return [TextContent(text="a cat"), ImageContent.from_bytes(b"\x89PNG")]

    result = run(picture, "{}")
    assert result.contents is not None and len(result.contents) == 2
    assert result.result_text() == "a cat"


def test_tool_execution_record() -> None:
    request = ToolExecutionRequest(name="add", arguments='{"a": 1}')
    start = datetime.datetime(2024, 1, 1, 0, 0, 0)
    finish = start + datetime.timedelta(seconds=2)
    ok = ToolExecution(request, ToolExecutionResult(text="3"), start, finish, memory_id="m")
    assert ok.duration == datetime.timedelta(seconds=2)
    assert not ok.has_failed and ok.result_text == "3"
    bad = ToolExecution(request, ToolExecutionResult.error_result("oops"), start, finish)
    assert bad.has_failed


def test_request_defaults() -> None:
    r = ToolExecutionRequest(name="t")
    assert r.arguments == "{}" and r.id.startswith("call_")
    assert r.arguments_as_dict() == {}
    assert ToolExecutionRequest(name="t", arguments='{"a": 1,}').arguments_as_dict() == {"a": 1}


def test_json_schema_tool_through_executor() -> None:
    card = ToolCard(
        name="weather",
        input_params={
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "default": 1},
                "metric": {"type": "boolean"},
            },
            "required": ["city"],
        },
    )
    lf = LocalFunction(card, lambda city, days, metric=True: f"{city}/{days}/{metric}")
    assert run(lf, '{"city": "Oslo", "days": "3"}').text == "Oslo/3/True"
    assert run(lf, '{"city": "Oslo", "days": 2.0, "metric": false}').text == "Oslo/2/False"
    with pytest.raises(ToolArgumentsError) as e:
        run(lf, '{"days": "x", "metric": "true", "zip": 1}')
    assert e.value.message == (
        "Invalid arguments for tool 'weather':\n"
        "- zip: unknown argument\n"
        "- days: 'x' is not of type 'integer' (got \"x\")\n"
        "- metric: 'true' is not of type 'boolean' (got \"true\")\n"
        "- city: missing required argument\n"
        "Expected parameters: city, days, metric.\n"
        "Fix these arguments and call the tool again."
    )


# timeouts ------------------------------------------------------------------------------------
def test_sync_timeout_from_card() -> None:
    @tool(timeout=0.05)
    def slow() -> str:
        time.sleep(0.5)
        return "late"

    with pytest.raises(ToolTimeoutError) as e:
        slow.invoke({})
    assert e.value.code == ErrorCode.TOOL_EXECUTION_TIMEOUT
    assert e.value.message == "tool 'slow' did not finish within 0.05 s and was cancelled"
    result = run(slow, "{}")
    assert result.is_error and "did not finish within 0.05 s" in result.text


async def test_async_timeout_per_call() -> None:
    cancelled = asyncio.Event()

    @tool
    async def slow() -> str:
        try:
            await asyncio.sleep(5)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    with pytest.raises(ToolTimeoutError):
        await slow.ainvoke({}, timeout=0.05)
    assert cancelled.is_set()
    result = await DefaultToolExecutor(slow).aexecute_with_result(
        ToolExecutionRequest(name="slow"), timeout=0.05
    )
    assert result.is_error and isinstance(result.error, ToolTimeoutError)


async def test_sync_function_timeout_from_async() -> None:
    @tool
    def slow() -> str:
        time.sleep(0.5)
        return "late"

    with pytest.raises(ToolTimeoutError):
        await slow.ainvoke({}, operation_timeout=0.05)


def test_async_function_timeout_from_sync() -> None:
    @tool(timeout=0.05)
    async def slow() -> str:
        await asyncio.sleep(5)
        return "late"

    with pytest.raises(ToolTimeoutError):
        slow.invoke({})


def _side_effect_tool(effects: list[str]) -> Any:
    @tool
    async def transfer() -> str:
        try:
            await asyncio.sleep(0.3)
        except asyncio.CancelledError:
            effects.append("cancelled")
            raise
        effects.append("transferred")  # the side effect that must not happen after the deadline
        return "done"

    return transfer


def test_sync_invoke_cancels_an_async_tool_at_the_deadline() -> None:
    effects: list[str] = []
    transfer = _side_effect_tool(effects)
    with pytest.raises(ToolTimeoutError):
        transfer.invoke({}, timeout=0.05)
    assert effects == ["cancelled"]
    time.sleep(0.5)  # well past the moment the coroutine would have finished
    assert effects == ["cancelled"]


def test_sync_stream_cancels_an_async_tool_at_the_deadline() -> None:
    effects: list[str] = []
    transfer = _side_effect_tool(effects)
    with pytest.raises(ToolTimeoutError):
        list(transfer.stream({}, timeout=0.05))
    time.sleep(0.5)
    assert effects == ["cancelled"]


async def test_sync_invoke_inside_a_running_loop_cancels_too() -> None:
    effects: list[str] = []
    transfer = _side_effect_tool(effects)
    with pytest.raises(ToolTimeoutError):
        await asyncio.to_thread(transfer.invoke, {}, timeout=0.05)
    with pytest.raises(ToolTimeoutError):
        transfer.invoke({}, timeout=0.05)  # a sync call from a coroutine: a helper thread
    await asyncio.sleep(0.5)
    assert effects == ["cancelled", "cancelled"]
    # without a deadline the sync face still runs it to completion
    assert transfer.invoke({}) == "done" and effects[-1] == "transferred"


def test_result_is_frozen_keyword_only_with_its_own_attributes() -> None:
    a = ToolExecutionResult(text="x", result=1)
    b = ToolExecutionResult(text="x", result=1)
    assert a == b and a.attributes == {} and a.attributes is not b.attributes
    assert (a.is_error, a.contents, a.structured, a.error) == (False, None, None, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.text = "y"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ToolExecutionResult("x")  # type: ignore[misc]
    with pytest.raises(TypeError):
        ToolExecutionResult(result=1)  # type: ignore[call-arg]
    c = dataclasses.replace(a, text="y", attributes={"k": 1})
    assert (c.text, c.result, c.attributes) == ("y", 1, {"k": 1})
    failed = ToolExecutionResult.failure("no", error=KeyError("k"))
    assert failed.is_error and isinstance(failed.error, KeyError)
    assert "text='x'" in repr(a)


def test_context_takes_positional_or_keyword_arguments_and_is_frozen() -> None:
    from toolweave import ToolContext

    ctx = ToolContext("t", "call_1", "m", {"user": 1}, None, {"k": "v"})
    assert ctx == ToolContext(
        tool_name="t",
        request_id="call_1",
        memory_id="m",
        context={"user": 1},
        extra={"k": "v"},
    )
    bare = ToolContext("t")
    assert bare.extra == {} and bare.extra is not ToolContext("t").extra
    assert (bare.request_id, bare.memory_id, bare.context, bare.callbacks) == (None,) * 4
    with pytest.raises(dataclasses.FrozenInstanceError):
        ctx.tool_name = "u"  # type: ignore[misc]
    with pytest.raises(TypeError):
        ToolContext()  # type: ignore[call-arg]
