"""What a new user meets on the command line: the real `toolweave` command in a
subprocess, in a pseudo-terminal (pexpect) where the behaviour depends on it."""

from __future__ import annotations

import os
import re
import stat
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from .sample_tools import LONG_PATH

HERE = Path(__file__).resolve().parent
TOOLS = str(HERE / "sample_tools.py")
FAKE_LLAMA = HERE.parent / "e2e" / "fake_llama_server.py"
TOOLWEAVE = [sys.executable, "-m", "toolweave"]
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "TOOLWEAVE_DEBUG"}
    for var in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY"):
        env.pop(var, None)
    env.update(extra)
    return env


def run(*args: str, stdin: str | None = None, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*TOOLWEAVE, *args], input=stdin, capture_output=True, text=True, timeout=120,
        env=_env(**env), cwd=HERE,
    )  # fmt: skip


def in_terminal(*args: str, **env: str) -> pexpect.spawn:
    return pexpect.spawn(
        TOOLWEAVE[0], [*TOOLWEAVE[1:], *args], env=_env(**env), cwd=str(HERE),
        encoding="utf-8", timeout=60, dimensions=(40, 80),
    )  # fmt: skip


def test_help_shows_human_types() -> None:
    for command in (["chat"], ["call"], ["schema"], ["mcp", "serve"], ["demo"]):
        done = run(*command, "--help", COLUMNS="200")
        assert done.returncode == 0, done.stderr
        assert "<" not in done.stdout.replace("<=", ""), done.stdout  # <bool>, <list[str]>
    chat = run("chat", "--help", COLUMNS="200").stdout
    assert "TEXT" in chat and "FLOAT" in chat and "INTEGER" in chat


def test_a_bad_option_value_reads_cleanly() -> None:
    done = run("schema", TOOLS, "--dialect", "nope", COLUMNS="200")
    assert done.returncode == 2
    assert "'nope' is not one of: openai, openai-strict, responses" in done.stderr
    assert "Value error" not in done.stderr


def test_argument_errors_are_written_for_people() -> None:
    done = run("call", TOOLS, "add", '{"a": "x"}')
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip() == (
        "error: invalid arguments for add: a: Input should be a valid integer, unable to "
        'parse string as an integer (got "x"); b: missing required argument. '
        "Its parameters: a: integer, b: integer"
    )
    assert "call the tool again" not in done.stderr  # that is the model's text


def test_debug_shows_the_tools_own_traceback() -> None:
    quiet = run("call", TOOLS, "explode", '{"reason": "disk full"}')
    assert quiet.stderr.strip() == "error: tool 'explode' failed: boom: disk full"
    loud = run("call", TOOLS, "explode", '{"reason": "disk full"}', TOOLWEAVE_DEBUG="1")
    assert loud.returncode == 1
    assert 'sample_tools.py", line' in loud.stderr and "in explode" in loud.stderr
    assert "RuntimeError: boom: disk full" in loud.stderr
    chat = run("chat", "-t", TOOLS, "-p", f"{TOOLS}:failing_model", "-M", "go", TOOLWEAVE_DEBUG="1")
    assert chat.returncode == 0, chat.stderr
    assert "in explode" in chat.stderr and "RuntimeError: boom: disk full" in chat.stderr


def test_model_and_message_flags_are_not_confused() -> None:
    done = run("chat", "-t", TOOLS, "-m", "What is the weather in Paris?")
    assert done.returncode == 1
    assert "-m/--model takes a model name" in done.stderr and "-M/--message" in done.stderr


def test_output_to_a_pipe_or_file_is_not_wrapped() -> None:
    done = run("chat", "-t", TOOLS, "-p", f"{TOOLS}:locating_model", "-M", "Where?")
    assert done.returncode == 0, done.stderr
    assert len(LONG_PATH) > 80
    lines = done.stdout.splitlines()
    assert any(line.startswith("tool result") and line.endswith(LONG_PATH) for line in lines)
    assert f"assistant> The report is at {LONG_PATH}." in lines


def test_piped_input_does_not_run_onto_the_prompt() -> None:
    done = run("chat", "-t", TOOLS, "-p", f"{TOOLS}:scripted_model", stdin="Weather?\n")
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "user> Weather?", done.stdout
    assert lines[1].startswith("tool call get_weather(")
    assert lines[-2] == "assistant> It is sunny in Paris." and lines[-1] == "user> "


def test_a_failing_tools_warning_follows_its_tool_call_line() -> None:
    child = in_terminal("chat", "-t", TOOLS, "-p", f"{TOOLS}:failing_model", "-M", "go")
    child.expect(pexpect.EOF)
    screen = ANSI.sub("", child.before).replace("\r\n", "\n")
    call = screen.index("tool call explode")
    warning = screen.index("warning: tool 'explode' failed: RuntimeError: boom: disk full")
    error = screen.index("tool error id=c1 boom: disk full")
    assert call < warning and call < error, screen  # both follow the call line
    child.close()
    assert child.exitstatus == 0


@pytest.fixture
def fake_local(tmp_path: Path) -> dict[str, str]:
    """The local provider on a stand-in llama-server (answers /health; chat requests 404)."""
    binary = tmp_path / "llama-server"
    binary.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_LLAMA}" "$@"\n')
    binary.chmod(binary.stat().st_mode | stat.S_IEXEC)
    model = tmp_path / "tiny.gguf"
    model.write_bytes(b"GGUF")
    return {
        "TOOLWEAVE_LLAMA_SERVER": str(binary),
        "TOOLWEAVE_LOCAL_MODEL": str(model),
        "TOOLWEAVE_CACHE_DIR": str(tmp_path / "cache"),
    }


def test_the_local_provider_warns_that_it_ignores_a_model_name(
    fake_local: dict[str, str],
) -> None:
    done = run("chat", "-t", TOOLS, "-p", "local", "-m", "gpt-4o", "-M", "hi", **fake_local)
    assert "the local provider serves SmolLM2-135M only: --model 'gpt-4o' is ignored" in (
        done.stderr
    )
    assert "probing the model's tool calling" in done.stderr  # said before the probe runs


def test_interactive_chat_says_it_is_probing(fake_local: dict[str, str]) -> None:
    child = in_terminal("chat", "-t", TOOLS, "-p", "local", **fake_local)
    child.expect("probing the model's tool calling")  # shown while the probe runs
    child.expect("probe: native tool calls no")
    child.expect("user>")
    child.sendeof()
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0


def test_a_terminated_chat_stops_its_local_server(fake_local: dict[str, str]) -> None:
    """`kill` (SIGTERM) ends the command like Ctrl-C: the llama-server it started is stopped
    (no terminal here, so no SIGHUP would do it)."""
    import signal
    import time

    import httpx2

    proc = subprocess.Popen(
        [*TOOLWEAVE, "chat", "-t", TOOLS, "-p", "local"],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        env=_env(**fake_local), cwd=HERE, start_new_session=True,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        health = None
        for line in proc.stderr:
            found = re.search(r"at (http://127\.0\.0\.1:\d+)/v1", line)
            if found:
                health = f"{found.group(1)}/health"
            if line.startswith("probe:"):
                break  # now waiting for input
        assert health is not None and httpx2.get(health, timeout=5).status_code == 200
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 128 + signal.SIGTERM
    finally:
        if proc.poll() is None:
            proc.kill()
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            httpx2.get(health, timeout=1)
        except httpx2.TransportError:
            return  # the server is gone with the command
        time.sleep(0.2)
    pytest.fail("the local llama-server outlived the terminated command")
