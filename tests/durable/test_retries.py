"""A transient-failure retry decided in a durable conversation survives a worker restart:
the call's step retried inside itself and recorded one outcome, so after a SIGKILL the
recovering worker replays it and runs the tool no more (tests/durable/worker.py, `flaky-*`:
fetch fails twice with a connection error, then succeeds; the worker hangs in the next
model call and is killed); a ModelRetry of the same round replays as the same retry prompt."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from toolweave.chat.messages import ToolExecutionResultMessage

from .conftest import Workers
from .test_kill import assert_valid_history


@pytest.mark.parametrize("tool_queue", [False, True], ids=["in-process-tools", "queued-tools"])
def test_a_retried_call_is_not_run_again_after_a_restart(
    workers: Workers, client_factory: Any, tool_queue: bool
) -> None:
    tag, cid = "flaky-restart", "conv-flaky"
    workers.start("w1", tool_queue=tool_queue, hang="model:1")
    client = client_factory()
    client.submit("flaky", tag, queue="tw-conversations", conversation_id=cid)
    workers.log.wait_for("hang model:1 ")
    # the retry happened before the kill: two failed attempts, then the success
    assert [line.split()[-1] for line in workers.log.matching(f"fetch {tag} ")] == ["1", "2", "3"]
    workers.kill("w1")

    workers.start("w2", tool_queue=tool_queue, recover=["w1"])
    result = client.result(cid, timeout=120)
    picked = "1 is odd: pick an even number"
    assert result.text == f"{tag} finished: fetched k on attempt 3 | {picked} | value-of-z"
    assert_valid_history(result.messages)
    # the completed step was replayed, not run: still three attempts in all
    assert len(workers.log.matching(f"fetch {tag} ")) == 3
    model = Counter(
        line.split()[2] for line in workers.log.lines() if line.startswith(f"model {tag} ")
    )
    assert model == Counter({"0": 1, "1": 2, "2": 1})
    fetched = next(
        m for m in result.messages if isinstance(m, ToolExecutionResultMessage) and m.id == "f0"
    )
    assert not fetched.is_error
    assert fetched.attributes["toolweave.attempts"] == 3
    # a ModelRetry is recorded like a failure and replayed as the same retry prompt
    asked = next(
        m for m in result.messages if isinstance(m, ToolExecutionResultMessage) and m.id == "p0"
    )
    assert asked.is_error and asked.text == picked
    assert asked.attributes["toolweave.model_retry"] == 1
    assert len(workers.log.matching(f"pick {tag} ")) == 1
