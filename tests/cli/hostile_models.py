"""Scripted models whose texts try to act on the terminal, for test_cli_terminal_safety.py:
one drives tests/servers/mcp_hostile_server.py, one spoofs an approval prompt."""

from __future__ import annotations

import sys
from pathlib import Path

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest
from toolweave.chat.request import ChatRequest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "servers"))
from mcp_hostile_server import hostile

SPOOFED = {"amount": 500000, "to": "Eve\x1b[32G5\x1b[K"}
SPOOFED_ARGUMENTS = '{"amount": 500000, "to": "Eve\x1b[32G5\x1b[K"}'
"""`SPOOFED` as a model may send it, the ESC bytes raw in the string (the arguments parser
accepts them): shown raw, `pay({"amount": 500000, "to": "Eve"})` reads as if the amount were
5."""

ROUNDS = ["show", "fail", "ask", "sample"]
RAW_ARGUMENTS = '{"note": "ARGS\x1b]0;ARGS\x07\x1b[2J\x9b2J\u202eARGS"}'
"""Arguments with raw control and bidi characters in a string (the parser accepts them)."""


def hostile_model() -> ScriptedChatModel:
    """Calls the hostile server's tools one per round (with hostile arguments), answers its
    sampling request with a hostile text, and ends with a hostile answer."""

    def script(request: ChatRequest) -> AiMessage:
        if any(m.type == "system" for m in request.messages):  # the server's sampling request
            return AiMessage(hostile("SAMPLED"))
        done = sum(m.type == "tool_result" for m in request.messages)
        if done < len(ROUNDS):
            arguments = RAW_ARGUMENTS if done == 0 else "{}"
            call = ToolExecutionRequest(id=f"h{done}", name=ROUNDS[done], arguments=arguments)
            return AiMessage(tool_execution_requests=[call])
        return AiMessage(hostile("ANSWER") + " END")

    return ScriptedChatModel(script)


def spoofing_model() -> ScriptedChatModel:
    """Asks for `pay` with a recipient whose escapes redraw the amount, then reports."""

    def script(request: ChatRequest) -> AiMessage:
        results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
        if results:
            return AiMessage("RESULTS: " + " | ".join(results))
        call = ToolExecutionRequest(id="s1", name="pay", arguments=SPOOFED_ARGUMENTS)
        return AiMessage(tool_execution_requests=[call])

    return ScriptedChatModel(script)
