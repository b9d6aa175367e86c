"""Printing a conversation as it happens: streamed text, tool calls and their results."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from rich.console import Console

from ..chat import ReasoningDelta, TextDelta
from ..errors import ToolweaveError
from ..execution.content import TextContent
from ..execution.results import ToolExecutionResult
from ..schema.arguments import parse_arguments
from ..service import ChatCompleted, ToolChatResult, ToolExecutionFinished, ToolExecutionStarted
from ._safe import json_safe, markup_safe, terminal_safe

__all__ = ["arguments_display", "render_stream", "result_display"]

_MAX_RESULT = 400


def _short(text: str, limit: int = _MAX_RESULT) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def result_display(result: ToolExecutionResult) -> str:
    """A tool result for people: text parts as they are, other parts in their place as
    ``[image (image/png, 12.0 kB)]``, ``[file report.pdf (application/pdf, 3.1 kB)]``..."""
    if not result.contents:
        return result.result_text()
    return "\n".join(
        p.text if isinstance(p, TextContent) else f"[{p.describe()}]" for p in result.contents
    )


def arguments_display(arguments: str) -> str:
    """A call's raw arguments as the tool gets them (parsed and repaired as a call is), in
    terminal-safe JSON; arguments that cannot be parsed as their text, a JSON string."""
    try:
        return json_safe(parse_arguments(arguments))
    except ToolweaveError:
        return json_safe(arguments) + " (not a JSON object)"


def render_stream(
    events: Iterable[Any], console: Console, *, show_reasoning: bool = False
) -> ToolChatResult | None:
    """Print the events of `ToolService.chat_stream` and return the final result."""
    in_text = False
    result: ToolChatResult | None = None

    def end_text() -> None:
        nonlocal in_text
        if in_text:
            console.print()
            in_text = False

    for event in events:
        if isinstance(event, TextDelta):
            if not in_text:
                console.print("[bold green]assistant>[/] ", end="")
                in_text = True
            text = terminal_safe(event.text)
            console.print(text, end="", markup=False, highlight=False, emoji=False, soft_wrap=True)
            console.file.flush()
        elif isinstance(event, ReasoningDelta) and show_reasoning:
            text = terminal_safe(event.text)
            console.print(text, end="", style="dim", markup=False, emoji=False, soft_wrap=True)
        elif isinstance(event, ToolExecutionStarted):
            end_text()
            r = event.request
            console.print(
                f"[bold cyan]tool call[/] {markup_safe(r.name)}"
                f"({markup_safe(arguments_display(r.arguments))}) [dim]id={markup_safe(r.id)}[/]",
                soft_wrap=True,
                emoji=False,
            )
        elif isinstance(event, ToolExecutionFinished):
            end_text()
            ex = event.execution
            style = "red" if ex.result.is_error else "magenta"
            label = "tool error" if ex.result.is_error else "tool result"
            console.print(
                f"[bold {style}]{label}[/] [dim]id={markup_safe(ex.request.id)}[/] "
                f"{markup_safe(_short(result_display(ex.result)))}",
                soft_wrap=True,
                emoji=False,
            )
        elif isinstance(event, ChatCompleted):
            end_text()
            result = event.result
    end_text()
    return result
