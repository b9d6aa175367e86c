"""Usage budgets (issue 29 item 2): `UsageLimits` on model requests, tool calls (in total
and per tool) and tokens, checked before the step that would exceed them, through every
face; exceeded as `UsageLimitExceeded` with a valid `partial_result`, or (answer mode) the
model told the budget is spent and answering once, with tool calls turned off."""

from __future__ import annotations

import pickle
from typing import Any

import pytest

from service.helpers import MODES, ai_calls, assert_history_valid, call, run
from toolweave import (
    AiMessage,
    ChatResponse,
    ErrorCode,
    ScriptedChatModel,
    TokenUsage,
    ToolChoice,
    ToolExecutionResultMessage,
    ToolService,
    UsageLimitExceeded,
    UsageLimits,
    UserMessage,
    tool,
)
from toolweave.policies import RunUsage

RAN: list[str] = []


@tool
def search(q: str) -> str:
    """Search."""
    RAN.append(f"search {q}")
    return f"found {q}"


@tool
def fetch(url: str) -> str:
    """Fetch a page."""
    RAN.append(f"fetch {url}")
    return f"page {url}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def searches(n: int, final: str = "done", usage: TokenUsage | None = None) -> list[Any]:
    """`n` rounds of one search each (ids s0, s1, ...), then `final`; each response
    reports `usage`."""
    turns: list[Any] = [
        ChatResponse(ai_calls(call("search", f'{{"q": "{i}"}}', id=f"s{i}")), usage=usage)
        for i in range(n)
    ]
    return [*turns, ChatResponse(AiMessage(final), usage=usage)]


def exceeded(mode: str, service: ToolService, model: Any, **kw: Any) -> UsageLimitExceeded:
    with pytest.raises(UsageLimitExceeded) as caught:
        run(mode, service, model, **kw)
    e = caught.value
    assert e.code == ErrorCode.USAGE_LIMIT_EXCEEDED
    assert e.partial_result is not None
    assert_history_valid(e.partial_result.messages)
    return e


@pytest.mark.parametrize("mode", MODES)
def test_the_request_limit_stops_before_the_request_that_would_exceed_it(mode: str) -> None:
    model = ScriptedChatModel(searches(5))
    e = exceeded(mode, ToolService(usage_limits=UsageLimits(requests=2)).tools(search), model)

    assert len(model.requests) == 2
    assert (e.limit, e.allowed, e.used) == ("requests", 2, 2)
    assert e.usage.requests == 2 and e.usage.tool_calls == 2
    assert RAN == ["search 0", "search 1"]  # the second round ran; no third request
    assert "UsageLimits.requests=2" in e.message
    assert [m.type for m in e.partial_result.messages] == [
        "user", "ai", "tool_result", "ai", "tool_result",
    ]  # fmt: skip


@pytest.mark.parametrize("mode", MODES)
def test_the_tool_call_limit_refuses_the_round_that_would_exceed_it(mode: str) -> None:
    model = ScriptedChatModel(
        [
            ai_calls(call("search", '{"q": "a"}', id="a"), call("search", '{"q": "b"}', id="b")),
            ai_calls(call("fetch", '{"url": "u"}', id="c"), call("search", '{"q": "d"}', id="d")),
            AiMessage("done"),
        ]
    )
    service = ToolService(usage_limits=UsageLimits(tool_calls=3)).tools(search, fetch)
    e = exceeded(mode, service, model)

    assert RAN == ["search a", "search b"]  # none of the second round ran (eager included)
    assert (e.limit, e.allowed, e.used) == ("tool_calls", 3, 2)
    assert len(model.requests) == 2
    answers = [m for m in e.partial_result.messages if isinstance(m, ToolExecutionResultMessage)]
    assert [(m.id, m.is_error) for m in answers] == [
        ("a", False), ("b", False), ("c", True), ("d", True),
    ]  # fmt: skip
    assert "not executed" in answers[-1].text


@pytest.mark.parametrize("mode", MODES)
def test_the_per_tool_limit_counts_by_tool_name(mode: str) -> None:
    model = ScriptedChatModel(
        [
            ai_calls(call("search", '{"q": "a"}', id="a"), call("fetch", '{"url": "1"}', id="f1")),
            ai_calls(call("fetch", '{"url": "2"}', id="f2")),
            ai_calls(call("search", '{"q": "b"}', id="b")),
            AiMessage("done"),
        ]
    )
    limits = UsageLimits(per_tool={"search": 1})
    e = exceeded(mode, ToolService(usage_limits=limits).tools(search, fetch), model)

    assert RAN == ["search a", "fetch 1", "fetch 2"]
    assert (e.limit, e.tool_name, e.allowed, e.used) == ("per_tool", "search", 1, 1)
    assert e.usage.per_tool == {"search": 1, "fetch": 2}


@pytest.mark.parametrize("field", ["input_tokens", "output_tokens", "total_tokens"])
@pytest.mark.parametrize("mode", MODES)
def test_a_token_limit_stops_before_the_next_request_once_reached(mode: str, field: str) -> None:
    usage = TokenUsage(input_tokens=100, output_tokens=10, total_tokens=110)
    per_call = getattr(usage, field)
    limits = UsageLimits(**{field: per_call * 2})  # reached after the second response
    model = ScriptedChatModel(searches(5, usage=usage))
    e = exceeded(mode, ToolService(usage_limits=limits).tools(search), model)

    assert len(model.requests) == 2
    assert (e.limit, e.allowed, e.used) == (field, per_call * 2, per_call * 2)
    assert getattr(e.usage, field) == per_call * 2
    assert e.partial_result.token_usage.total_tokens == 220


def test_total_tokens_without_a_providers_total_is_input_plus_output() -> None:
    usage = TokenUsage(input_tokens=60, output_tokens=40)
    model = ScriptedChatModel(searches(5, usage=usage))
    service = ToolService(usage_limits=UsageLimits(total_tokens=150)).tools(search)
    e = exceeded("sync", service, model)
    assert (e.limit, e.used, len(model.requests)) == ("total_tokens", 200, 2)


@pytest.mark.parametrize("mode", MODES)
def test_a_final_answer_within_the_budget_is_returned(mode: str) -> None:
    limits = UsageLimits(requests=2, tool_calls=1, per_tool={"search": 1}, total_tokens=10_000)
    model = ScriptedChatModel(searches(1))
    result = run(mode, ToolService(usage_limits=limits).tools(search), model)
    assert result.text == "done" and len(model.requests) == 2


# answer mode ---------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_answer_mode_tells_the_model_and_lets_it_answer_once(mode: str) -> None:
    model = ScriptedChatModel(searches(2, final="what I found: found 0"))
    limits = UsageLimits(tool_calls=1, on_exceeded="answer")
    result = run(mode, ToolService(usage_limits=limits).tools(search), model)

    assert result.text == "what I found: found 0"
    assert RAN == ["search 0"]
    last = model.requests[-1]
    assert len(model.requests) == 3
    assert last.parameters.tool_choice == ToolChoice.NONE
    assert model.requests[1].parameters.tool_choice is None  # only the last one
    note = last.messages[-1]
    assert isinstance(note, UserMessage) and "budget" in (note.text or "")
    assert "UsageLimits.tool_calls=1" in (note.text or "")
    refused = [m for m in last.messages if isinstance(m, ToolExecutionResultMessage)][-1]
    assert (refused.id, refused.is_error) == ("s1", True)
    assert "not run" in refused.text
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_answer_mode_on_the_request_limit_sends_one_last_request(mode: str) -> None:
    model = ScriptedChatModel(searches(2, final="summary"))
    limits = UsageLimits(requests=2, on_exceeded="answer")
    result = run(mode, ToolService(usage_limits=limits).tools(search), model)

    assert result.text == "summary"
    assert [r.parameters.tool_choice for r in model.requests] == [None, None, ToolChoice.NONE]
    assert RAN == ["search 0", "search 1"]


@pytest.mark.parametrize("mode", MODES)
def test_a_model_that_calls_tools_after_being_told_is_stopped(mode: str) -> None:
    model = ScriptedChatModel(searches(4))  # ignores tool_choice=none
    limits = UsageLimits(tool_calls=1, on_exceeded="answer")
    e = exceeded(mode, ToolService(usage_limits=limits).tools(search), model)
    assert len(model.requests) == 3 and RAN == ["search 0"]
    assert "asked for tools again" in e.message


def test_answer_mode_with_a_correction_request_after_the_last_answer_stops() -> None:
    from pydantic import BaseModel

    class Answer(BaseModel):
        value: int

    model = ScriptedChatModel([*searches(1, final="not json")[:-1], AiMessage("not json")])
    limits = UsageLimits(requests=1, on_exceeded="answer")
    e = exceeded("sync", ToolService(usage_limits=limits).tools(search), model, output_type=Answer)
    assert len(model.requests) == 2 and "still did not answer" in e.message


# where the limits come from ------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_a_conversations_limits_replace_the_services(mode: str) -> None:
    service = ToolService(usage_limits=UsageLimits(requests=1)).tools(search)
    result = run(mode, service, ScriptedChatModel(searches(2)), usage_limits=UsageLimits())
    assert result.text == "done"
    e = exceeded(mode, service, ScriptedChatModel(searches(2)))
    assert e.allowed == 1


@pytest.mark.parametrize("mode", MODES)
def test_a_call_approved_later_counts_when_it_runs(mode: str) -> None:
    from toolweave import Approve

    @tool(requires_approval=True)
    def pay(amount: int) -> str:
        """Pay."""
        RAN.append(f"pay {amount}")
        return "paid"

    model = ScriptedChatModel(
        [ai_calls(call("search", '{"q": "a"}', id="a"), call("pay", '{"amount": 1}', id="p"))]
    )
    service = ToolService(usage_limits=UsageLimits(tool_calls=1)).tools(search, pay)
    paused = run(mode, service, model)
    assert paused.state is not None and RAN == ["search a"]
    # resumed: a budget counts the work of one chat call, so the approved call fits here
    model2 = ScriptedChatModel([AiMessage("ok")])
    resumed = run(mode, service, model2, messages=paused.state, decisions={"p": Approve()})
    assert resumed.text == "ok" and RAN == ["search a", "pay 1"]
    # with no room left in the resuming call's budget, the approved call does not run
    RAN.clear()
    paused = run(mode, service, ScriptedChatModel(model._script))  # type: ignore[arg-type]
    e = exceeded(
        mode,
        service,
        ScriptedChatModel([AiMessage("ok")]),
        messages=paused.state,
        decisions={"p": Approve()},
        usage_limits=UsageLimits(tool_calls=0),
    )
    assert RAN == ["search a"] and e.limit == "tool_calls"


def test_usage_limits_refuse_nonsense() -> None:
    with pytest.raises(ValueError, match="non-negative"):
        UsageLimits(requests=-1)
    with pytest.raises(ValueError, match="per_tool"):
        UsageLimits(per_tool={"search": -2})
    with pytest.raises(ValueError, match="on_exceeded"):
        UsageLimits(on_exceeded="ignore")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="UsageLimits"):
        ToolService(usage_limits={"requests": 1})  # type: ignore[arg-type]
    assert UsageLimits(per_tool={"a": 1}) == UsageLimits(per_tool={"a": 1})


def test_a_limit_of_zero_requests_sends_nothing() -> None:
    model = ScriptedChatModel(searches(1))
    e = exceeded("sync", ToolService(usage_limits=UsageLimits(requests=0)).tools(search), model)
    assert model.requests == [] and e.partial_result.messages == [UserMessage("hi")]


def test_the_error_pickles_with_its_fields() -> None:
    e = UsageLimitExceeded(
        "over", limit="per_tool", allowed=1, used=1, usage=RunUsage(tool_calls=1), tool_name="x"
    )
    back = pickle.loads(pickle.dumps(e))
    assert (back.limit, back.allowed, back.used, back.tool_name) == ("per_tool", 1, 1, "x")
    assert back.usage.tool_calls == 1 and str(back) == str(e)
