"""Standing decisions (`Approve(always=True)`, `Deny(always=True)`, limited by a pattern or a
function) and the service's allow / deny rules — on every face, through signed states, never
beyond the tool, the conversation or the pattern they were made for."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolweave import (
    AiMessage,
    Approve,
    ChatStatus,
    ConversationState,
    Deny,
    NeedsApproval,
    ScriptedChatModel,
    StandingDecision,
    ToolContext,
    ToolExecutionResultMessage,
    ToolService,
    tool,
)
from toolweave.service import InvalidConversationStateError

from ..service.helpers import MODES, ai_calls, call, run

SECRET = "a secret of the application, 32 bytes"
PAID: list[tuple[str, int]] = []
DELETED: list[str] = []


@tool(requires_approval=True)
def pay(to: str, amount: int = 5000) -> str:
    """Pay someone (the default amount is large)."""
    PAID.append((to, amount))
    return f"paid {amount} to {to}"


@tool(requires_approval=True)
def refund(to: str) -> str:
    """Refund someone."""
    PAID.append((to, -1))
    return f"refunded {to}"


@tool
def delete_file(path: str) -> str:
    """Delete a file (no approval asked by the tool itself)."""
    DELETED.append(path)
    return f"deleted {path}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    PAID.clear()
    DELETED.clear()


def _signed(state: ConversationState | None) -> ConversationState:
    assert state is not None
    return ConversationState.from_json(state.to_json(key=SECRET), key=SECRET)


def _pays(*turns: list[tuple[str, str, int]]) -> ScriptedChatModel:
    """One model turn per list of (call id, payee, amount)."""
    messages = [
        ai_calls(*(call("pay", json.dumps({"to": t, "amount": a}), id=i) for i, t, a in turn))
        for turn in turns
    ]
    return ScriptedChatModel([*messages, AiMessage("done")])


def _results(result: Any) -> dict[str, str]:
    return {m.id: m.text for m in result.messages if isinstance(m, ToolExecutionResultMessage)}


@pytest.mark.parametrize("mode", MODES)
def test_approve_always_stands_for_later_calls_through_a_signed_round_trip(mode: str) -> None:
    service = ToolService().tools(pay, refund)
    model = ScriptedChatModel(
        [
            ai_calls(call("pay", '{"to": "Ann", "amount": 5}', id="p1")),
            ai_calls(call("refund", '{"to": "Ann"}', id="r1")),
            ai_calls(
                call("pay", '{"to": "Bob", "amount": 7}', id="p2"),
                call("pay", '{"to": "Cy", "amount": 9}', id="p3"),
            ),
            AiMessage("done"),
        ]
    )
    first = run(mode, service, model)
    assert first.state is not None and first.state.standing_decisions == ()
    second = run(mode, service, model, _signed(first.state), decisions={"p1": Approve(always=True)})
    # the refund (another tool) still waits: a standing decision is for its tool only
    assert second.status is ChatStatus.PENDING and [p.id for p in second.pending] == ["r1"]
    (standing,) = second.state.standing_decisions  # type: ignore[union-attr]
    assert (standing.tool_name, standing.decision, standing.when) == ("pay", "approve", None)
    assert standing.call_id == "p1"
    third = run(mode, service, model, _signed(second.state), decisions={"r1": Approve()})
    assert third.status is ChatStatus.COMPLETED  # p2 and p3 ran without asking
    assert PAID == [("Ann", 5), ("Ann", -1), ("Bob", 7), ("Cy", 9)]


@pytest.mark.parametrize("mode", MODES)
def test_a_pattern_limits_a_standing_approval_on_the_validated_arguments(mode: str) -> None:
    service = ToolService().tools(pay)
    # p2 sends no amount: the tool would run with the default 5000, which the pattern
    # does not cover (the pattern sees the arguments with the defaults filled in)
    model = ScriptedChatModel(
        [
            ai_calls(call("pay", '{"to": "Ann", "amount": 5}', id="p1")),
            ai_calls(
                call("pay", '{"to": "Bob", "amount": "50"}', id="ok"),
                call("pay", '{"to": "Eve"}', id="p2"),
                call("pay", '{"to": "Eve", "amount": 101}', id="p3"),
            ),
            AiMessage("done"),
        ]
    )
    first = run(mode, service, model)
    small = Approve(always=True, when={"amount": {"$max": 100}})
    second = run(mode, service, model, _signed(first.state), decisions={"p1": small})
    assert [p.id for p in second.pending] == ["p2", "p3"]  # beyond the pattern: asked
    assert PAID == [("Ann", 5), ("Bob", 50)]
    (standing,) = second.state.standing_decisions  # type: ignore[union-attr]
    assert standing.when == {"amount": {"$max": 100}}


@pytest.mark.parametrize("mode", MODES)
def test_deny_always_answers_later_calls_without_running_them(mode: str) -> None:
    service = ToolService().tools(pay)
    model = _pays([("p1", "Eve", 5)], [("p2", "Eve", 6), ("p3", "Eve", 7)])
    first = run(mode, service, model)
    never = Deny("Eve is blocked.", always=True)
    done = run(mode, service, model, _signed(first.state), decisions={"p1": never})
    assert done.status is ChatStatus.COMPLETED and PAID == []
    assert _results(done) == {
        "p1": "Eve is blocked.",
        "p2": "Eve is blocked.",
        "p3": "Eve is blocked.",
    }


def test_a_standing_decision_is_never_applied_to_another_conversation() -> None:
    service = ToolService().tools(pay)
    model_a = _pays([("p1", "Ann", 5)], [("p2", "Ann", 6)])
    model_b = _pays([("p1", "Ann", 5)])
    first = service.chat(model_a, None, "conversation A")
    done = service.chat(model_a, None, first.state, decisions={"p1": Approve(always=True)})
    assert done.status is ChatStatus.COMPLETED and PAID == [("Ann", 5), ("Ann", 6)]
    other = service.chat(model_b, None, "conversation B")  # same service, tool and arguments
    assert other.status is ChatStatus.PENDING and [p.id for p in other.pending] == ["p1"]
    assert other.state is not None and other.state.standing_decisions == ()
    assert PAID == [("Ann", 5), ("Ann", 6)]


def test_a_standing_decision_cannot_be_added_to_a_signed_state() -> None:
    service = ToolService().tools(pay)
    first = service.chat(_pays([("p1", "Eve", 500)]), None, "hi")
    assert first.state is not None
    envelope = json.loads(first.state.to_json(key=SECRET))
    inner = json.loads(envelope["signed_state"])
    inner["standing_decisions"] = [{"tool_name": "pay", "decision": "approve", "id": "x"}]
    envelope["signed_state"] = json.dumps(inner)
    with pytest.raises(InvalidConversationStateError, match="signature"):
        ConversationState.from_json(json.dumps(envelope), key=SECRET)
    widened = json.loads(first.state.to_json())  # unsigned: a malformed pattern is refused
    widened["standing_decisions"] = [
        {"tool_name": "pay", "decision": "approve", "when": {"amount": {"$regex": ".*"}}}
    ]
    with pytest.raises(InvalidConversationStateError):
        ConversationState.from_json(json.dumps(widened))


@pytest.mark.parametrize("mode", MODES)
def test_a_function_limit_holds_in_process_and_refuses_to_be_written(mode: str) -> None:
    service = ToolService().tools(pay)
    model = _pays([("p1", "Ann", 5)], [("p2", "Ann", 6), ("p3", "Bob", 7)])
    first = run(mode, service, model)
    only_ann = Approve(always=True, when=lambda args: args["to"] == "Ann")
    second = run(mode, service, model, first.state, decisions={"p1": only_ann})
    assert [p.id for p in second.pending] == ["p3"] and PAID == [("Ann", 5), ("Ann", 6)]
    assert second.state is not None and second.state.standing_decisions[0].in_process
    with pytest.raises(TypeError, match="argument pattern"):
        second.state.to_json(key=SECRET)  # written without it, the decision would widen
    done = run(mode, service, model, second.state, decisions={"p3": Deny()})
    assert done.status is ChatStatus.COMPLETED


@pytest.mark.parametrize("mode", MODES)
def test_a_revoked_standing_decision_asks_again(mode: str) -> None:
    service = ToolService().tools(pay, refund)
    model = ScriptedChatModel(
        [
            ai_calls(
                call("pay", '{"to": "Ann", "amount": 5}', id="p1"),
                call("refund", '{"to": "Ann"}', id="r1"),
            ),
            ai_calls(call("pay", '{"to": "Bob", "amount": 6}', id="p2")),
            AiMessage("done"),
        ]
    )
    first = run(mode, service, model)
    second = run(mode, service, model, first.state, decisions={"p1": Approve(always=True)})
    assert second.state is not None and [p.id for p in second.pending] == ["r1"]
    (standing,) = second.state.standing_decisions
    revoked = _signed(second.state).revoke(standing.id)
    assert revoked.standing_decisions == () and revoked.pause_id == second.state.pause_id
    with pytest.raises(KeyError):
        revoked.revoke(standing.id)
    third = run(mode, service, model, _signed(revoked), decisions={"r1": Approve()})
    assert [p.id for p in third.pending] == ["p2"]  # asked again
    assert PAID == [("Ann", 5), ("Ann", -1)]


@pytest.mark.parametrize(
    "decision",
    [
        Approve({"amount": 1}, always=True),  # a standing approval cannot edit arguments
        Approve(when={"amount": 1}),  # a limit without always
        Approve(always=True, when={"amount": {"$regex": "."}}),  # an unknown operator
        Approve(always=True, when=[("amount", 1)]),  # type: ignore[arg-type]
        Deny(always="yes"),  # type: ignore[arg-type]
    ],
)
def test_malformed_standing_decisions_are_refused_before_anything_runs(decision: Any) -> None:
    service = ToolService().tools(pay)
    first = service.chat(_pays([("p1", "Ann", 5)]), None, "hi")
    with pytest.raises((TypeError, ValueError)):
        service.chat(_pays([]), None, first.state, decisions={"p1": decision})
    assert PAID == []


def test_a_standing_decision_is_for_approvals_only() -> None:
    service = ToolService().deferred("read_clipboard")
    model = ScriptedChatModel([ai_calls(call("read_clipboard", id="c")), AiMessage("done")])
    first = service.chat(model, None, "hi")
    with pytest.raises(InvalidConversationStateError, match="standing"):
        service.chat(model, None, first.state, decisions={"c": Deny(always=True)})


def test_patterns_match_only_what_they_say() -> None:
    pattern = {"to": {"$glob": "team-*"}, "amount": {"$min": 1, "$max": 9}}
    with pytest.raises(ValueError):  # one operator per condition
        StandingDecision(tool_name="pay", decision="approve", when=pattern)
    ok = StandingDecision(
        tool_name="pay",
        decision="approve",
        when={"to": {"$glob": "team-*"}, "amount": {"$in": [1, 2]}, "note": "x"},
    )
    assert ok.covers("pay", {"to": "team-a", "amount": 2, "note": "x"})
    assert not ok.covers("pay", {"to": "Team-a", "amount": 2, "note": "x"})  # case-sensitive
    assert not ok.covers("pay", {"to": "team-a", "amount": 2.0, "note": "x"})  # 2.0 is not 2
    assert not ok.covers("pay", {"to": "team-a", "amount": True, "note": "x"})
    assert not ok.covers("pay", {"to": "team-a", "amount": 2})  # a missing argument
    assert not ok.covers("pay2", {"to": "team-a", "amount": 2, "note": "x"})
    assert not ok.covers("pay", None)  # arguments that are not valid
    limit = StandingDecision(tool_name="pay", decision="approve", when={"amount": {"$max": 9}})
    assert limit.covers("pay", {"amount": 9}) and not limit.covers("pay", {"amount": 9.5})
    assert not limit.covers("pay", {"amount": "1"}) and not limit.covers("pay", {"amount": False})


# service-level rules -----------------------------------------------------------------------
@pytest.mark.parametrize("mode", MODES)
def test_allow_and_deny_rules_deny_winning(mode: str) -> None:
    service = (
        ToolService()
        .tools(pay, refund, delete_file)
        .allow("pay", "ref*")
        .deny("pay", when={"to": "Eve"}, message="Eve is not a payee.")
        .deny("delete_*", when=lambda args: args["path"].startswith("/etc"))
    )
    model = ScriptedChatModel(
        [
            ai_calls(
                call("pay", '{"to": "Ann", "amount": 5}', id="a"),
                call("pay", '{"to": "Eve", "amount": 5}', id="e"),
                call("refund", '{"to": "Ann"}', id="r"),
                call("delete_file", '{"path": "/etc/passwd"}', id="d1"),
                call("delete_file", '{"path": "/tmp/x"}', id="d2"),
            ),
            AiMessage("done"),
        ]
    )
    done = run(mode, service, model)
    assert done.status is ChatStatus.COMPLETED  # nobody was asked
    assert sorted(PAID) == [("Ann", -1), ("Ann", 5)] and DELETED == ["/tmp/x"]
    results = _results(done)
    assert results["e"] == "Eve is not a payee."
    assert results["d1"] == "This tool call is not allowed by the application's rules."
    assert list(results) == ["a", "e", "r", "d1", "d2"]  # in request order


@pytest.mark.parametrize("mode", MODES)
def test_rules_see_the_defaults_and_deny_beats_a_standing_approval(mode: str) -> None:
    service = ToolService().tools(pay).deny("pay", when=lambda args: args["amount"] > 1000)
    model = ScriptedChatModel(
        [
            ai_calls(call("pay", '{"to": "Ann", "amount": 5}', id="p1")),
            ai_calls(call("pay", '{"to": "Ann"}', id="p2")),  # the default: 5000
            AiMessage("done"),
        ]
    )
    first = run(mode, service, model)
    done = run(mode, service, model, first.state, decisions={"p1": Approve(always=True)})
    assert done.status is ChatStatus.COMPLETED and PAID == [("Ann", 5)]
    assert _results(done)["p2"] == "This tool call is not allowed by the application's rules."


@pytest.mark.parametrize("mode", MODES)
def test_a_deny_rule_wins_over_a_persons_approval(mode: str) -> None:
    service = ToolService().tools(pay)
    model = _pays([("p1", "Eve", 5)])
    first = run(mode, service, model)
    service.deny("pay", when={"to": "Eve"})  # added while the person was deciding
    done = run(mode, service, model, first.state, decisions={"p1": Approve()})
    assert done.status is ChatStatus.COMPLETED and PAID == []


@pytest.mark.parametrize("mode", MODES)
def test_a_standing_approval_covers_a_tool_that_pauses_itself(mode: str) -> None:
    seen: list[Any] = []

    @tool
    def wire(to: str, ctx: ToolContext) -> str:
        """Wire money (asks itself)."""
        seen.append(ctx.approval)
        if ctx.approval is None:
            raise NeedsApproval("a wire")
        return f"wired {to}"

    service = ToolService().tools(wire)
    model = ScriptedChatModel(
        [
            ai_calls(call("wire", '{"to": "Ann"}', id="w1")),
            ai_calls(call("wire", '{"to": "Bob"}', id="w2")),
            AiMessage("done"),
        ]
    )
    first = run(mode, service, model)
    done = run(mode, service, model, first.state, decisions={"w1": Approve(always=True)})
    assert done.status is ChatStatus.COMPLETED
    assert _results(done) == {"w1": "wired Ann", "w2": "wired Bob"}
    assert [s is None for s in seen] == [True, False, True, False]  # w2: asked, then allowed


def test_rules_are_checked_when_made() -> None:
    with pytest.raises(TypeError):
        ToolService().allow()
    with pytest.raises(ValueError):
        ToolService().deny("x", when={"a": {"$nope": 1}})


@pytest.mark.parametrize("mode", MODES)
def test_a_pause_after_a_standing_approval_of_a_raised_call_counts_its_rounds(mode: str) -> None:
    @tool
    def wire(to: str, ctx: ToolContext) -> str:
        """Wire money (asks itself)."""
        if ctx.approval is None:
            raise NeedsApproval("a wire")
        return f"wired {to}"

    service = ToolService().tools(wire)
    model = ScriptedChatModel(
        [
            ai_calls(call("wire", '{"to": "Ann"}', id="w1")),
            ai_calls(
                call("wire", '{"to": "Ann"}', id="w2"),  # covered: runs again at once
                call("wire", '{"to": "Bob"}', id="w3"),  # not covered: asked
            ),
            AiMessage("done"),
        ]
    )
    first = run(mode, service, model)
    assert first.state is not None and first.state.rounds == 1
    only_ann = Approve(always=True, when={"to": "Ann"})
    second = run(mode, service, model, first.state, decisions={"w1": only_ann})
    assert [p.id for p in second.pending] == ["w3"]
    assert second.state is not None and second.state.rounds == 2  # the second round counts
    assert _results(second) == {"w1": "wired Ann", "w2": "wired Ann"}
    done = run(mode, service, model, second.state, decisions={"w3": Approve()})
    assert done.status is ChatStatus.COMPLETED and _results(done)["w3"] == "wired Bob"


@pytest.mark.parametrize("mode", MODES)
def test_a_call_id_reused_in_a_later_turn_is_judged_afresh(mode: str) -> None:
    service = ToolService().tools(delete_file).deny("delete_file", when={"path": "/etc"})
    model = ScriptedChatModel(
        [
            ai_calls(call("delete_file", '{"path": "/etc"}', id="x")),
            ai_calls(call("delete_file", '{"path": "/tmp/a"}', id="x")),  # the same id
            AiMessage("done"),
        ]
    )
    done = run(mode, service, model)
    texts = [m.text for m in done.messages if isinstance(m, ToolExecutionResultMessage)]
    assert texts == ["This tool call is not allowed by the application's rules.", "deleted /tmp/a"]
    assert DELETED == ["/tmp/a"]
