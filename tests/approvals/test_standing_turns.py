"""Standing decisions across turns: an "always" answered in one `chat()` holds in the next
turn of the same conversation (`result.standing_decisions` passed back as
`standing_decisions=`), in process or signed through a client (`ToolService.sign_standing`
/ `verify_standing`, bound to the conversation's memory id), never in another
conversation, never from tampered text, and not after it was revoked."""

from __future__ import annotations

import json
from typing import Any

import pytest

from toolweave import (
    AiMessage,
    Approve,
    ChatStatus,
    Deny,
    InvalidStandingDecisionsError,
    ScriptedChatModel,
    StandingDecision,
    ToolChatResult,
    ToolExecutionResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from toolweave.service import InvalidConversationStateError

from ..service.helpers import MODES, ai_calls, call, run

SECRET = "a secret of the application, 32 bytes"
SEARCHED: list[str] = []
PAID: list[int] = []


@tool(requires_approval=True)
def search_web(query: str) -> str:
    """Search the web."""
    SEARCHED.append(query)
    return f"results for {query}"


@tool(requires_approval=True)
def pay(amount: int) -> str:
    """Pay an amount."""
    PAID.append(amount)
    return f"paid {amount}"


@pytest.fixture(autouse=True)
def _clear() -> None:
    SEARCHED.clear()
    PAID.clear()


def _search(query: str, call_id: str) -> AiMessage:
    return ai_calls(call("search_web", json.dumps({"query": query}), id=call_id))


def _turn_one(mode: str, service: ToolService, memory_id: str = "conv-1") -> ToolChatResult:
    """Turn 1: the model searches, the person answers "always allow search_web"."""
    model = ScriptedChatModel([_search("cats", "s1"), AiMessage("cats found")])
    paused = run(mode, service, model, "find cats", memory_id=memory_id)
    assert paused.status is ChatStatus.PENDING and [p.id for p in paused.pending] == ["s1"]
    assert paused.standing_decisions == ()
    done = run(
        mode,
        service,
        model,
        paused.state,
        memory_id=memory_id,
        decisions={"s1": Approve(always=True)},
    )
    assert done.status is ChatStatus.COMPLETED and done.state is None
    return done


def _turn_two(
    mode: str, service: ToolService, first: ToolChatResult, **kw: Any
) -> tuple[ToolChatResult, ScriptedChatModel]:
    """Turn 2: the user asks again; the model searches again."""
    model = ScriptedChatModel([_search("dogs", "s2"), AiMessage("dogs found")])
    history = [*first.messages, UserMessage("and dogs?")]
    return run(mode, service, model, history, **kw), model


@pytest.mark.parametrize("mode", MODES)
def test_an_always_of_turn_one_holds_in_turn_two_without_asking(mode: str) -> None:
    service = ToolService().tools(search_web, pay)
    first = _turn_one(mode, service)
    (standing,) = first.standing_decisions
    assert (standing.tool_name, standing.decision, standing.when) == ("search_web", "approve", None)
    second, model = _turn_two(
        mode, service, first, memory_id="conv-1", standing_decisions=first.standing_decisions
    )
    assert second.status is ChatStatus.COMPLETED
    assert SEARCHED == ["cats", "dogs"]
    # the model received the search's result, not a pause
    (request,) = model.requests[1:]
    answers = [m for m in request.messages if isinstance(m, ToolExecutionResultMessage)]
    assert answers[-1].id == "s2" and answers[-1].text == "results for dogs"
    # and it is still in force at the end of turn 2, for turn 3
    assert second.standing_decisions == first.standing_decisions


@pytest.mark.parametrize("mode", MODES)
def test_without_passing_them_turn_two_asks_again(mode: str) -> None:
    service = ToolService().tools(search_web)
    first = _turn_one(mode, service)
    second, _ = _turn_two(mode, service, first, memory_id="conv-1")
    assert second.status is ChatStatus.PENDING
    assert [p.id for p in second.pending] == ["s2"]
    assert SEARCHED == ["cats"]


@pytest.mark.parametrize("mode", MODES)
def test_a_standing_decision_is_for_its_tool_only_in_the_next_turn(mode: str) -> None:
    service = ToolService().tools(search_web, pay)
    first = _turn_one(mode, service)
    model = ScriptedChatModel([ai_calls(call("pay", '{"amount": 9}', id="p1")), AiMessage("ok")])
    history = [*first.messages, UserMessage("pay 9")]
    second = run(
        mode,
        service,
        model,
        history,
        memory_id="conv-1",
        standing_decisions=first.standing_decisions,
    )
    assert second.status is ChatStatus.PENDING and [p.id for p in second.pending] == ["p1"]
    assert PAID == []
    # a pause in turn 2 keeps them in its state: a resume there still has them
    assert second.state.standing_decisions == first.standing_decisions  # type: ignore[union-attr]


@pytest.mark.parametrize("mode", MODES)
def test_decisions_made_while_resuming_turn_two_are_added(mode: str) -> None:
    service = ToolService().tools(search_web, pay)
    first = _turn_one(mode, service)
    model = ScriptedChatModel(
        [
            ai_calls(call("pay", '{"amount": 9}', id="p1")),
            ai_calls(call("pay", '{"amount": 500}', id="p2")),
            AiMessage("ok"),
        ]
    )
    history = [*first.messages, UserMessage("pay 9")]
    paused = run(
        mode,
        service,
        model,
        history,
        memory_id="conv-1",
        standing_decisions=first.standing_decisions,
    )
    done = run(
        mode,
        service,
        model,
        paused.state,
        memory_id="conv-1",
        decisions={"p1": Deny("no payments", always=True)},
    )
    assert done.status is ChatStatus.COMPLETED and PAID == []
    kinds = [(s.tool_name, s.decision) for s in done.standing_decisions]
    assert kinds == [("search_web", "approve"), ("pay", "deny")]


@pytest.mark.parametrize("mode", MODES)
def test_signed_round_trip_through_a_client(mode: str) -> None:
    service = ToolService().tools(search_web)
    first = _turn_one(mode, service)
    text = ToolService.sign_standing(
        first.standing_decisions,
        key=SECRET,
        memory_id="conv-1",
    )
    json.loads(text)  # plain JSON for the client to hold
    back = ToolService.verify_standing(text, key=SECRET, memory_id="conv-1")
    assert back == first.standing_decisions
    second, _ = _turn_two(mode, service, first, memory_id="conv-1", standing_decisions=back)
    assert second.status is ChatStatus.COMPLETED and SEARCHED == ["cats", "dogs"]


@pytest.mark.parametrize("mode", MODES)
def test_signed_decisions_of_another_conversation_are_refused(mode: str) -> None:
    service = ToolService().tools(search_web)
    first = _turn_one(mode, service, memory_id="conv-1")
    text = ToolService.sign_standing(
        first.standing_decisions,
        key=SECRET,
        memory_id="conv-1",
    )
    with pytest.raises(InvalidStandingDecisionsError, match="another conversation"):
        ToolService.verify_standing(text, key=SECRET, memory_id="conv-2")
    with pytest.raises(InvalidStandingDecisionsError, match="another conversation"):
        ToolService.verify_standing(text, key=SECRET, memory_id=1)
    # conv-2 never passed them: its search is asked for
    second, _ = _turn_two(mode, service, first, memory_id="conv-2")
    assert second.status is ChatStatus.PENDING and SEARCHED == ["cats"]


def _tampered(text: str, edit: Any) -> str:
    envelope = json.loads(text)
    inner = json.loads(envelope["signed_standing"])
    edit(inner)
    envelope["signed_standing"] = json.dumps(inner)
    return json.dumps(envelope)


@pytest.mark.parametrize(
    "edit",
    [
        lambda d: d["decisions"][0].update(tool_name="pay"),  # widened to another tool
        lambda d: d["decisions"][0].update(when=None),  # a limit removed
        lambda d: d.update(memory_id='"conv-2"'),  # moved to another conversation
        lambda d: d["decisions"].append(dict(d["decisions"][0], decision="approve", id="x")),
    ],
    ids=["tool", "limit", "conversation", "added"],
)
def test_a_tampered_signed_payload_is_refused_with_a_typed_error(edit: Any) -> None:
    limited = StandingDecision(tool_name="search_web", decision="approve", when={"query": "cats"})
    text = ToolService.sign_standing([limited], key=SECRET, memory_id="conv-1")
    with pytest.raises(InvalidStandingDecisionsError, match="signature does not match"):
        ToolService.verify_standing(_tampered(text, edit), key=SECRET, memory_id="conv-1")


def test_unsigned_foreign_or_state_text_is_refused() -> None:
    decision = StandingDecision(tool_name="search_web", decision="approve")
    text = ToolService.sign_standing([decision], key=SECRET, memory_id="conv-1")
    other_key = "another secret, also 32 bytes long"
    with pytest.raises(InvalidStandingDecisionsError, match="signature does not match"):
        ToolService.verify_standing(text, key=other_key, memory_id="conv-1")
    plain = json.dumps([decision.model_dump(mode="json")])
    with pytest.raises(InvalidStandingDecisionsError, match="not signed"):
        ToolService.verify_standing(plain, key=SECRET, memory_id="conv-1")
    # the same signature presented as a signed ConversationState is refused (and the other
    # way round): the two are signed in separate domains
    envelope = json.loads(text)
    as_state = json.dumps(
        {"signed_state": envelope["signed_standing"], "hmac_sha256": envelope["hmac_sha256"]}
    )
    from toolweave import ConversationState

    with pytest.raises(InvalidConversationStateError, match="signature does not match"):
        ConversationState.from_json(as_state, key=SECRET)
    assert issubclass(InvalidStandingDecisionsError, InvalidConversationStateError)


def test_signing_needs_a_conversation_and_refuses_function_limits() -> None:
    decision = StandingDecision(tool_name="search_web", decision="approve")
    with pytest.raises(ValueError, match="memory_id"):
        ToolService.sign_standing([decision], key=SECRET, memory_id=None)
    service = ToolService().tools(search_web)
    model = ScriptedChatModel([_search("cats", "s1"), AiMessage("ok")])
    paused = service.chat(model, None, "find cats", memory_id="conv-1")
    done = service.chat(
        model,
        None,
        paused.state,
        memory_id="conv-1",
        decisions={"s1": Approve(always=True, when=lambda a: a["query"].startswith("c"))},
    )
    (in_process,) = done.standing_decisions
    assert in_process.in_process
    with pytest.raises(TypeError, match="limited by a function"):
        ToolService.sign_standing(done.standing_decisions, key=SECRET, memory_id="conv-1")


@pytest.mark.parametrize("mode", MODES)
def test_a_function_limit_holds_in_process_across_turns_and_never_beyond(mode: str) -> None:
    service = ToolService().tools(search_web)
    model = ScriptedChatModel([_search("cats", "s1"), AiMessage("ok")])
    paused = run(mode, service, model, "find cats", memory_id="conv-1")
    done = run(
        mode,
        service,
        model,
        paused.state,
        memory_id="conv-1",
        decisions={"s1": Approve(always=True, when=lambda a: a["query"].startswith("c"))},
    )
    model = ScriptedChatModel(
        [ai_calls(call("search_web", '{"query": "cows"}', id="c2")), _search("dogs", "d2")]
    )
    history = [*done.messages, UserMessage("cows and dogs")]
    second = run(
        mode,
        service,
        model,
        history,
        memory_id="conv-1",
        standing_decisions=done.standing_decisions,
    )
    assert SEARCHED == ["cats", "cows"]  # cows within the limit; dogs asked for
    assert [p.id for p in second.pending] == ["d2"]


@pytest.mark.parametrize("mode", MODES)
def test_revoked_between_turns_it_no_longer_holds(mode: str) -> None:
    service = ToolService().tools(search_web)
    first = _turn_one(mode, service)
    (standing,) = first.standing_decisions
    kept = [s for s in first.standing_decisions if s.id != standing.id]
    text = ToolService.sign_standing(kept, key=SECRET, memory_id="conv-1")
    second, _ = _turn_two(
        mode,
        service,
        first,
        memory_id="conv-1",
        standing_decisions=ToolService.verify_standing(text, key=SECRET, memory_id="conv-1"),
    )
    assert second.status is ChatStatus.PENDING and SEARCHED == ["cats"]
    assert second.standing_decisions == ()


@pytest.mark.parametrize("mode", MODES)
def test_unverified_data_is_not_accepted_as_standing_decisions(mode: str) -> None:
    service = ToolService().tools(search_web)
    model = ScriptedChatModel([_search("cats", "s1"), AiMessage("ok")])
    data = [{"tool_name": "search_web", "decision": "approve"}]
    with pytest.raises(TypeError, match="StandingDecision"):
        run(mode, service, model, "hi", memory_id="c", standing_decisions=data)
    with pytest.raises(TypeError, match="verify_standing"):
        run(mode, service, model, "hi", memory_id="c", standing_decisions=json.dumps(data))
    assert SEARCHED == []


def test_a_resumed_state_carries_its_own_standing_decisions() -> None:
    service = ToolService().tools(search_web)
    model = ScriptedChatModel([_search("cats", "s1"), AiMessage("ok")])
    paused = service.chat(model, None, "find cats", memory_id="conv-1")
    extra = StandingDecision(tool_name="search_web", decision="approve")
    with pytest.raises(ValueError, match="carries"):
        service.chat(
            model,
            None,
            paused.state,
            decisions={"s1": Approve()},
            standing_decisions=[extra],
        )
    assert SEARCHED == []
