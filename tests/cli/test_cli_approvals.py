"""`toolweave chat` asks in the terminal before a tool that requires approval runs: the real
command in a pseudo-terminal (pexpect), answered yes, edit and no."""

from __future__ import annotations

import re

import pexpect

from .test_first_hour import ANSI, HERE, in_terminal, run

TOOLS = str(HERE / "approval_tools.py")


def test_chat_asks_before_a_tool_that_needs_approval() -> None:
    child = in_terminal("chat", "--tools", TOOLS, "--provider", f"{TOOLS}:paying_model")
    child.expect_exact("user>")
    child.sendline("pay my friends")
    child.expect(r"approval needed.*pay\(.*Ann.*10")
    child.expect_exact("[e]dit arguments:")
    child.sendline("y")
    child.expect(r"approval needed.*pay\(.*Bob.*99")
    child.expect_exact("[e]dit arguments:")
    child.sendline("maybe")  # not an answer: asked again
    child.expect_exact("answer y, a, n, x or e")
    child.sendline("e")
    child.expect_exact("arguments (JSON)>")
    child.sendline('{"to": "Bob", "amount": 9}')
    child.expect(r"approval needed.*pay\(.*Eve.*5")
    child.expect_exact("[e]dit arguments:")
    child.sendline("n")
    child.expect_exact("reason for the model (optional):")
    child.sendline("Eve was paid yesterday.")
    child.expect(r"RESULTS: (.*)\r?\n")
    results = ANSI.sub("", child.match.group(1)).strip()
    assert results == "paid 10 to Ann | paid 9 to Bob | Eve was paid yesterday."
    child.expect_exact("user>")
    child.sendline("")
    child.expect(pexpect.EOF)
    shown = ANSI.sub("", child.before or "")
    assert "Traceback" not in shown


def test_without_a_terminal_answer_nothing_runs() -> None:
    """`-M` with no input to answer from: the calls are denied, the chat still ends well."""
    done = run(
        "chat", "--tools", TOOLS, "--provider", f"{TOOLS}:paying_model", "-M", "pay", stdin=""
    )
    assert done.returncode == 0, done.stderr
    answer = re.search(r"RESULTS: (.*)", ANSI.sub("", done.stdout))
    assert answer is not None
    assert answer.group(1).count("No decision was given") == 3


def test_chat_always_answers_the_tools_later_calls() -> None:
    """`a` (always) approves the call and the same tool's other calls without asking."""
    child = in_terminal("chat", "--tools", TOOLS, "--provider", f"{TOOLS}:paying_model")
    child.expect_exact("user>")
    child.sendline("pay my friends")
    child.expect(r"approval needed.*pay\(.*Ann.*10")
    child.expect_exact("[e]dit arguments:")
    child.sendline("a")
    child.expect(r"RESULTS: (.*)\r?\n")
    results = ANSI.sub("", child.match.group(1)).strip()
    assert results == "paid 10 to Ann | paid 99 to Bob | paid 5 to Eve"
    shown = ANSI.sub("", child.before or "")
    assert "approved (always) pay" in shown and shown.count("approval needed") == 0
    child.expect_exact("user>")
    child.sendline("")
    child.expect(pexpect.EOF)


def test_chat_always_holds_in_the_later_turns_of_the_session() -> None:
    """`y` approves one call (the next turn asks again); `a` stands for the later turns."""
    child = in_terminal("chat", "--tools", TOOLS, "--provider", f"{TOOLS}:paying_each_turn_model")
    child.expect_exact("user>")
    child.sendline("pay Ann")
    child.expect(r"approval needed.*pay\(.*Ann.*1")
    child.expect_exact("[e]dit arguments:")
    child.sendline("y")
    child.expect_exact("RESULTS: paid 1 to Ann")
    child.expect_exact("user>")
    child.sendline("again")
    child.expect(r"approval needed.*pay\(.*Ann.*2")  # a plain yes did not stand
    child.expect_exact("[e]dit arguments:")
    child.sendline("a")
    child.expect_exact("RESULTS: paid 2 to Ann")
    child.expect_exact("user>")
    child.sendline("and again")
    child.expect_exact("RESULTS: paid 3 to Ann")
    shown = ANSI.sub("", child.before or "")
    assert "approval needed" not in shown  # the third turn ran without asking
    child.expect_exact("user>")
    child.sendline("")
    child.expect(pexpect.EOF)
