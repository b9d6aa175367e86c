"""Durable conversations whose tools come from toolsets: a toolset tool's call is recorded
like a registered tool's, so a call that completed before a SIGKILL is never run again
after recovery, and an interrupted non-idempotent one is reported, not repeated.

The "kit" service of tests/durable/worker.py offers `lookup` (a `FunctionToolset`) and
`charge` (a `FunctionToolset(...).wrapped(...).filtered(...)`, offered from round 1 on)
through toolsets; the script is the `kill-*` one of test_kill.py. The toolsets' per-step
answers are not recorded: the recovering worker asks them again for each replayed step
(and, with queued tools, the worker running a call asks them for its step), which holds
because they depend on the `StepContext` alone.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from toolweave.chat.messages import ToolExecutionResultMessage

from .conftest import Workers
from .test_kill import UNKNOWN, assert_valid_history, counts


def _run(workers: Workers, client_factory: Any, tag: str, hang: str, tool_queue: bool) -> Any:
    workers.start("w1", tool_queue=tool_queue, hang=hang)  # makes the database
    client = client_factory()
    assert client.submit("kit", tag, queue="tw-conversations", conversation_id=tag) == tag
    workers.log.wait_for(f"hang {hang} ")
    workers.kill("w1")
    assert client.show(tag, steps=False).status == "PENDING"
    workers.start("w2", tool_queue=tool_queue, recover=["w1"])
    result = client.result(tag, timeout=120)
    assert result.text is not None and result.text.startswith(f"{tag} finished: ")
    assert_valid_history(result.messages)
    return result


@pytest.mark.parametrize("tool_queue", [False, True], ids=["in-process-tools", "queued-tools"])
def test_a_toolset_tool_that_completed_before_a_sigkill_is_not_run_again(
    workers: Workers, client_factory: Any, tool_queue: bool
) -> None:
    # killed in the second model call: both lookups of the first round (toolset tools)
    # completed and were recorded; the recovered conversation replays them
    tag = "kill-toolset-model"
    _run(workers, client_factory, tag, "model:1", tool_queue)
    model, lookups, charges = counts(workers, tag)
    assert model == Counter({"0": 1, "1": 2, "2": 1})
    assert lookups == Counter({"a": 1, "b": 1, "c": 1})
    assert charges == 1
    # the wrapped set's wrapper ran inside the recorded step: once per call too
    assert workers.log.matching("wrapped ") == ["wrapped t1charge"]


def test_an_interrupted_non_idempotent_toolset_call_is_reported_not_run_again(
    workers: Workers, client_factory: Any
) -> None:
    tag = "kill-toolset-charge"
    result = _run(workers, client_factory, tag, "charge", False)
    _, lookups, charges = counts(workers, tag)
    # lookup c ran beside the charge: it may have been recorded before the kill, or not
    assert charges == 1 and lookups["a"] == lookups["b"] == 1 and lookups["c"] in (1, 2)
    assert workers.log.matching("wrapped ") == ["wrapped t1charge"]
    charge = next(
        m
        for m in result.messages
        if isinstance(m, ToolExecutionResultMessage) and m.id == "t1charge"
    )
    assert charge.is_error and charge.text.startswith(UNKNOWN), charge.text
    assert len(workers.log.matching("unknown ")) == 1
