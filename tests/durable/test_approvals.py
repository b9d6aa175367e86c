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
from toolweave.errors import ToolweaveError

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
    missing = runs("approve", cid, "p1", db=db_url)
    assert missing.returncode == 1 and "no call 'p1' waiting" in missing.stderr
