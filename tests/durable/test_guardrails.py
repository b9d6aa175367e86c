"""Guardrails in durable conversations (docs/policies.md, "Guardrails"): a call's guardrails
run inside its recorded step, so after a SIGKILL the recovered conversation replays their
verdicts (a rejection, a replaced result) without asking them, or running the tool, again.

The "guarded" service of tests/durable/worker.py runs the `kill-*` script of test_kill.py
with two service guardrails: an input one rejecting `lookup` of key b, an output one
upper-casing every result; both log each time they run.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from toolweave.chat.messages import ToolExecutionResultMessage

from .conftest import Workers
from .test_kill import assert_valid_history, counts


@pytest.mark.parametrize("tool_queue", [False, True], ids=["in-process-tools", "queued-tools"])
def test_a_guardrail_decision_survives_a_sigkill_without_running_again(
    workers: Workers, client_factory: Any, tool_queue: bool
) -> None:
    tag = "guard-kill"
    workers.start("w1", tool_queue=tool_queue, hang="model:1")
    client = client_factory()
    assert client.submit("guarded", tag, queue="tw-conversations", conversation_id=tag) == tag
    # killed in the second model call: the first round (lookup a allowed and shouted,
    # lookup b rejected) was decided and recorded
    workers.log.wait_for("hang model:1 ")
    workers.kill("w1")
    assert client.show(tag, steps=False).status == "PENDING"
    workers.start("w2", tool_queue=tool_queue, recover=["w1"])
    result = client.result(tag, timeout=120)

    assert_valid_history(result.messages)
    answers = {m.id: m for m in result.messages if isinstance(m, ToolExecutionResultMessage)}
    assert answers["t0a"].text == "VALUE-OF-A" and not answers["t0a"].is_error
    assert answers["t0b"].text == "key b is off limits" and answers["t0b"].is_error
    assert answers["t1charge"].text == "CHARGED 42"
    assert answers["t1c"].text == "VALUE-OF-C"
    assert (
        result.text == f"{tag} finished: VALUE-OF-A | key b is off limits | CHARGED 42 | VALUE-OF-C"
    )

    model, lookups, charges = counts(workers, tag)
    assert model == Counter({"0": 1, "1": 2, "2": 1})  # only the interrupted call ran again
    assert lookups == Counter({"a": 1, "c": 1}) and charges == 1  # b was never run
    # each verdict was taken once, across both workers
    guarded_in = Counter(line.split()[2] for line in workers.log.matching(f"guard-in {tag} "))
    assert guarded_in == Counter({"t0a": 1, "t0b": 1, "t1charge": 1, "t1c": 1})
    guarded_out = Counter(line.split()[1] for line in workers.log.matching("guard-out "))
    assert guarded_out == Counter({"t0a": 1, "t1charge": 1, "t1c": 1})


def test_a_halt_is_recorded_and_the_history_stays_valid(
    workers: Workers, client_factory: Any
) -> None:
    from toolweave.durable import ConversationFailedError

    tag = "guard-halt"
    workers.start("w1")
    client = client_factory()
    assert client.submit("guarded", tag, queue="tw-conversations", conversation_id=tag) == tag
    with pytest.raises(ConversationFailedError) as info:
        client.result(tag, timeout=120)
    error = info.value
    assert error.error_type == "GuardrailHalted"
    assert "'_off_limits'" in error.error_message and "key c is classified" in error.error_message
    partial = error.partial_result
    assert partial is not None
    assert_valid_history(partial.messages)
    answers = {m.id: m for m in partial.messages if isinstance(m, ToolExecutionResultMessage)}
    assert answers["t1c"].is_error and "_off_limits" in answers["t1c"].text
    assert answers["t1charge"].text == "CHARGED 42"  # its sibling ran to the end
    _, lookups, _ = counts(workers, tag)
    assert lookups == Counter({"a": 1})  # c never ran
    # the same id again: the recorded failure; no guardrail, tool or model runs
    before = len(workers.log.lines())
    assert client.submit("guarded", tag, queue="tw-conversations", conversation_id=tag) == tag
    with pytest.raises(ConversationFailedError):
        client.result(tag, timeout=30)
    assert len(workers.log.lines()) == before
