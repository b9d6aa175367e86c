"""Durable conversations and issue 30: a standing decision made with `toolweave runs approve
--always --when ...` is kept across a SIGKILLed worker, shown by `runs standing`, revoked by
`runs revoke`, and never applied to another conversation; a tool that pauses itself
(`NeedsApproval`) waits across a restart and runs again exactly once when approved."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest

from . import conftest
from .conftest import Workers
from .test_approvals import runs
from .test_kill import assert_valid_history

PAUSE_WORKER = Path(__file__).with_name("pause_worker.py")


@pytest.fixture(autouse=True)
def _pause_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers of these tests also serve the `desk` service (tests/durable/pause_worker.py)."""
    monkeypatch.setattr(conftest, "WORKER", PAUSE_WORKER)


def wait_for_call(client: Any, cid: str, call_id: str, timeout: float = 90.0) -> Any:
    """The waiting call `call_id` of `cid`, once the conversation waits for it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for _, call in client.pending(cid):
            if call.id == call_id:
                return call
        time.sleep(0.1)
    raise TimeoutError(f"conversation {cid} never waited for {call_id}: {client.pending(cid)}")


def ok(done: Any) -> dict[str, Any]:
    assert done.returncode == 0, done.stderr
    out: dict[str, Any] = json.loads(done.stdout) if done.stdout.strip() else {}
    return out


def test_a_standing_decision_survives_a_restart_and_stays_in_its_conversation(
    workers: Workers, client_factory: Any, db_url: str
) -> None:
    workers.start("w1")
    client = client_factory()
    client.submit("desk", "always-1", queue="tw-conversations", conversation_id="conv-always")
    client.submit("desk", "other-1", queue="tw-conversations", conversation_id="conv-other")
    wait_for_call(client, "conv-always", "p1")
    refused = runs("approve", "conv-always", "p1", "--when", '{"amount": 1}', db=db_url)
    assert refused.returncode == 2 and "--always" in refused.stderr  # a limit needs --always
    ok(
        runs(
            "approve",
            "conv-always",
            "p1",
            "--always",
            "--when",
            '{"amount": {"$max": 100}}',
            db=db_url,
        )
    )

    wait_for_call(client, "conv-always", "p3")  # p2 (20) ran without asking, p3 (500) waits
    listed = ok(runs("standing", "conv-always", "--json", db=db_url))
    (standing,) = listed  # type: ignore[misc]
    assert (standing["tool_name"], standing["decision"]) == ("pay", "approve")
    assert standing["when"] == {"amount": {"$max": 100}}
    shown = runs("show", "conv-always", db=db_url)
    assert shown.returncode == 0 and f"standing      {standing['id']}" in shown.stdout
    # the other conversation of the same service, tool and arguments is still asked
    wait_for_call(client, "conv-other", "p1")
    assert client.standing("conv-other") == []
    assert not workers.log.matching("pay other-1 ")

    workers.kill("w1")
    workers.start("w2", recover=["w1"])
    wait_for_call(client, "conv-always", "p3")
    ok(runs("approve", "conv-always", "p3", db=db_url))
    # after the restart the standing decision still holds: p4 (30) runs without asking
    wait_for_call(client, "conv-always", "p5")  # p5 (600) is beyond the pattern
    revoked = ok(runs("revoke", "conv-always", standing["id"], db=db_url))
    assert revoked["revoked"]["id"] == standing["id"]
    gone = runs("revoke", "conv-always", "nope", db=db_url)
    assert gone.returncode == 1 and "no standing decision" in gone.stderr
    ok(runs("approve", "conv-always", "p5", db=db_url))
    wait_for_call(client, "conv-always", "p6")  # revoked: p6 (40) is asked again
    ok(runs("deny", "conv-always", "p6", "--message", "enough", db=db_url))
    ok(runs("deny", "conv-other", "p1", db=db_url))

    result = client.result("conv-always", timeout=120)
    assert_valid_history(result.messages)
    paid = [line.split()[-1] for line in workers.log.matching("pay always-1 ")]
    assert paid == ["10", "20", "500", "30", "600"]  # each once, across both workers; 40 never
    assert result.text is not None and result.text.endswith("| enough")
    assert client.standing("conv-always") == []
    other = client.result("conv-other", timeout=120)
    assert not workers.log.matching("pay other-1 ") and other.text is not None


@pytest.mark.parametrize("tool_queue", [False, True], ids=["in-process-tools", "queued-tools"])
def test_a_tool_raised_pause_waits_across_a_restart_and_runs_again_once(
    workers: Workers, client_factory: Any, db_url: str, tool_queue: bool
) -> None:
    workers.start("w1", tool_queue=tool_queue)
    client = client_factory()
    client.submit("desk", "raise-1", queue="tw-conversations", conversation_id="conv-raise")
    call = wait_for_call(client, "conv-raise", "w1")
    assert (call.reason, call.raised, call.message) == ("approval", True, "a wire to Bob")
    assert call.metadata == {"to": "Bob"}
    assert workers.log.matching("wire-run raise-1 Bob ") == ["wire-run raise-1 Bob none"]
    listed = runs("pending", "conv-raise", db=db_url)  # the tool's reason, shown escaped
    assert listed.returncode == 0 and '"a wire to Bob"' in listed.stdout, listed.stderr

    workers.kill("w1")
    workers.start("w2", tool_queue=tool_queue, recover=["w1"])
    wait_for_call(client, "conv-raise", "w1")
    ok(runs("approve", "conv-raise", "w1", db=db_url))
    again = ok(runs("approve", "conv-raise", "w1", db=db_url))
    assert again.get("repeat") is True  # decided so already: nothing new is sent
    result = client.result("conv-raise", timeout=120)
    assert result.text == "raise-1 finished: wired to Bob"
    assert_valid_history(result.messages)
    # the first run once (its recorded pause replayed, not rerun), the second once
    assert workers.log.matching("wire-run raise-1 Bob ") == [
        "wire-run raise-1 Bob none",
        "wire-run raise-1 Bob approved",
    ]
