"""A tool that pauses itself (`NeedsApproval`, `CallDeferred`): the round pauses like a gate,
the tool runs again on resume seeing the decision as `ctx.approval`, exactly once whatever
the number of resumes attempted from states of the same pause — on every face."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from pydantic import AfterValidator

from toolweave import (
    AiMessage,
    Approve,
    CallDeferred,
    ChatStatus,
    ConversationState,
    DeferredResult,
    Deny,
    NeedsApproval,
    ScriptedChatModel,
    ToolContext,
    ToolExecutionResultMessage,
    ToolService,
    current_approval,
    tool,
)
from toolweave.service import CallAlreadyDecidedError

from ..service.helpers import MODES, ai_calls, assert_history_valid, call, run

SECRET = "a secret of the application, 32 bytes"
runs_seen: list[tuple[str, Any]] = []
DONE: list[str] = []


@tool
def transfer(to: str, amount: int, ctx: ToolContext) -> str:
    """Transfer money; large amounts need a person's approval (asked by the tool)."""
    runs_seen.append((to, ctx.approval))
    if amount > 100 and ctx.approval is None:  # check first ...
        raise NeedsApproval(f"{amount} is above the limit", {"limit": 100, "to": to})
    DONE.append(to)  # ... act after
    return f"sent {amount} to {to}"


@tool
async def fetch_report(name: str, ctx: ToolContext) -> str:
    """A report produced outside (the caller answers with its text)."""
    runs_seen.append((name, ctx.approval))
    if ctx.approval is None:
        raise CallDeferred({"report": name})
    return f"report {name}: {ctx.approval.text}"


@tool
def balance(account: str) -> str:
    """The balance of an account."""
    DONE.append(f"balance {account}")
    return f"{account}: 100"


def _checked(value: str) -> str:
    if value.startswith("vip-") and current_approval() is None:
        raise NeedsApproval("a VIP account", {"account": value})
    return value


@tool
def close_account(account: Annotated[str, AfterValidator(_checked)]) -> str:
    """Close an account (VIP accounts need approval, asked by argument validation)."""
    DONE.append(f"closed {account}")
    return f"closed {account}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    runs_seen.clear()
    DONE.clear()


def _model(*turns: AiMessage) -> ScriptedChatModel:
    return ScriptedChatModel([*turns, AiMessage("done")])


def _signed(state: ConversationState | None) -> ConversationState:
    assert state is not None
    return ConversationState.from_json(state.to_json(key=SECRET), key=SECRET)


@pytest.mark.parametrize("mode", MODES)
def test_a_raised_pause_resumes_exactly_once(mode: str) -> None:
    service = ToolService().tools(transfer, balance)
    model = _model(
        ai_calls(
            call("balance", '{"account": "A"}', id="c1"),
            call("transfer", '{"to": "Eve", "amount": 500}', id="c2"),
        )
    )
    first = run(mode, service, model)
    assert first.status is ChatStatus.PENDING
    (waiting,) = first.pending
    assert (waiting.id, waiting.reason, waiting.raised) == ("c2", "approval", True)
    assert waiting.message == "500 is above the limit"
    assert waiting.metadata == {"limit": 100, "to": "Eve"}
    assert runs_seen == [("Eve", None)] and DONE == ["balance A"]  # first run: no approval yet
    paused = _signed(first.state)
    assert paused.pending[0].raised  # kept (and signed) in the state

    second = run(mode, service, model, paused, decisions={"c2": Approve()})
    assert second.status is ChatStatus.COMPLETED and second.text == "done"
    assert runs_seen == [("Eve", None), ("Eve", Approve())]  # run again, seeing the decision
    assert DONE == ["balance A", "Eve"]
    assert_history_valid(second.messages)
    results = [m for m in second.messages if isinstance(m, ToolExecutionResultMessage)]
    assert [(m.id, m.text) for m in results] == [("c1", "A: 100"), ("c2", "sent 500 to Eve")]

    for attempt in range(3):  # the same pause, resumed again: refused before anything runs
        again = _signed(first.state)
        with pytest.raises(CallAlreadyDecidedError) as refused:
            run(mode, service, model, again, decisions={"c2": Approve()})
        assert refused.value.call_id == "c2", attempt
    assert DONE == ["balance A", "Eve"] and len(runs_seen) == 2  # the second run happened once


@pytest.mark.parametrize("mode", MODES)
def test_a_raised_pause_of_two_calls_runs_each_once_through_derived_states(mode: str) -> None:
    service = ToolService().tools(transfer)
    model = ScriptedChatModel(
        [
            ai_calls(
                call("transfer", '{"to": "A", "amount": 200}', id="a"),
                call("transfer", '{"to": "B", "amount": 300}', id="b"),
            ),
            AiMessage("done"),
            AiMessage("done"),
        ]
    )
    first = run(mode, service, model)
    assert [p.id for p in first.pending] == ["a", "b"]
    state = first.state
    assert state is not None
    s_a = run(mode, service, model, state, decisions={"a": Approve()})
    assert s_a.status is ChatStatus.PENDING and [p.id for p in s_a.pending] == ["b"]
    with pytest.raises(CallAlreadyDecidedError):  # S + Approve(A) again
        run(mode, service, model, state, decisions={"a": Approve()})
    s_b = run(mode, service, model, state, decisions={"b": Approve()})  # S + Approve(B)
    assert s_b.status is ChatStatus.PENDING and [p.id for p in s_b.pending] == ["a"]
    with pytest.raises(CallAlreadyDecidedError):  # then S_A + Approve(B)
        run(mode, service, model, s_a.state, decisions={"b": Approve()})
    with pytest.raises(CallAlreadyDecidedError):  # and S_B + Approve(A)
        run(mode, service, model, s_b.state, decisions={"a": Approve()})
    assert DONE.count("A") == 1 and DONE.count("B") == 1
    assert len([r for r in runs_seen if r[1] is not None]) == DONE.count("A") + DONE.count("B")


@pytest.mark.parametrize("mode", MODES)
def test_a_denied_raised_pause_never_runs_again(mode: str) -> None:
    service = ToolService().tools(transfer)
    model = _model(ai_calls(call("transfer", '{"to": "Eve", "amount": 500}', id="c1")))
    first = run(mode, service, model)
    done = run(mode, service, model, first.state, decisions={"c1": Deny("Not today.")})
    assert done.status is ChatStatus.COMPLETED
    assert runs_seen == [("Eve", None)] and DONE == []
    (result,) = [m for m in done.messages if isinstance(m, ToolExecutionResultMessage)]
    assert result.is_error and result.text == "Not today."


@pytest.mark.parametrize("mode", MODES)
def test_call_deferred_runs_again_with_the_outside_result(mode: str) -> None:
    service = ToolService().tools(fetch_report)
    model = _model(ai_calls(call("fetch_report", '{"name": "q3"}', id="r1")))
    first = run(mode, service, model)
    (waiting,) = first.pending
    assert (waiting.reason, waiting.raised, waiting.metadata) == (
        "deferred",
        True,
        {"report": "q3"},
    )
    with pytest.raises(Exception, match="deferred call"):  # Approve does not answer it
        run(mode, service, model, first.state, decisions={"r1": Approve()})
    answer = DeferredResult("all good")
    done = run(mode, service, model, _signed(first.state), decisions={"r1": answer})
    assert runs_seen == [("q3", None), ("q3", answer)]
    results = [m.text for m in done.messages if isinstance(m, ToolExecutionResultMessage)]
    assert results == ["report q3: all good"]
    with pytest.raises(CallAlreadyDecidedError):  # answered: it cannot now be approved
        run(mode, service, model, first.state, decisions={"r1": Deny()})
    assert len(runs_seen) == 2


@pytest.mark.parametrize("mode", MODES)
def test_a_pause_raised_by_argument_validation(mode: str) -> None:
    service = ToolService().tools(close_account)
    model = _model(
        ai_calls(
            call("close_account", '{"account": "plain-1"}', id="k1"),
            call("close_account", '{"account": "vip-7"}', id="k2"),
        )
    )
    first = run(mode, service, model)
    assert [(p.id, p.raised, p.message) for p in first.pending] == [("k2", True, "a VIP account")]
    assert DONE == ["closed plain-1"]
    done = run(mode, service, model, _signed(first.state), decisions={"k2": Approve()})
    assert done.status is ChatStatus.COMPLETED
    assert DONE == ["closed plain-1", "closed vip-7"]


@pytest.mark.parametrize("mode", MODES)
def test_a_tool_that_pauses_again_is_asked_again_and_each_decision_counts_once(
    mode: str,
) -> None:
    asked: list[Any] = []

    @tool
    def two_step(x: int, ctx: ToolContext) -> str:
        """Needs two approvals: a first, then a second with a different reason."""
        asked.append(ctx.approval)
        if ctx.approval is None:
            raise NeedsApproval("first")
        if not ctx.approval.always and len(asked) < 3:
            raise NeedsApproval("second")
        return f"ok {x}"

    service = ToolService().tools(two_step)
    model = _model(ai_calls(call("two_step", '{"x": 1}', id="t")))
    first = run(mode, service, model)
    assert [(p.message, p.ask) for p in first.pending] == [("first", 0)]
    second = run(mode, service, model, _signed(first.state), decisions={"t": Approve()})
    assert second.status is ChatStatus.PENDING
    assert [(p.id, p.message, p.ask) for p in second.pending] == [("t", "second", 1)]
    assert second.state is not None and second.state.pause_id == first.state.pause_id  # type: ignore[union-attr]
    third = run(mode, service, model, _signed(second.state), decisions={"t": Approve()})
    assert third.status is ChatStatus.COMPLETED and len(asked) == 3
    with pytest.raises(CallAlreadyDecidedError):  # the second ask was decided already
        run(mode, service, model, second.state, decisions={"t": Approve()})
    with pytest.raises(CallAlreadyDecidedError):  # and so was the first
        run(mode, service, model, first.state, decisions={"t": Approve()})
    assert len(asked) == 3


def test_ctx_approval_is_none_outside_a_resumed_call() -> None:
    seen: list[Any] = []

    @tool
    def peek(ctx: ToolContext) -> str:
        """Report what it sees."""
        seen.append(ctx.approval)
        return "ok"

    service = ToolService().tools(peek, transfer)
    model = ScriptedChatModel(
        [
            ai_calls(call("transfer", '{"to": "Eve", "amount": 500}', id="p")),
            ai_calls(call("peek", id="p")),  # the same call id, a later turn: no approval
            AiMessage("done"),
        ]
    )
    first = service.chat(model, None, "hi")
    done = service.chat(model, None, first.state, decisions={"p": Approve()})
    assert done.status is ChatStatus.COMPLETED and seen == [None]


@pytest.mark.parametrize("mode", MODES)
def test_a_gated_call_whose_tool_then_pauses_itself_is_asked_again_once(mode: str) -> None:
    """Approved at its gate (with edited arguments), the tool pauses itself on its run: the
    call waits again (ask 1, the model's own arguments in the state, which stays valid and
    signed), and the second approval runs it once."""
    ran: list[tuple[int, Any]] = []

    @tool(requires_approval=True)
    def big_pay(amount: int, ctx: ToolContext) -> str:
        """Pay (gated, and it asks again for large amounts)."""
        ran.append((amount, ctx.approval))
        if amount > 100 and ctx.approval is None:
            raise NeedsApproval("really large")
        return f"paid {amount}"

    service = ToolService().tools(big_pay)
    model = _model(ai_calls(call("big_pay", '{"amount": 50}', id="b")))
    first = run(mode, service, model)
    assert [(p.raised, p.ask) for p in first.pending] == [(False, 0)]
    edited = Approve({"amount": 500})
    second = run(mode, service, model, _signed(first.state), decisions={"b": edited})
    assert [(p.id, p.raised, p.ask, p.message) for p in second.pending] == [
        ("b", True, 1, "really large")
    ]
    assert second.pending[0].arguments == '{"amount": 50}'  # the model's call, unchanged
    with pytest.raises(CallAlreadyDecidedError):  # the gate's decision was the first one
        run(mode, service, model, first.state, decisions={"b": Approve()})
    third = run(mode, service, model, _signed(second.state), decisions={"b": edited})
    assert third.status is ChatStatus.COMPLETED
    assert ran == [(500, None), (500, edited)]
    with pytest.raises(CallAlreadyDecidedError):
        run(mode, service, model, second.state, decisions={"b": edited})
    assert len(ran) == 2


def test_a_nested_conversations_call_with_the_same_id_never_sees_the_outer_approval() -> None:
    """The outer call "x" runs again approved and runs a conversation of its own whose
    model also names its call "x": that inner call has no approval."""
    inner_seen: list[Any] = []

    @tool
    def inner_tool(ctx: ToolContext) -> str:
        """Report what it sees."""
        inner_seen.append(ctx.approval)
        return "inner ok"

    inner = ToolService().tools(inner_tool)

    @tool
    async def outer(ctx: ToolContext) -> str:
        """Ask first, then run a conversation of its own."""
        if ctx.approval is None:
            raise NeedsApproval("outer")
        model = ScriptedChatModel([ai_calls(call("inner_tool", id="x")), AiMessage("inner")])
        result = await inner.achat(model, None, "go")
        return result.text or ""

    service = ToolService().tools(outer)
    model = _model(ai_calls(call("outer", id="x")))
    first = service.chat(model, None, "hi")
    done = service.chat(model, None, first.state, decisions={"x": Approve()})
    assert done.status is ChatStatus.COMPLETED and inner_seen == [None]
