"""A conversation as a tool in a durable conversation: the helper's own conversation waits
for approval, so the durable conversation waits, publishing the helper's call (with its
path); the worker is SIGKILLed, a new worker recovers it, and the decision for the nested
call lets it go on. The nested call runs exactly once."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave.chat.messages import ToolExecutionResultMessage
from toolweave.service.approvals import Approve
from toolweave.service.subagent import NestedPendingCall

from .conftest import Workers
from .test_approvals import wait_pending
from .test_kill import assert_valid_history


@pytest.mark.parametrize("tool_queue", [False, True], ids=["in-process-tools", "queued-tools"])
def test_a_nested_pause_in_a_durable_conversation_resumes_after_a_worker_restart(
    workers: Workers, client_factory: Any, tool_queue: bool
) -> None:
    tag = "nest-kill"
    cid = "conv-nest"
    workers.start("w1", tool_queue=tool_queue)
    client = client_factory()
    client.submit("nest", tag, queue="tw-conversations", conversation_id=cid)
    ((waiting_cid, call),) = wait_pending(client, cid)
    # the call a person decides: the helper's, not the helper's own call
    assert (waiting_cid, call.id, call.tool_name, call.reason) == (cid, "p1", "pay", "approval")
    assert call.arguments_as_dict() == {"tag": f"inner-{tag}", "to": "Ann", "amount": 7}
    assert isinstance(call, NestedPendingCall)
    assert (call.path, call.tool_names, call.key) == (("h1",), ("helper",), "h1/p1")
    assert not workers.log.matching(f"pay inner-{tag} ")

    workers.kill("w1")
    workers.start("w2", tool_queue=tool_queue, recover=["w1"])
    ((_, again),) = wait_pending(client, cid)
    assert again.id == "p1"
    client.decide(cid, "p1", Approve())
    result = client.result(cid, timeout=120)

    assert result.text == f"{tag} finished: inner-{tag} done: paid 7 to Ann"
    assert_valid_history(result.messages)
    assert len(workers.log.matching(f"pay inner-{tag} ")) == 1  # once, across both workers
    # each model turn was asked once: the pause was recorded, the restart replayed it
    assert len(workers.log.matching(f"model {tag} 0")) == 1
    assert len(workers.log.matching(f"model inner-{tag} 0")) == 1
    assert len(workers.log.matching(f"model inner-{tag} 1")) == 1
    assert client.pending(cid) == []
    (answer,) = [m for m in result.messages if isinstance(m, ToolExecutionResultMessage)]
    assert (answer.id, answer.text) == ("h1", f"inner-{tag} done: paid 7 to Ann")
