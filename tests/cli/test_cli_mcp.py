"""`toolweave chat --mcp`: MCP servers' tools in a chat, and their elicitation answered in
the terminal — the real command in a pseudo-terminal (pexpect) against the reference
``server-everything`` (npm), asserting what the server received (issue #16)."""

from __future__ import annotations

import io
import json
import re
import sys
from collections.abc import Iterator
from typing import Any

import pexpect
import pytest
from rich.console import Console

from toolweave.cli._elicit import ask_elicitation
from toolweave.cli.app import _mcp_config
from toolweave.mcp.hooks import ElicitationRequest

from .test_first_hour import ANSI, HERE, in_terminal, run

sys.path.insert(0, str(HERE.parent / "mcp"))
from npm_support import EVERYTHING, npm_install

MODELS = str(HERE / "mcp_models.py")


@pytest.fixture(scope="module")
def everything() -> str:
    """The command line that starts server-everything over stdio."""
    modules = npm_install(EVERYTHING)
    return f"node {modules / '@modelcontextprotocol/server-everything/dist/index.js'}"


def server_got(child: pexpect.spawn) -> Any:
    child.expect(r"SERVER GOT: (.*)\r?\n")
    return json.loads(ANSI.sub("", child.match.group(1)).strip())


def finish(child: pexpect.spawn) -> None:
    child.expect_exact("user>")
    child.sendline("")
    child.expect(pexpect.EOF)
    assert "Traceback" not in ANSI.sub("", child.before or "")


def answer(child: pexpect.spawn, expected: str, reply: str) -> None:
    child.expect_exact(expected)
    child.expect(r">\S* $")  # the field's prompt
    child.sendline(reply)


def test_a_form_is_asked_field_by_field(everything: str) -> None:
    child = in_terminal("chat", "--mcp", everything, "--provider", f"{MODELS}:form_model")
    child.expect_exact("user>")
    child.sendline("fill in the form")
    child.expect_exact("Please provide inputs for the following fields:")
    child.expect_exact("[c]ancel:")
    child.sendline("a")
    answer(child, "Your full, legal name", "")  # required: asked again
    child.expect_exact("an answer is required")
    child.sendline("Ann Lee")
    answer(child, "Agree to the terms", "maybe")
    child.expect_exact("answer y or n")
    child.sendline("y")
    answer(child, "[default: It was a dark and stormy night.]", "")
    answer(child, "an email address", "not-an-email")
    child.expect_exact("is not an email address")
    child.sendline("ann@example.com")
    answer(child, "a URL", "")  # optional, no default: left out
    answer(child, "a date (YYYY-MM-DD)", "1990-02-30")
    child.expect_exact("is not a valid date")
    child.sendline("1990-02-28")
    answer(child, "a whole number from 1 to 100 [default: 42]", "200")
    child.expect_exact("200 is more than 100")
    child.sendline("7")
    answer(child, "[default: 3.14]", "")
    child.expect_exact("1) Monica  2) Rachel  3) Joey")
    answer(child, "[default: Monica]", "3")
    answer(child, "1–3 of them [default: Guitar]", "1, 2, 3, 4")
    child.expect_exact("choose at most 3")
    child.sendline("guitar, Violin")
    child.expect_exact("1) Superman  2) Green Lantern  3) Wonder Woman")
    answer(child, "[default: Superman]", "Wonder Woman")
    answer(child, "[default: Tuna]", "")
    child.expect_exact("1) Cats  2) Dogs")
    answer(child, "[default: Cats]", "2")
    got = server_got(child)
    finish(child)
    assert got == {
        "action": "accept",
        "content": {
            "name": "Ann Lee",
            "check": True,
            "firstLine": "It was a dark and stormy night.",
            "email": "ann@example.com",
            "birthdate": "1990-02-28",
            "integer": 7,
            "number": 3.14,
            "untitledSingleSelectEnum": "Joey",
            "untitledMultipleSelectEnum": ["Guitar", "Violin"],
            "titledSingleSelectEnum": "hero-3",
            "titledMultipleSelectEnum": ["fish-1"],
            "legacyTitledEnum": "pet-2",
        },
    }


@pytest.mark.parametrize(("reply", "action"), [("d", "decline"), ("c", "cancel")])
def test_a_form_can_be_declined_or_cancelled(everything: str, reply: str, action: str) -> None:
    child = in_terminal("chat", "--mcp", everything, "--provider", f"{MODELS}:form_model")
    child.expect_exact("user>")
    child.sendline("fill in the form")
    child.expect_exact("[c]ancel:")
    child.sendline(reply)
    assert server_got(child) == {"action": action}
    finish(child)


@pytest.mark.parametrize(("reply", "action"), [("y", "accept"), ("n", "decline")])
def test_a_url_is_shown_and_confirmed_never_opened(
    everything: str, reply: str, action: str
) -> None:
    child = in_terminal("chat", "--mcp", everything, "--provider", f"{MODELS}:url_model")
    child.expect_exact("user>")
    child.sendline("log me in")
    child.expect_exact("asks you to open a URL:")
    child.expect_exact("Please open the link to complete this action.")
    child.expect_exact("https://example.com/login")
    child.expect_exact("[c]ancel:")
    child.sendline("later")
    child.expect_exact("answer y, n or c")
    child.sendline(reply)
    if action == "accept":
        child.expect_exact("toolweave does not open it")
    assert server_got(child) == {"action": action}
    finish(child)


@pytest.mark.parametrize("reply", ["y", "n"])
def test_a_sampling_request_is_shown_and_answered_by_the_chat_model_if_allowed(
    everything: str, reply: str
) -> None:
    child = in_terminal("chat", "--mcp", everything, "--provider", f"{MODELS}:sampling_model")
    child.expect_exact("user>")
    child.sendline("sample something")
    child.expect_exact("asks the model to answer:")
    child.expect_exact("You are a helpful test server.")
    child.expect_exact("context: a haiku")
    child.expect_exact("at most 50 tokens")
    child.expect_exact("[n]o:")
    child.sendline("later")
    child.expect_exact("answer y or n")
    child.sendline(reply)
    child.expect(r"SERVER GOT: (.*)\r?\n")
    got = ANSI.sub("", child.match.group(1))
    finish(child)
    if reply == "y":  # the server received the chat model's answer
        assert "SAMPLED (50 tokens) for: You are a helpful test server." in got
        assert "context: a haiku" in got
    else:
        assert "declined" in got and "SAMPLED" not in got


def test_without_tools_or_servers_chat_says_what_to_give() -> None:
    done = run("chat", "--provider", f"{MODELS}:form_model", "-M", "hi")
    assert done.returncode == 1
    assert "--tools MODULE[:OBJECT] and/or --mcp COMMAND_OR_URL" in done.stderr


def test_a_server_that_does_not_start_is_one_error_line() -> None:
    done = run("chat", "--mcp", "no-such-mcp-server --flag", "--provider", f"{MODELS}:form_model")
    assert done.returncode == 1
    assert "error:" in done.stderr and "no-such-mcp-server" in done.stderr
    assert "Traceback" not in done.stderr


def test_mcp_specs_become_configs() -> None:
    taken: set[str] = set()
    stdio = _mcp_config("toolweave mcp serve 'my notes.py'", taken)
    assert (stdio.client_type, stdio.server_name) == ("stdio", "toolweave")
    assert stdio.params == {"command": "toolweave", "args": ["mcp", "serve", "my notes.py"]}
    again = _mcp_config("toolweave mcp serve other.py", taken)
    assert again.server_name == "toolweave_2"
    http = _mcp_config("http://127.0.0.1:8000/mcp", taken)
    assert (http.client_type, http.server_name, http.url) == (
        "streamable-http",
        "127.0.0.1",
        "http://127.0.0.1:8000/mcp",
    )
    assert _mcp_config("https://example.com/sse", taken).client_type == "sse"


# --- the prompts themselves, answered from a list ---------------------------------------------


def asked(request: ElicitationRequest, *replies: str) -> tuple[Any, str]:
    console = Console(file=io.StringIO(), width=200)
    feed: Iterator[str] = iter(replies)

    def read(prompt: str) -> str:
        console.print(prompt, end="")
        try:
            return next(feed)
        except StopIteration:
            raise EOFError from None

    result = ask_elicitation(request, console, read)
    return result, console.file.getvalue()  # type: ignore[attr-defined]


def form(properties: dict[str, Any], required: tuple[str, ...] = ()) -> ElicitationRequest:
    schema = {"type": "object", "properties": properties, "required": list(required)}
    return ElicitationRequest(server_name="srv", message="Tell me [everything]", schema=schema)


def test_markup_in_server_text_is_shown_as_it_is() -> None:
    result, shown = asked(
        form({"x": {"type": "string", "title": "[bold]X[/]", "description": "a [red]b"}}), "a", "v"
    )
    assert result.content == {"x": "v"}
    assert "Tell me [everything]" in shown and "[bold]X[/]" in shown and "a [red]b" in shown


def test_end_of_input_cancels_and_booleans_take_defaults() -> None:
    result, _ = asked(form({"ok": {"type": "boolean", "default": True}}), "a")
    assert (result.action, result.content) == ("cancel", None)
    result, shown = asked(form({"ok": {"type": "boolean", "default": False}}), "a", "")
    assert result.content == {"ok": False} and "[default: n]" in shown


def test_numbers_strings_and_multi_selects_are_checked() -> None:
    fields = {
        "n": {"type": "number", "minimum": 0.5},
        "s": {"type": "string", "minLength": 2, "maxLength": 3, "format": "uri"},
        "m": {"type": "array", "minItems": 2, "items": {"type": "string", "enum": ["a", "b"]}},
    }
    result, shown = asked(
        form(fields, ("n",)),
        "a",
        "zero",
        "0.1",
        "nan",
        "2.5",
        "x",
        "abcd",
        "abc",
        "a:b",
        "a",
        "a,a",
        "2,a",
    )
    assert result.content == {"n": 2.5, "s": "a:b", "m": ["b", "a"]}
    for problem in (
        "'zero' is not a number",
        "0.1 is less than 0.5",
        "'nan' is not a finite number",
        "at least 2 characters",
        "at most 3 characters",
        "choose at least 2",
        "each choice once",
    ):
        assert problem in shown, problem
    assert "'abc' is not a URL" in re.sub(r"\s+", " ", shown)


def test_a_sampling_prompt_shows_server_text_as_it_is_and_end_of_input_declines() -> None:
    from toolweave.chat.messages import SystemMessage, UserMessage
    from toolweave.chat.request import ChatRequest, ChatRequestParameters
    from toolweave.cli._elicit import ask_sampling

    console = Console(file=io.StringIO(), width=200)
    request = ChatRequest(
        [SystemMessage("be [bold]brief[/]"), UserMessage("x" * 1000)],
        ChatRequestParameters(max_tokens=7),
    )

    def read(prompt: str) -> str:
        console.print(prompt, end="")
        raise EOFError

    assert ask_sampling("srv", request, console, read) is False
    shown = console.file.getvalue()  # type: ignore[attr-defined]
    assert "srv asks the model to answer:" in shown and "be [bold]brief[/]" in shown
    assert "x" * 399 + "…" in shown and "x" * 400 not in shown
    assert "at most 7 tokens" in shown
