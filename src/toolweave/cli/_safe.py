"""Text from a model or a server, made safe to show in a terminal (docs/cli.md).

A terminal interprets control characters: ESC starts sequences that move the cursor, erase
lines, set the window title or make links, and bidi controls reorder what a person reads.
`terminal_safe` shows each such character as an escape (``\\x1b``, ``\\x9b``, ``\\u202e``)
instead; `json_safe` writes a value as JSON with every non-printable character escaped, so an
approval prompt shows exactly what a tool will get.
"""

from __future__ import annotations

import io
import json
import re
from typing import Any

from rich.console import Console
from rich.markup import escape

__all__ = ["TerminalStream", "json_safe", "markup_safe", "terminal_safe"]

# C0 controls but \t and \n, DEL, C1 controls (8-bit CSI U+009B and OSC U+009D among them),
# the bidi marks, embeddings, overrides and isolates, and lone surrogates (which cannot be
# encoded for the terminal at all)
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)


def _escaped(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def terminal_safe(text: str) -> str:
    """`text` with every character a terminal would interpret shown as an escape: control
    characters but newline and tab as ``\\x1b`` (``\\r\\n`` is a newline), bidi controls and
    lone surrogates as ``\\u202e``. Everything else is left as it is."""
    if not _UNSAFE.search(text):
        return text
    return _UNSAFE.sub(_escaped, text.replace("\r\n", "\n"))


def markup_safe(text: Any) -> str:
    """`str(text)`, terminal-safe and escaped for Rich markup (``[bold]`` shows as it is)."""
    return escape(terminal_safe(str(text)))


def _json_escape(char: str) -> str:
    code = ord(char)
    if code > 0xFFFF:  # as a UTF-16 surrogate pair, as JSON writes it
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04x}\\u{0xDC00 + (code & 0x3FF):04x}"
    return f"\\u{code:04x}"


def json_safe(value: Any) -> str:
    """`value` as one line of JSON in which every character that is not printable (controls,
    bidi and other format characters, separators but the space, surrogates, unassigned and
    private-use code points) is a ``\\uXXXX`` escape: nothing in it acts on a terminal or
    looks like something else, and `json.loads` gives `value` back."""
    text = json.dumps(value, ensure_ascii=False, default=repr)
    if text.isprintable():
        return text
    # outside strings JSON is ASCII, so every character escaped here is inside a string
    return "".join(c if c.isprintable() else _json_escape(c) for c in text)


class TerminalStream(io.TextIOBase):
    """A text stream that prints what is written to it on `console`, terminal-safe (for an
    MCP stdio server's stderr)."""

    def __init__(self, console: Console) -> None:
        super().__init__()
        self.console = console

    def writable(self) -> bool:
        """Always: it is an output stream."""
        return True

    def write(self, text: str) -> int:
        """Print `text` made terminal-safe."""
        self.console.print(
            terminal_safe(text), end="", markup=False, highlight=False, emoji=False, soft_wrap=True
        )
        return len(text)
