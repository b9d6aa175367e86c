"""`toolweave chat` asks in the terminal before a tool that needs approval runs, and for the
result of a deferred call (docs/approvals.md)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from rich.console import Console

from ..service.approvals import Approve, Decision, DeferredResult, Deny, PendingCall
from ._render import arguments_display
from ._safe import json_safe, markup_safe

__all__ = ["ask_decisions"]

Ask = Callable[[str], str]


def ask_decisions(
    pending: Sequence[PendingCall],
    console: Console,
    ask: Ask | None = None,
    standing: dict[str, Decision] | None = None,
) -> dict[str, Decision]:
    """One decision per pending call, asked on `console`: y(es) / a(lways) / n(o) /
    x (never) / e(dit) for an approval, the result text for a deferred call. End of input
    denies what is left. The arguments are shown as JSON in which every control, bidi or
    other invisible character is a ``\\uXXXX`` escape, so they cannot disguise what runs.

    "always" and "never" are standing decisions for the tool (`Approve(always=True)`,
    `Deny(always=True)`): they answer that tool's other calls of this batch without asking,
    and those of later batches too when the caller keeps `standing` (tool name to
    decision). `toolweave chat` does not: the service keeps them (in the paused state, and
    across turns through `ToolChatResult.standing_decisions`)."""
    read: Ask = ask or (lambda prompt: console.input(prompt, emoji=False))
    decisions: dict[str, Decision] = {}
    remembered = standing if standing is not None else {}
    for call in pending:
        known = remembered.get(call.tool_name) if call.reason == "approval" else None
        if known is not None:
            word = "approved" if isinstance(known, Approve) else "denied"
            console.print(
                f"[dim]{word} (always) {markup_safe(call.tool_name)} id={markup_safe(call.id)}[/]",
                soft_wrap=True,
                emoji=False,
            )
            decisions[call.id] = known
            continue
        try:
            decisions[call.id] = decision = _ask_one(call, console, read)
        except EOFError:
            console.print()
            for rest in pending:
                decisions.setdefault(rest.id, Deny("No decision was given (input ended)."))
            break
        if isinstance(decision, Approve | Deny) and decision.always:
            remembered[call.tool_name] = decision
    return decisions


def _ask_one(call: PendingCall, console: Console, read: Ask) -> Decision:
    arguments = markup_safe(arguments_display(call.arguments))
    shown = f"{markup_safe(call.tool_name)}({arguments}) [dim]id={markup_safe(call.id)}[/]"
    if call.message:
        shown += f" [dim]reason={markup_safe(json_safe(call.message))}[/]"
    if call.reason == "deferred":
        console.print(f"[bold yellow]deferred[/] {shown}", soft_wrap=True, emoji=False)
        return DeferredResult(read("[bold yellow]result>[/] "))
    console.print(f"[bold yellow]approval needed[/] {shown}", soft_wrap=True, emoji=False)
    while True:
        prompt = (
            r"[bold yellow]run it? \[y]es / \[a]lways / \[n]o / \[x] never / "
            r"\[e]dit arguments:[/] "
        )
        answer = read(prompt).strip().lower()
        if answer in ("y", "yes"):
            return Approve()
        if answer in ("a", "always"):
            return Approve(always=True)
        if answer in ("n", "no", "x", "never"):
            always = answer in ("x", "never")
            reason = read("[bold yellow]reason for the model (optional):[/] ").strip()
            return Deny(reason, always=always) if reason else Deny(always=always)
        if answer in ("e", "edit"):
            edited = _edited(call, console, read)
            if edited is not None:
                return Approve(edited)
            continue
        console.print("[red]answer y, a, n, x or e[/]")


def _edited(call: PendingCall, console: Console, read: Ask) -> dict[str, Any] | None:
    text = read("[bold yellow]arguments (JSON)>[/] ").strip()
    try:
        value = json.loads(text)
    except ValueError as e:
        console.print(f"[red]not JSON: {markup_safe(e)}[/]")
        return None
    if not isinstance(value, dict):
        console.print("[red]the arguments must be a JSON object[/]")
        return None
    return value
