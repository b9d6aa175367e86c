"""A terminal never interprets text from a model or a server (issue #27, item 8): the real
`toolweave chat` in a pseudo-terminal (pexpect) against tests/servers/mcp_hostile_server.py
and a model whose answer and arguments hold ESC sequences, 8-bit CSI/OSC, bidi overrides,
Rich markup and emoji codes; and the sanitizer itself over every code point."""

from __future__ import annotations

import io
import json
import logging
import sys
import unicodedata

import pexpect
import pytest
import typer
from hypothesis import given
from hypothesis import strategies as st

from toolweave.cli._safe import json_safe, terminal_safe
from toolweave.cli.app import _errors, _terminal_log
from toolweave.errors import ToolweaveError

from .hostile_models import SPOOFED
from .test_first_hour import ANSI, HERE, in_terminal

sys.path.insert(0, str(HERE.parent / "servers"))
from mcp_hostile_server import hostile

SERVER = f"{sys.executable} {HERE.parent / 'servers' / 'mcp_hostile_server.py'}"
MODELS = str(HERE / "hostile_models.py")
APPROVAL_TOOLS = str(HERE / "approval_tools.py")

# what a terminal would act on: ESC, BEL, 8-bit CSI and OSC, the bidi override
RAW = ("\x1b", "\x07", "\x9b", "\x9d", "\u202e", "\u202c")


def visible(tag: str) -> str:
    """`hostile(tag)` as `terminal_safe` shows it (written out, not computed)."""
    return (
        rf"{tag}:\x1b]0;{tag}\x07\x1b[2J\x1b[2K\x1b[5A"
        rf"\x1b]8;;https://evil.example/{tag}\x1b\link\x1b]8;;\x1b\\x9b2J\x9d0;{tag}\x07"
        rf"\u202e{tag}\u202c [bold]{tag}[/] :warning:"
    )


def transcript(child: pexpect.spawn) -> io.StringIO:
    log = io.StringIO()
    child.logfile_read = log
    return log


def test_a_terminal_never_interprets_text_from_a_model_or_a_server() -> None:
    """Tool results and errors, the warning of a failed call, elicitation messages, titles,
    descriptions, defaults and choice labels, sampling texts, the model's answer and its
    arguments, and the server's stderr: on a dumb terminal (no styles of our own), not one
    ESC byte reaches the terminal, and each text shows in its escaped form."""
    child = in_terminal(
        "chat", "--mcp", SERVER, "--provider", f"{MODELS}:hostile_model", "-M", "go", TERM="dumb"
    )
    log = transcript(child)
    child.expect_exact("[c]ancel:")  # the form
    child.sendline("a")
    child.expect(r">\S* $")  # the name field, whose default is taken
    child.sendline("")
    child.expect(r">\S* $")  # the choice
    child.sendline("1")
    child.expect_exact("[n]o:")  # the sampling request
    child.sendline("y")
    child.expect_exact(" END")
    child.expect(pexpect.EOF)
    child.close()
    shown = log.getvalue()
    assert child.exitstatus == 0, shown
    for raw in RAW:
        assert raw not in shown, (raw, shown)
    for tag in (
        "STDERR",
        "RESULT",
        "ERROR",
        "MESSAGE",
        "TITLE",
        "DESCRIPTION",
        "DEFAULT",
        "LABEL",
        "SYSTEM",
        "SAMPLING",
        "SAMPLED",
        "ANSWER",
    ):
        assert visible(tag) in shown, (tag, shown)
    assert f"warning: tool 'fail' failed: McpError: {visible('ERROR')}" in shown
    # the model's arguments, as JSON
    assert r'show({"note": "ARGS\u001b]0;ARGS\u0007\u001b[2J\u009b2J\u202eARGS"})' in shown
    # what the server received back is what it sent: the default, escapes and all
    assert json.dumps({"name": hostile("DEFAULT")})[1:-1] in shown


def test_an_approval_prompt_cannot_be_spoofed_by_the_arguments() -> None:
    """`{"amount": 500000, "to": "Eve\\x1b[32G5\\x1b[K"}` would redraw the amount as 5: the
    prompt shows 500000 and the escapes as JSON text, on a colour terminal too."""
    child = in_terminal(
        "chat", "--tools", APPROVAL_TOOLS, "--provider", f"{MODELS}:spoofing_model", "-M", "pay"
    )
    log = transcript(child)
    child.expect_exact("[e]dit arguments:")
    prompt = log.getvalue()
    child.sendline("n")
    child.expect_exact("reason for the model (optional):")
    child.sendline("")
    child.expect(r"RESULTS: (.*)\r?\n")
    results = child.match.group(1)
    child.expect(pexpect.EOF)
    assert "\x1b[32G" not in prompt and "\x1b[K" not in prompt
    assert r'pay({"amount": 500000, "to": "Eve\u001b[32G5\u001b[K"})' in ANSI.sub("", prompt)
    assert json.loads(r'{"amount": 500000, "to": "Eve\u001b[32G5\u001b[K"}') == SPOOFED
    assert "paid" not in results  # denied: nothing ran


def test_log_records_and_errors_are_shown_terminal_safe(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A warning logged outside a conversation (e.g. a failed connect echoing a server) and
    an error's one line go through the same escaping."""
    with _terminal_log():
        logging.getLogger("toolweave.mcp").warning("connect failed: %s", hostile("LOG"))
    with pytest.raises(typer.Exit), _errors():
        raise ToolweaveError(hostile("FAILED"))
    err = capsys.readouterr().err
    assert not any(raw in err for raw in RAW), err
    assert f"warning: connect failed: {visible('LOG')}" in err
    assert f"error: [182012] {visible('FAILED')}" in err


# --- the sanitizer ------------------------------------------------------------------------

BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


def unsafe(code: int) -> bool:
    """What a terminal acts on or a reader is misled by: controls (but \\n and \\t), the
    bidi controls, and lone surrogates."""
    category = unicodedata.category(chr(code))
    return (category == "Cc" and chr(code) not in "\n\t") or category == "Cs" or code in BIDI


def test_every_code_point_is_kept_or_escaped() -> None:
    for code in range(0x110000):
        char = chr(code)
        shown = terminal_safe(char)
        if unsafe(code):
            expected = f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
            assert shown == expected, hex(code)
        else:
            assert shown == char, hex(code)


def test_crlf_is_a_newline_and_a_lone_cr_is_shown() -> None:
    assert terminal_safe("a\r\nb\rc\td") == "a\nb\\x0dc\td"


@given(st.text(st.characters(codec=None, exclude_categories=())))
def test_terminal_safe_leaves_nothing_a_terminal_acts_on(text: str) -> None:
    shown = terminal_safe(text)
    assert not any(unsafe(ord(c)) for c in shown)
    if not any(unsafe(ord(c)) for c in text):
        assert shown == text


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(st.characters(codec=None)),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.text(st.characters(codec=None)), inner, max_size=4)
    ),
    max_leaves=12,
)


@given(json_values)
def test_json_safe_is_printable_and_exact(value: object) -> None:
    shown = json_safe(value)
    assert shown.isprintable()
    assert json.loads(shown) == value
