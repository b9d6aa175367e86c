"""Kill tests: a worker is SIGKILLed in the middle of a model call, an idempotent tool call
or a non-idempotent tool call; a second worker recovers the conversation.

The scripted conversation (tests/durable/worker.py): turn 0 asks for lookup a and lookup b
(idempotent, in parallel), turn 1 for charge (not idempotent) and lookup c, turn 2
answers. Every model call and tool run is logged by the workers, across processes.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from toolweave.chat.messages import AiMessage, ToolExecutionResultMessage

from .conftest import Workers

UNKNOWN = "The outcome of this call to 'charge' is unknown"


def assert_valid_history(messages: list[Any]) -> None:
    """Every tool call id is answered exactly once, right after its AI message, in order."""
    i = 0
    while i < len(messages):
        m = messages[i]
        i += 1
        if isinstance(m, AiMessage) and m.tool_execution_requests:
            ids = [c.id for c in m.tool_execution_requests]
            answers = messages[i : i + len(ids)]
            assert all(isinstance(a, ToolExecutionResultMessage) for a in answers), messages
            assert [a.id for a in answers] == ids
            i += len(ids)
        else:
            assert not isinstance(m, ToolExecutionResultMessage), f"stray result: {m}"


def counts(workers: Workers, tag: str) -> tuple[Counter[str], Counter[str], int]:
    lines = workers.log.lines()
    model = Counter(line.split()[2] for line in lines if line.startswith(f"model {tag} "))
    lookups = Counter(line.split()[2] for line in lines if line.startswith(f"lookup {tag} "))
    charges = sum(1 for line in lines if line.startswith(f"charge {tag} "))
    return model, lookups, charges


SCENARIOS = {
    # hang point, service, model turn repeated
    "model": ("model:1", "shop", "1"),
    "idempotent-tool": ("lookup:a", "shop", None),
    "non-idempotent-tool": ("charge", "shop", None),
    "non-idempotent-reconciled": ("charge", "reconciling", None),
}


@pytest.mark.parametrize("tool_queue", [False, True], ids=["in-process-tools", "queued-tools"])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_sigkill_then_recovery(
    workers: Workers, client_factory: Any, scenario: str, tool_queue: bool
) -> None:
    hang, service, repeated_turn = SCENARIOS[scenario]
    tag = f"kill-{scenario}"
    cid = f"conv-{scenario}"
    workers.start("w1", tool_queue=tool_queue, hang=hang)
    client = client_factory()
    assert client.submit(service, tag, queue="tw-conversations", conversation_id=cid) == cid
    workers.log.wait_for(f"hang {hang} ")
    workers.kill("w1")
    assert client.show(cid, steps=False).status == "PENDING"

    workers.start("w2", tool_queue=tool_queue, recover=["w1"])
    result = client.result(cid, timeout=120)

    assert result.text is not None and result.text.startswith(f"{tag} finished: ")
    assert_valid_history(result.messages)
    model, lookups, charges = counts(workers, tag)
    # no model call is repeated once its result was recorded; the interrupted one ran again
    assert model == Counter({"0": 1, "1": 2 if repeated_turn == "1" else 1, "2": 1})
    # idempotent: at most twice; the interrupted one exactly twice
    assert set(lookups) == {"a", "b", "c"} and max(lookups.values()) <= 2
    if scenario == "idempotent-tool":
        assert lookups["a"] == 2
    # not idempotent: exactly once, whatever happened
    assert charges == 1
    charge = next(
        m
        for m in result.messages
        if isinstance(m, ToolExecutionResultMessage) and m.id == "t1charge"
    )
    unknown_lines = workers.log.matching("unknown ")
    if scenario == "non-idempotent-tool":
        assert charge.is_error and charge.text.startswith(UNKNOWN), charge.text
        assert "by worker w1" in charge.text
        assert len(unknown_lines) == 1 and "t1charge w1" in unknown_lines[0]
        assert client.show(cid, steps=False).unknown_outcomes == ["t1charge"]
    elif scenario == "non-idempotent-reconciled":
        assert not charge.is_error
        assert charge.text == "charged 42 (confirmed by reconciliation)"
        assert unknown_lines == [] and len(workers.log.matching("reconcile t1charge")) == 1
    else:
        assert not charge.is_error and charge.text == "charged 42"
        assert unknown_lines == []

    # the same id again returns the same result and runs nothing
    before = len(workers.log.lines())
    assert client.submit(service, "ignored", queue="tw-conversations", conversation_id=cid) == cid
    again = client.result(cid, timeout=30)
    assert again.messages == result.messages
    assert len(workers.log.lines()) == before
