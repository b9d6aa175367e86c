"""Usage budgets and hooks in durable conversations: a worker is SIGKILLed after the first
round of the `kill-*` script (two lookups) was recorded; the recovered conversation recounts
the budget from the replayed steps, so the second round (charge, lookup c: four calls where
`UsageLimits(tool_calls=3)` allows three) is refused without a completed step running
again. The `budget` service answers once (`on_exceeded="answer"`), `budget-strict` fails
with `UsageLimitExceeded`. Their around-tool-call hook runs inside each call's step: once
per call, across both workers (tests/durable/worker.py)."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from toolweave.chat.messages import ToolExecutionResultMessage, UserMessage

from .conftest import Workers
from .test_kill import assert_valid_history, counts


def _killed_after_the_first_round(
    workers: Workers, client_factory: Any, service: str, tag: str, tool_queue: bool
) -> Any:
    workers.start("w1", tool_queue=tool_queue, hang="model:1")
    client = client_factory()
    assert client.submit(service, tag, queue="tw-conversations", conversation_id=tag) == tag
    workers.log.wait_for("hang model:1 ")
    workers.kill("w1")
    assert client.show(tag, steps=False).status == "PENDING"
    workers.start("w2", tool_queue=tool_queue, recover=["w1"])
    return client


def _nothing_ran_twice(workers: Workers, tag: str, model_calls: dict[str, int]) -> None:
    model, lookups, charges = counts(workers, tag)
    assert model == Counter(model_calls)  # the interrupted model call ran again; no other
    assert lookups == Counter({"a": 1, "b": 1}) and charges == 0  # the refused round never ran
    hooked = Counter(line.split()[1] for line in workers.log.matching("hooked "))
    assert hooked == Counter({"t0a": 1, "t0b": 1})  # inside the recorded steps: once each


@pytest.mark.parametrize("tool_queue", [False, True], ids=["in-process-tools", "queued-tools"])
def test_a_budget_survives_a_sigkill_and_the_model_answers_once(
    workers: Workers, client_factory: Any, tool_queue: bool
) -> None:
    tag = "kill-budget"
    client = _killed_after_the_first_round(workers, client_factory, "budget", tag, tool_queue)
    result = client.result(tag, timeout=120)

    assert_valid_history(result.messages)
    answers = {m.id: m for m in result.messages if isinstance(m, ToolExecutionResultMessage)}
    assert answers["t0a"].text == "value-of-a" and answers["t0b"].text == "value-of-b"
    for refused in ("t1charge", "t1c"):
        assert answers[refused].is_error and "not run" in answers[refused].text
        assert "UsageLimits.tool_calls=3" in answers[refused].text
    note = [m for m in result.messages if isinstance(m, UserMessage)][-1]
    assert "budget" in (note.text or "")
    assert result.text is not None and result.text.startswith(f"{tag} finished: value-of-a")
    _nothing_ran_twice(workers, tag, {"0": 1, "1": 2, "2": 1})  # "2": the one answer


def test_a_budget_exceeded_after_a_sigkill_fails_with_a_valid_history(
    workers: Workers, client_factory: Any
) -> None:
    from toolweave.durable import ConversationFailedError

    tag = "kill-budget-strict"
    client = _killed_after_the_first_round(workers, client_factory, "budget-strict", tag, False)
    with pytest.raises(ConversationFailedError) as info:
        client.result(tag, timeout=120)

    error = info.value
    assert error.error_type == "UsageLimitExceeded"
    assert "UsageLimits.tool_calls=3" in error.error_message
    partial = error.partial_result
    assert partial is not None
    assert_valid_history(partial.messages)
    answers = {m.id: m for m in partial.messages if isinstance(m, ToolExecutionResultMessage)}
    assert answers["t0a"].text == "value-of-a" and not answers["t0a"].is_error
    assert answers["t1charge"].is_error and answers["t1c"].is_error
    _nothing_ran_twice(workers, tag, {"0": 1, "1": 2})  # no request after the refusal
