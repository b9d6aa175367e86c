"""A durable conversation waiting for approval survives its worker: it is paused at a call
that needs approval, the worker is SIGKILLed, a new worker recovers it, and
`toolweave runs approve` (the real command) lets it go on. The call runs exactly once."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from toolweave.chat.messages import ToolExecutionResultMessage
from toolweave.durable import DecisionConflictError
from toolweave.errors import ToolArgumentsError, ToolweaveError
from toolweave.service.approvals import (
    Approve,
    DeferredResult,
    Deny,
    InvalidConversationStateError,
)

from .conftest import REPO, Workers
from .test_kill import assert_valid_history


def wait_pending(client: Any, cid: str, timeout: float = 90.0) -> list[Any]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        waiting = client.pending(cid)
        if waiting:
            return waiting
        time.sleep(0.1)
    raise TimeoutError(f"conversation {cid} never waited for a decision")


def runs(*args: str, db: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "toolweave", "runs", *args, "--db", db, "--app", "twtest"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


@pytest.mark.parametrize("tool_queue", [False, True], ids=["in-process-tools", "queued-tools"])
def test_waiting_for_approval_survives_a_killed_worker(
    workers: Workers, client_factory: Any, db_url: str, tool_queue: bool
) -> None:
    tag = "approve-kill"
    cid = "conv-approve"
    workers.start("w1", tool_queue=tool_queue)
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    ((waiting_cid, call),) = wait_pending(client, cid)
    assert (waiting_cid, call.id, call.tool_name, call.reason) == (cid, "p1", "pay", "approval")
    assert workers.log.matching(f"lookup {tag} ") and not workers.log.matching(f"pay {tag} ")

    listed = runs("pending", "--json", db=db_url)
    assert listed.returncode == 0, listed.stderr
    assert [(c["conversation_id"], c["id"]) for c in json.loads(listed.stdout)] == [(cid, "p1")]

    workers.kill("w1")
    workers.start("w2", tool_queue=tool_queue, recover=["w1"])
    wait_pending(client, cid)
    with pytest.raises(ToolweaveError, match="no call 'nope' waiting"):
        client.decide(cid, "nope", object())
    approved = runs("approve", cid, "p1", db=db_url)
    assert approved.returncode == 0, approved.stderr
    result = client.result(cid, timeout=120)

    assert result.text == f"{tag} finished: value-of-balance | paid 30 to Bob"
    assert_valid_history(result.messages)
    assert len(workers.log.matching(f"pay {tag} ")) == 1  # exactly once, across both workers
    assert len(workers.log.matching(f"lookup {tag} ")) == 1
    assert client.pending(cid) == []
    pay = next(
        m for m in result.messages if isinstance(m, ToolExecutionResultMessage) and m.id == "p1"
    )
    assert not pay.is_error


def test_deny_from_the_command_line(workers: Workers, client_factory: Any, db_url: str) -> None:
    tag = "approve-deny"
    cid = "conv-deny"
    workers.start("w1")
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    wait_pending(client, cid)
    denied = runs("deny", cid, "p1", "--message", "Bob is not a payee.", db=db_url)
    assert denied.returncode == 0, denied.stderr
    result = client.result(cid, timeout=120)
    assert result.text == f"{tag} finished: value-of-balance | Bob is not a payee."
    assert workers.log.matching(f"pay {tag} ") == []
    late = runs("approve", cid, "p1", db=db_url)  # the call was denied: refused, not dropped
    assert late.returncode == 1, late.stdout
    assert "already decided by toolweave runs deny" in late.stderr
    assert "denied ('Bob is not a payee.')" in late.stderr
    missing = runs("approve", cid, "nope", db=db_url)
    assert missing.returncode == 1 and "no call 'nope' waiting" in missing.stderr


def test_first_decision_wins_while_the_worker_is_dead(
    workers: Workers, client_factory: Any, db_url: str
) -> None:
    """approve, then deny, while no worker runs the conversation: the deny is refused (it
    used to exit 0 and be dropped, the approval's message holding its idempotency key); the
    same approval again is a no-op; the recovered conversation pays once."""
    tag = "approve-first-wins"
    cid = "conv-first-wins"
    workers.start("w1")
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    wait_pending(client, cid)
    workers.kill("w1")

    approved = runs("approve", cid, "p1", db=db_url)
    assert approved.returncode == 0, approved.stderr
    assert json.loads(approved.stdout) == {
        "conversation_id": cid, "call_id": "p1", "decision": "approve"
    }  # fmt: skip
    denied = runs("deny", cid, "p1", db=db_url)
    assert denied.returncode == 1, denied.stdout
    assert denied.stdout == ""
    assert "'p1' of conversation 'conv-first-wins' was already decided by toolweave runs " \
        "approve" in denied.stderr  # fmt: skip
    assert ": approved; the first decision stands" in denied.stderr
    with pytest.raises(DecisionConflictError) as info:
        client.decide(cid, "p1", Deny("no"))
    assert isinstance(info.value.decided, Approve) and info.value.decided_at
    assert info.value.decided_by and info.value.decided_by.startswith("toolweave runs approve")
    again = runs("approve", cid, "p1", db=db_url)
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["repeat"] is True
    assert client.decide(cid, "p1", Approve()) is False
    with pytest.raises(DecisionConflictError):  # other arguments are another decision
        client.decide(cid, "p1", Approve({"tag": tag, "to": "Eve", "amount": 1}))

    workers.start("w2", recover=["w1"])
    result = client.result(cid, timeout=120)
    assert result.text == f"{tag} finished: value-of-balance | paid 30 to Bob"
    assert len(workers.log.matching(f"pay {tag} ")) == 1
    late = runs("deny", cid, "p1", db=db_url)  # finished: still refused, with what was decided
    assert late.returncode == 1 and "already decided" in late.stderr
    assert runs("approve", cid, "p1", db=db_url).returncode == 0  # the same again: a no-op


def test_two_commands_at_once_exactly_one_wins(
    workers: Workers, client_factory: Any, db_url: str
) -> None:
    """`runs approve` and `runs deny` started together, in separate processes, while no
    worker consumes either (both see the call waiting): exactly one succeeds, the other is
    refused, and the recovered conversation follows the one that won."""
    tag = "approve-race"
    cid = "conv-race"
    workers.start("w1")
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    wait_pending(client, cid)
    workers.kill("w1")
    base = [sys.executable, "-m", "toolweave", "runs"]
    tail = ["--db", db_url, "--app", "twtest"]
    procs = {
        kind: subprocess.Popen(
            [*base, kind, cid, "p1", *tail],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
        )
        for kind in ("approve", "deny")
    }
    outcomes = {kind: (p.wait(timeout=120), *p.communicate()) for kind, p in procs.items()}
    winners = [kind for kind, (rc, _, _) in outcomes.items() if rc == 0]
    assert len(winners) == 1, outcomes
    (loser,) = set(outcomes) - set(winners)
    assert outcomes[loser][0] == 1 and "already decided" in outcomes[loser][2], outcomes
    workers.start("w2", recover=["w1"])
    result = client.result(cid, timeout=120)
    paid = workers.log.matching(f"pay {tag} ")
    if winners == ["approve"]:
        assert (
            len(paid) == 1 and result.text == f"{tag} finished: value-of-balance | paid 30 to Bob"
        )
    else:
        assert paid == [] and result.text is not None and "did not approve" in result.text


def test_decisions_that_do_not_fit_are_refused_before_anything_is_recorded(
    workers: Workers, client_factory: Any, db_url: str
) -> None:
    """A DeferredResult for an approval call, and arguments that are not a JSON object (the
    API and `--arguments '[1, 2]'`), are refused; the call can still be decided."""
    tag = "approve-misfit"
    cid = "conv-misfit"
    workers.start("w1")
    client = client_factory()
    client.submit("bank", tag, queue="tw-conversations", conversation_id=cid)
    wait_pending(client, cid)
    with pytest.raises(InvalidConversationStateError, match="waits for approval"):
        client.decide(cid, "p1", DeferredResult("paid"))
    with pytest.raises(ToolArgumentsError, match="must be a JSON object, not a list"):
        client.decide(cid, "p1", Approve("[1, 2]"))
    with pytest.raises(ToolArgumentsError, match="is not JSON"):
        client.decide(cid, "p1", Approve("{nope"))
    with pytest.raises(TypeError, match="give a dict or JSON text"):
        client.decide(cid, "p1", Approve([1, 2]))  # type: ignore[arg-type]
    listed = runs("approve", cid, "p1", "--arguments", "[1, 2]", db=db_url)
    assert listed.returncode == 2 and "must be a JSON object, not a list" in listed.stderr
    assert [c.id for _, c in client.pending(cid)] == ["p1"]
    denied = runs("deny", cid, "p1", "--message", "not today", db=db_url)
    assert denied.returncode == 0, denied.stderr
    result = client.result(cid, timeout=120)
    assert result.text == f"{tag} finished: value-of-balance | not today"
    assert workers.log.matching(f"pay {tag} ") == []
