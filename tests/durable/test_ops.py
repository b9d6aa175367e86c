"""Operations through `toolweave runs` (the typer sub-app) and `ConversationClient`:
list, show (JSON status), cancel and resume, against real workers."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from typer.testing import CliRunner

from toolweave.cli.runs import runs_app

from .conftest import Workers
from .test_kill import assert_valid_history


def runs(db_url: str, *args: str) -> Any:
    result = CliRunner().invoke(runs_app, [*args, "--db", db_url, "--app", "twtest"])
    return result


def test_list_show_cancel_resume(workers: Workers, client_factory: Any, db_url: str) -> None:
    workers.start("w1", hang="model:1")
    client = client_factory()
    cid = "conv-ops"
    client.submit("shop", "kill-ops", queue="tw-conversations", conversation_id=cid)
    workers.log.wait_for("hang model:1 ")

    listed = runs(db_url, "list", "--json")
    assert listed.exit_code == 0, listed.output
    rows = json.loads(listed.output)
    assert [(r["conversation_id"], r["status"], r["service"]) for r in rows] == [
        (cid, "PENDING", "shop")
    ]

    shown = runs(db_url, "show", cid, "--json")
    assert shown.exit_code == 0, shown.output
    status = json.loads(shown.output)
    assert status["status"] == "PENDING" and status["executor_id"] == "w1"
    # the history so far: the question, turn 0 and both lookups answered
    assert [m["type"] for m in status["messages"]] == ["user", "ai", "tool_result", "tool_result"]
    names = [s["name"] for s in status["steps"]]
    assert names.count("model.chat") == 1 and names.count("tool:lookup") == 2

    cancelled = runs(db_url, "cancel", cid)
    assert cancelled.exit_code == 0, cancelled.output
    assert json.loads(cancelled.output)["status"] == "CANCELLED"
    workers.kill("w1")  # its model call is stuck; a cancelled conversation is not recovered
    workers.start("w2")
    assert client.show(cid, steps=False).status == "CANCELLED"

    resumed = runs(db_url, "resume", cid)
    assert resumed.exit_code == 0, resumed.output
    result = client.result(cid, timeout=120)
    assert result.text is not None and result.text.startswith("kill-ops finished: ")
    assert_valid_history(result.messages)
    model = Counter(line.split()[2] for line in workers.log.matching("model kill-ops "))
    assert model == Counter({"0": 1, "1": 2, "2": 1})  # only the unrecorded call again

    text = runs(db_url, "show", cid)
    assert text.exit_code == 0 and "SUCCESS" in text.output and "answer" in text.output
    assert "step" in text.output and "model.chat" in text.output
    assert runs(db_url, "list", "--status", "SUCCESS").output.count(cid) == 1
    assert cid not in runs(db_url, "list", "--status", "ERROR").output

    missing = runs(db_url, "show", "no-such-conversation")
    assert missing.exit_code == 1 and "no conversation" in missing.output
