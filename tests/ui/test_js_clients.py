"""toolweave's endpoints consumed by the real JavaScript clients, on loopback: the AI SDK's
chat (`AbstractChat` with `DefaultChatTransport`, the code `useChat` runs) and
`@ag-ui/client`'s `HttpAgent`, each through a pause for approval answered in its protocol."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

from tests.mcp.npm_support import npm_install
from tests.servers.http_app import serve

from .scenario import app

AI = "ai@7.0.173"
AG_UI = "@ag-ui/client@1.0.0"
JS = Path(__file__).resolve().parent / "js"


def _node(script: str, *args: str) -> dict[str, Any]:
    npm_install(AG_UI, AI)
    # both packages live in one node_modules: the scripts go next to it
    path = _beside(JS / script)
    node = shutil.which("node")
    assert node is not None
    proc = subprocess.run(
        [node, str(path), *args], capture_output=True, text=True, timeout=120, check=False
    )
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _beside(source: Path) -> Path:
    modules = npm_install(AG_UI, AI)
    target = modules.parent / source.name
    if not target.exists() or target.read_bytes() != source.read_bytes():
        tmp = target.with_suffix(".tmp")
        tmp.write_bytes(source.read_bytes())
        tmp.replace(target)
    return target


def _tool_part(message: dict[str, Any], name: str) -> dict[str, Any]:
    return next(p for p in message["parts"] if p["type"] == f"tool-{name}")


def test_the_ai_sdk_chat_runs_a_conversation_through_an_approval() -> None:
    with serve(app()) as base:
        out = _node("ai_sdk_chat.mjs", f"{base}/api/chat", "approve")
    assert out["errors"] == [] and out["status"] == "ready"
    user, assistant = out["paused"]
    assert user["parts"] == [{"type": "text", "text": "Weather in Paris, then pay Ann 5"}]
    weather = _tool_part(assistant, "get_weather")
    assert weather["state"] == "output-available"
    assert weather["input"] == {"city": "Paris"} and weather["output"] == "Paris: sunny, 21 C"
    pay = _tool_part(assistant, "send_money")
    assert pay["state"] == "approval-requested" and pay["approval"]["id"] == "p1"
    assert any(p["type"] == "data-toolweave-state" for p in assistant["parts"])

    # the approval continued the same assistant message: the payment ran, the model answered
    assert len(out["messages"]) == 2
    final = out["messages"][-1]
    assert final["id"] == assistant["id"]
    pay = _tool_part(final, "send_money")
    assert pay["state"] == "output-available" and pay["output"] == "sent 5 to Ann"
    texts = [p["text"] for p in final["parts"] if p["type"] == "text"]
    assert texts == [
        "Let me look.",
        "Paris is sunny. Now the payment.",
        "Done: sunny in Paris, and the payment went through.",
    ]
    steps = [p["type"] for p in final["parts"] if p["type"] == "step-start"]
    assert len(steps) == 3


def test_the_ai_sdk_chat_denies_a_call() -> None:
    with serve(app()) as base:
        out = _node("ai_sdk_chat.mjs", f"{base}/api/chat", "deny")
    assert out["errors"] == []
    final = out["messages"][-1]
    assert _tool_part(final, "send_money")["state"] == "output-denied"
    assert [p["text"] for p in final["parts"] if p["type"] == "text"][-1].startswith("Done")


def test_the_ag_ui_http_agent_runs_a_conversation_through_an_interrupt() -> None:
    with serve(app()) as base:
        out = _node("ag_ui_agent.mjs", f"{base}/api/ag-ui", "approve")
    assert out["interrupts"] == [{"id": "p1", "reason": "tool_approval", "toolCallId": "p1"}]
    assert "outcome:interrupt" in out["events"] and out["pendingAfter"] == []
    roles = [(m["role"], m.get("toolCallId")) for m in out["messages"]]
    assert roles[0] == ("user", None)
    tools = {m["toolCallId"]: m["content"] for m in out["messages"] if m["role"] == "tool"}
    assert tools == {"w1": "Paris: sunny, 21 C", "p1": "sent 5 to Ann"}
    calls = [
        c["function"]
        for m in out["messages"]
        if m["role"] == "assistant"
        for c in m.get("toolCalls") or []
    ]
    assert [c["name"] for c in calls] == ["get_weather", "send_money"]
    assert json.loads(calls[1]["arguments"]) == {"to": "Ann", "amount": 5}
    said = [m["content"] for m in out["messages"] if m["role"] == "assistant" and m.get("content")]
    assert said[-1] == "Done: sunny in Paris, and the payment went through."
    assert "toolweave" not in out["state"]  # the paused conversation is gone once resumed


def test_the_ag_ui_http_agent_denies_a_call() -> None:
    with serve(app()) as base:
        out = _node("ag_ui_agent.mjs", f"{base}/api/ag-ui", "deny")
    tools = {m["toolCallId"]: m["content"] for m in out["messages"] if m["role"] == "tool"}
    assert tools["p1"] == "Ann is not a known payee."
