"""`toolweave chat`'s approval prompt offers standing answers: "always" and "never" answer
the tool's later calls for the rest of the session, other tools are still asked."""

from __future__ import annotations

import io
from collections.abc import Iterator

from rich.console import Console

from toolweave import Approve, Deny
from toolweave.cli._approve import ask_decisions
from toolweave.service.approvals import PendingCall


def _call(call_id: str, tool: str, arguments: str = "{}", **extra: object) -> PendingCall:
    return PendingCall(id=call_id, tool_name=tool, arguments=arguments, reason="approval", **extra)  # type: ignore[arg-type]


def _answers(*lines: str) -> tuple[Console, io.StringIO, object]:
    out = io.StringIO()
    console = Console(file=out, width=200, color_system=None)
    given: Iterator[str] = iter(lines)
    asked: list[str] = []

    def ask(prompt: str) -> str:
        asked.append(prompt)
        return next(given)

    ask.asked = asked  # type: ignore[attr-defined]
    return console, out, ask


def test_always_and_never_answer_later_calls_of_the_same_tool() -> None:
    console, out, ask = _answers("a", "x", "", "y")
    standing: dict[str, object] = {}
    first = ask_decisions(
        [_call("p1", "pay"), _call("d1", "delete"), _call("p2", "pay")],
        console,
        ask,  # type: ignore[arg-type]
        standing,  # type: ignore[arg-type]
    )
    assert first == {
        "p1": Approve(always=True),
        "d1": Deny(always=True),
        "p2": Approve(always=True),  # not asked: the "always" of p1
    }
    later = ask_decisions(
        [_call("p3", "pay"), _call("d2", "delete"), _call("r1", "refund")],
        console,
        ask,  # type: ignore[arg-type]
        standing,  # type: ignore[arg-type]
    )
    assert later == {"p3": Approve(always=True), "d2": Deny(always=True), "r1": Approve()}
    assert len(ask.asked) == 4  # type: ignore[attr-defined]  # a, x (+ its reason), y
    shown = out.getvalue()
    assert "approved (always) pay id=p2" in shown and "denied (always) delete id=d2" in shown


def test_a_tools_reason_is_shown_escaped() -> None:
    console, out, ask = _answers("n", "")
    ask_decisions([_call("w", "wire", message="big\x1b[2J wire")], console, ask)  # type: ignore[arg-type]
    shown = out.getvalue()
    assert "\x1b" not in shown and 'reason="big\\u001b[2J wire"' in shown
