"""`toolweave chat` answers an MCP server's elicitation in the terminal: a form field by
field (title, description, type, choices, default), or a URL to open (shown, never opened)."""

from __future__ import annotations

import datetime
import math
import re
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

from rich.console import Console

from ..context import ElicitationResult
from ._safe import markup_safe

__all__ = ["ask_elicitation"]

Ask = Callable[[str], str]

_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_TRUE = {"y", "yes", "true", "1"}
_FALSE = {"n", "no", "false", "0"}
_lock = threading.Lock()  # two servers asking at once take turns at the terminal


class _Invalid(ValueError):
    """An answer that does not fit the field: said, and asked again."""


def ask_elicitation(request: Any, console: Console, ask: Ask | None = None) -> ElicitationResult:
    """Ask the user `request` (a `toolweave.mcp.hooks.ElicitationRequest`) on `console`.
    End of input cancels."""
    read: Ask = ask or (lambda prompt: console.input(prompt, emoji=False))
    with _lock:
        try:
            if request.mode == "url":
                return _ask_url(request, console, read)
            return _ask_form(request, console, read)
        except EOFError:
            console.print()
            return ElicitationResult("cancel")


def ask_sampling(server_name: str, request: Any, console: Console, ask: Ask | None = None) -> bool:
    """Ask whether the chat's model may answer server `server_name`'s sampling `request`
    (a `ChatRequest`): the messages are shown, the answer is y or n. End of input declines."""
    read: Ask = ask or (lambda prompt: console.input(prompt, emoji=False))
    with _lock:
        console.print(
            f"[bold yellow]{markup_safe(server_name)} asks the model to answer:[/]", soft_wrap=True
        )
        for message in request.messages[-4:]:
            text = " ".join(str(getattr(message, "text", "") or "").split())
            if len(text) > 400:
                text = text[:399] + "…"
            console.print(
                f"  [dim]{markup_safe(message.type)}:[/] {markup_safe(text)}", soft_wrap=True
            )
        tools = [c.name for c in request.parameters.tools or ()]
        limits = f"at most {request.parameters.max_tokens} tokens"
        if tools:
            limits += "; it may call the server's tools " + ", ".join(tools)
        console.print(f"  [dim]({markup_safe(limits)})[/]", soft_wrap=True)
        while True:
            try:
                answer = _choice(read(r"[bold yellow]send it to the model? \[y]es / \[n]o:[/] "))
            except EOFError:
                console.print()
                return False
            if answer in ("y", "n"):
                return answer == "y"
            console.print("[red]answer y or n[/]")


def _ask_url(request: Any, console: Console, read: Ask) -> ElicitationResult:
    console.print(
        f"[bold yellow]{markup_safe(request.server_name)} asks you to open a URL:[/] "
        f"{markup_safe(request.message)}",
        soft_wrap=True,
    )
    console.print(f"  {markup_safe(request.url or '')}", soft_wrap=True, markup=True)
    while True:
        answer = _choice(read(r"[bold yellow]open it? \[y]es / \[n]o (decline) / \[c]ancel:[/] "))
        if answer == "y":
            console.print("[dim]open it in your browser (toolweave does not open it)[/]")
            return ElicitationResult("accept")
        if answer in ("n", "c"):
            return ElicitationResult("decline" if answer == "n" else "cancel")
        console.print("[red]answer y, n or c[/]")


def _ask_form(request: Any, console: Console, read: Ask) -> ElicitationResult:
    console.print(
        f"[bold yellow]{markup_safe(request.server_name)} asks:[/] {markup_safe(request.message)}",
        soft_wrap=True,
    )
    while True:
        answer = _choice(read(r"[bold yellow]\[a]nswer / \[d]ecline / \[c]ancel:[/] "))
        if answer in ("d", "c"):
            return ElicitationResult("decline" if answer == "d" else "cancel")
        if answer == "a":
            break
        console.print("[red]answer a, d or c[/]")
    schema = request.schema or {}
    required = set(schema.get("required") or ())
    content: dict[str, Any] = {}
    for name, field in (schema.get("properties") or {}).items():
        if isinstance(field, dict):
            value = _ask_field(name, field, name in required, console, read)
            if value is not _OMITTED:
                content[name] = value
    return ElicitationResult("accept", content)


def _choice(text: str) -> str:
    word = text.strip().lower()
    return word[:1] if word else ""


_OMITTED: Any = object()


def _ask_field(
    name: str, field: dict[str, Any], required: bool, console: Console, read: Ask
) -> Any:
    title = field.get("title") or name
    heading = f"[bold]{markup_safe(title)}[/]"
    if field.get("description"):
        heading += f" [dim]— {markup_safe(field['description'])}[/]"
    if required:
        heading += " [red](required)[/]"
    console.print(heading, soft_wrap=True)
    options = _options(field)
    if options:
        console.print(
            "  "
            + "  ".join(f"{i}) {markup_safe(label)}" for i, (_, label) in enumerate(options, 1)),
            soft_wrap=True,
        )
    prompt = f"  [cyan]{markup_safe(_hint(field))}"
    if "default" in field:
        prompt += f" \\[default: {markup_safe(_shown(field['default'], options))}]"
    prompt += ">[/] "
    while True:
        text = read(prompt).strip()
        if not text:
            if "default" in field:
                return field["default"]
            if not required:
                return _OMITTED
            console.print("[red]an answer is required[/]")
            continue
        try:
            return _parse(text, field, options)
        except _Invalid as e:
            console.print(f"[red]{markup_safe(e)}[/]")


def _options(field: dict[str, Any]) -> list[tuple[Any, str]]:
    """The (value, label) choices of a single- or multi-select enum (titled or not)."""
    spec = field.get("items") if field.get("type") == "array" else field
    if not isinstance(spec, dict):
        return []
    titled = spec.get("oneOf") or spec.get("anyOf")
    if isinstance(titled, list):
        return [
            (o["const"], str(o.get("title") or o["const"]))
            for o in titled
            if isinstance(o, dict) and "const" in o
        ]
    values = spec.get("enum")
    if not isinstance(values, list):
        return []
    names = spec.get("enumNames")
    if isinstance(names, list) and len(names) == len(values):
        return [(v, str(n)) for v, n in zip(values, names, strict=True)]
    return [(v, str(v)) for v in values]


def _hint(field: dict[str, Any]) -> str:
    kind = field.get("type")
    if kind == "array":
        low, high = field.get("minItems"), field.get("maxItems")
        count = (
            f", {low}–{high} of them"
            if low is not None and high is not None
            else (f", at least {low}" if low else (f", at most {high}" if high else ""))
        )
        return f"numbers or values, comma-separated{count}"
    if _options(field):
        return "a number or a value"
    if kind == "boolean":
        return "y/n"
    if kind in ("integer", "number"):
        what = "a whole number" if kind == "integer" else "a number"
        low, high = field.get("minimum"), field.get("maximum")
        if low is not None and high is not None:
            return f"{what} from {low} to {high}"
        if low is not None:
            return f"{what}, at least {low}"
        if high is not None:
            return f"{what}, at most {high}"
        return what
    fmt = field.get("format")
    return {"email": "an email address", "uri": "a URL", "date": "a date (YYYY-MM-DD)"}.get(
        str(fmt), "a date and time (ISO 8601)" if fmt == "date-time" else "text"
    )


def _shown(value: Any, options: list[tuple[Any, str]]) -> str:
    labels = dict(options)
    if isinstance(value, list):
        return ", ".join(str(labels.get(v, v)) for v in value)
    if isinstance(value, bool):
        return "y" if value else "n"
    return str(labels.get(value, value))


def _parse(text: str, field: dict[str, Any], options: list[tuple[Any, str]]) -> Any:
    kind = field.get("type")
    if kind == "array":
        picked = [_pick(part.strip(), options) for part in text.split(",") if part.strip()]
        if len(set(map(str, picked))) != len(picked):
            raise _Invalid("each choice once, please")
        low, high = field.get("minItems"), field.get("maxItems")
        if low is not None and len(picked) < low:
            raise _Invalid(f"choose at least {low}")
        if high is not None and len(picked) > high:
            raise _Invalid(f"choose at most {high}")
        return picked
    if options:
        return _pick(text, options)
    if kind == "boolean":
        if text.lower() in _TRUE:
            return True
        if text.lower() in _FALSE:
            return False
        raise _Invalid("answer y or n")
    if kind in ("integer", "number"):
        return _number(text, field)
    return _string(text, field)


def _pick(text: str, options: list[tuple[Any, str]]) -> Any:
    if text.isdigit() and 1 <= int(text) <= len(options):
        return options[int(text) - 1][0]
    for value, label in options:
        if text == str(value) or text.lower() == label.lower():
            return value
    raise _Invalid(f"{text!r} is not one of the choices: answer its number or its value")


def _number(text: str, field: dict[str, Any]) -> int | float:
    try:
        value: int | float = int(text)
    except ValueError:
        if field.get("type") == "integer":
            raise _Invalid(f"{text!r} is not a whole number") from None
        try:
            value = float(text)
        except ValueError:
            raise _Invalid(f"{text!r} is not a number") from None
        if not math.isfinite(value):
            raise _Invalid(f"{text!r} is not a finite number") from None
    low, high = field.get("minimum"), field.get("maximum")
    if low is not None and value < low:
        raise _Invalid(f"{value} is less than {low}")
    if high is not None and value > high:
        raise _Invalid(f"{value} is more than {high}")
    return value


def _string(text: str, field: dict[str, Any]) -> str:
    low, high = field.get("minLength"), field.get("maxLength")
    if low is not None and len(text) < low:
        raise _Invalid(f"at least {low} characters, please")
    if high is not None and len(text) > high:
        raise _Invalid(f"at most {high} characters, please")
    fmt = field.get("format")
    if fmt == "email" and not _EMAIL.match(text):
        raise _Invalid(f"{text!r} is not an email address")
    if fmt == "uri":
        parts = urllib.parse.urlsplit(text)
        if not parts.scheme or not (parts.netloc or parts.path):
            raise _Invalid(f"{text!r} is not a URL (e.g. https://example.com)")
    try:
        if fmt == "date":
            datetime.date.fromisoformat(text)
        elif fmt == "date-time":
            datetime.datetime.fromisoformat(text)
    except ValueError:
        raise _Invalid(f"{text!r} is not a valid {fmt}") from None
    return text
