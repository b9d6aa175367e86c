"""Issue 14 items 3 and 13: the argument repair pass under hostile input from a model served
by the raw loopback fault server. Before the fix, trailing data was silently dropped (the tool
ran on the first part) and `{'a'a'a...}` of 0.96 MB took 26 s on the event loop."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

from servers.fault_provider_server import FaultServer, respond
from toolweave import ToolService, tool
from toolweave.errors import ToolArgumentsError
from toolweave.schema import parse_arguments
from toolweave.schema.arguments import PARSE_OFF_LOOP_BYTES, REPAIR_MAX_BYTES
from toolweave.tools.local_function import LocalFunction

from .conftest import completion, make_model
from .invariants import Timer, assert_history_valid

MODEL_FACING_LIMIT = 4096


def _raw_call(arguments: str) -> dict[str, Any]:
    """A Chat Completions answer with one `pay` call whose arguments are `arguments` as sent."""
    answer = completion(calls=[("c1", "pay", {})])
    answer["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = arguments
    return answer


async def _run(server: FaultServer, arguments: str) -> tuple[Any, list[Any]]:
    ran: list[Any] = []

    @tool
    def pay(amount: int = 0) -> str:
        """Pay an amount."""
        ran.append(amount)
        return "paid"

    server.enqueue(
        respond(200, json.dumps(_raw_call(arguments))), respond(200, json.dumps(completion("ok")))
    )
    result = await ToolService().tools(pay).achat(make_model(server), None, "pay")
    assert_history_valid(result.messages)
    return result, ran


@pytest.mark.parametrize(
    "arguments",
    [
        '{"amount": 1}00',
        '{"amount": 1}{"amount": 2}',
        '{"amount": 1} and then some text',
        "{'amount': 1} {'amount': 2}",
        '```json\n{"amount": 1}\n{"amount": 2}\n```',
    ],
)
async def test_repair_never_drops_trailing_data(fault_server: FaultServer, arguments: str) -> None:
    result, ran = await _run(fault_server, arguments)
    assert ran == []  # the tool did not run on the first part
    (execution,) = result.tool_executions
    assert execution.result.is_error
    assert isinstance(execution.result.error, ToolArgumentsError)
    assert "more text follows" in execution.result.text


def _quote_storm(size: int) -> str:
    """`{'a'a'a...'}`: balanced quotes, so it does not look cut off."""
    body = "'a" * ((size - 3) // 2)
    return "{" + body + ("'" if body.count("'") % 2 else "") + "}"


def _unquoted_keys(size: int) -> str:
    return ("{" + ", ".join(f"key{i}: {i}" for i in range(size // 6)))[: size - 1] + "}"


@pytest.mark.parametrize(
    "arguments",
    [
        pytest.param(_quote_storm(320_000), id="quote-storm-0.32MB"),
        pytest.param(_quote_storm(960_000), id="quote-storm-0.96MB"),
        pytest.param(_unquoted_keys(2_300_000), id="unquoted-keys-2.3MB"),
        pytest.param(_unquoted_keys(REPAIR_MAX_BYTES), id="unquoted-keys-at-the-repair-limit"),
    ],
)
async def test_hostile_arguments_are_handled_in_bounded_time_and_text(
    fault_server: FaultServer, arguments: str
) -> None:
    with Timer() as t:
        result, ran = await _run(fault_server, arguments)
    assert t.elapsed < 10  # hang guard: 0.96 MB took 26 s, 2.3 MB froze the loop 11 s
    (execution,) = result.tool_executions
    assert len(execution.result.text) < MODEL_FACING_LIMIT
    if len(arguments) > REPAIR_MAX_BYTES:
        assert ran == [] and execution.result.is_error  # too long to repair: strict only


def test_error_texts_for_the_model_are_bounded() -> None:
    with pytest.raises(ToolArgumentsError) as info:
        raise ToolArgumentsError("x" * 6_600_000)
    assert len(info.value.message) <= ToolArgumentsError.max_message_chars
    assert info.value.message.endswith("more characters cut)")


def test_long_argument_strings_are_parsed_off_the_event_loop() -> None:
    threads: list[threading.Thread] = []

    class Recording(LocalFunction):
        def prepare_inputs(self, inputs: Any, **kw: Any) -> dict[str, Any]:
            threads.append(threading.current_thread())
            return super().prepare_inputs(inputs, **kw)

    def echo(text: str) -> int:
        """Echo."""
        return len(text)

    fn = Recording(tool(echo).card, echo)

    async def main() -> tuple[int, int]:
        small = await fn.ainvoke(json.dumps({"text": "hi"}))
        big = await fn.ainvoke(json.dumps({"text": "x" * (PARSE_OFF_LOOP_BYTES + 1)}))
        return small, big

    assert asyncio.run(main()) == (2, PARSE_OFF_LOOP_BYTES + 1)
    assert threads[0] is threading.main_thread()  # small: parsed in place
    assert threads[1] is not threading.main_thread()  # long: in a worker thread


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"a": 1,}', {"a": 1}),
        ("{'a': 1, 'b': True}", {"a": 1, "b": True}),
        ('```json\n{"a": 1}\n```', {"a": 1}),
        ("{a: 1}", {"a": 1}),
    ],
)
def test_documented_repairs_still_work(text: str, expected: dict[str, Any]) -> None:
    assert parse_arguments(text) == expected


def test_cut_off_long_arguments_say_so() -> None:
    text = '{"a": "' + "x" * (REPAIR_MAX_BYTES * 4)
    with pytest.raises(ToolArgumentsError, match="cut off"):
        parse_arguments(text)
    with pytest.raises(ToolArgumentsError, match="more text follows"):
        parse_arguments('{"a": "' + "x" * (REPAIR_MAX_BYTES * 4) + '"} extra')


@pytest.mark.parametrize("face", ["parse", "tool", "bare"])
def test_integer_over_the_digit_limit_is_a_typed_error(face: str) -> None:
    # found by the atheris `repair` target: json.loads raises a bare ValueError for it
    text = '{"amount": ' + "1" * 5000 + "}"

    def pay(amount: int) -> int:
        """Pay."""
        return amount

    with pytest.raises(ToolArgumentsError, match="too many digits"):
        if face == "parse":
            parse_arguments(text)
        elif face == "tool":
            tool(pay).prepare_inputs(text)
        else:
            parse_arguments("1" * 5000)
