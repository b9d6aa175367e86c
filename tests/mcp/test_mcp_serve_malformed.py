"""`toolweave mcp serve` (stdio) answers malformed requests that carry an id with a JSON-RPC
error instead of dropping them (issue #14, item 21), and a request over
``--max-message-bytes`` unread (issue #27, item 15); the session goes on. A real subprocess,
raw lines on its stdin (and HTTP bodies for the limit)."""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_support import TOOLWEAVE, start_server

from toolweave.mcp._stdio_guard import check_message

SRC = str(Path(__file__).resolve().parents[2] / "src")
WAIT = 30.0  # a hang guard only


class Wire:
    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self.proc = proc

    def send(self, line: str | dict[str, Any]) -> None:
        text = line if isinstance(line, str) else json.dumps(line)
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode() + b"\n")
        self.proc.stdin.flush()

    def receive(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], WAIT)
        assert ready, "no answer from the server"
        return json.loads(self.proc.stdout.readline())  # type: ignore[no-any-return]

    def ask(self, line: str | dict[str, Any]) -> dict[str, Any]:
        self.send(line)
        return self.receive()


ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([SRC, os.environ.get("PYTHONPATH", "")])}


@pytest.fixture
def wire() -> Iterator[Wire]:
    yield from serve_wire()


def serve_wire(*options: str) -> Iterator[Wire]:
    """`toolweave mcp serve` over stdio, initialized, closed and awaited at the end."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "toolweave", "mcp", "serve", TOOLWEAVE, *options],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=ENV,
    )
    w = Wire(proc)
    try:
        init = w.ask(
            {
                "jsonrpc": "2.0",
                "id": 0,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
        )
        assert init["id"] == 0 and "result" in init
        w.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        yield w
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        start = time.monotonic()
        try:
            proc.wait(WAIT)
        finally:
            if proc.poll() is None:
                proc.kill()
        assert time.monotonic() - start < WAIT  # stdin closed: the server ends


DEEP = "[" * 100_000 + "]" * 100_000
MALFORMED = [
    ('{"jsonrpc":"2.0","id":1,"method":"tools/call","params":"x"}', -32600, 1, "params"),
    ('{"jsonrpc":"2.0","id":"two","method":"tools/list","params":[1]}', -32600, "two", "params"),
    ('{"jsonrpc":"2.0","id":{"a":1},"method":"tools/list"}', -32600, None, "id"),
    ('{"jsonrpc":"2.0","id":1.5,"method":"tools/list"}', -32600, None, "id"),
    ('[{"jsonrpc":"2.0","id":3,"method":"tools/list"}]', -32600, None, "batch"),
    (
        '{"jsonrpc":"2.0","id":4,"method":"tools/call","params":{"a":' + DEEP + "}}",
        -32600,
        4,
        "deep",
    ),
    (
        '{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"a":'
        + "[" * 300
        + "]" * 300
        + "}}",
        -32600,
        5,
        "deep",
    ),
    ('{"jsonrpc":"2.0","id":6,', -32700, None, "Parse error"),
    ('{"id":7,"method":"tools/list"}', -32600, 7, "jsonrpc"),
    ('{"jsonrpc":"2.0","id":8,"method":5}', -32600, 8, "method"),
]


def test_malformed_requests_get_a_json_rpc_error_and_the_session_goes_on(wire: Wire) -> None:
    for line, code, expected_id, word in MALFORMED:
        answer = wire.ask(line)
        assert answer["id"] == expected_id, (line[:80], answer)
        assert answer["error"]["code"] == code, (line[:80], answer)
        assert word.lower() in answer["error"]["message"].lower() or word in ("batch", "deep")
    listing = wire.ask({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})
    assert listing["id"] == 9 and listing["result"]["tools"]
    called = wire.ask(
        {
            "jsonrpc": "2.0",
            "id": 10,
            "method": "tools/call",
            "params": {"name": "add", "arguments": {"a": 2, "b": 3}},
        }
    )
    assert called["id"] == 10 and called["result"]["content"][0]["text"] == "5"


def test_nesting_the_sdk_accepts_is_served() -> None:
    ok = '{"jsonrpc":"2.0","id":1,"method":"x","params":{"a":' + "[" * 198 + "]" * 198 + "}}"
    assert check_message(ok) is None


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=300) | st.binary(max_size=300).map(lambda b: b.decode("latin-1")))
def test_check_message_never_raises(text: str) -> None:
    problem = check_message(text)
    if problem is not None:
        assert problem.code in (-32600, -32700)


def test_a_lone_surrogate_in_the_arguments_is_answered_as_u_fffd(wire: Wire) -> None:
    # json.loads accepts "\ud800" but the SDK's parser refuses it and answered nothing: the
    # client waited forever. A valid pair (an escaped emoji) stays as it is.
    line = (
        '{"jsonrpc":"2.0","id":11,"method":"tools/call",'
        '"params":{"name":"shout","arguments":{"text":"a\\ud800b \\ud83d\\ude00"}}}'
    )
    called = wire.ask(line)
    assert called["id"] == 11, called
    assert called["result"]["content"][0]["text"] == "A\ufffdB \U0001f600"


def peak_rss(pid: int) -> int:
    """The process's peak resident set size in bytes (Linux: VmHWM)."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


def call_line(msg_id: int, text: str) -> str:
    params = {"name": "shout", "arguments": {"text": text}}
    return json.dumps({"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params})


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc")
def test_a_request_line_over_the_limit_is_refused_unread(wire: Wire) -> None:
    # One 150 MiB line took the server from 148 MB to 847 MB. Over max_message_bytes (4 MiB
    # by default) it is skipped to its end, a chunk at a time, and answered with -32600
    # naming the limit (the id from its first bytes); the session goes on.
    before = peak_rss(wire.proc.pid)
    wire.send(call_line(12, "x" * (150 * 1024 * 1024)))
    answer = wire.receive()
    assert answer["id"] == 12 and answer["error"]["code"] == -32600, str(answer)[:200]
    assert "max_message_bytes" in answer["error"]["message"]
    grown = peak_rss(wire.proc.pid) - before
    assert grown < 64 * 1024 * 1024, grown  # generous: the line was 150 MiB
    called = wire.ask(call_line(13, "still here"))
    assert called["id"] == 13 and called["result"]["content"][0]["text"] == "STILL HERE"


def test_max_message_bytes_is_an_option_of_mcp_serve() -> None:
    for w in serve_wire("--max-message-bytes", "2000"):
        accepted = w.ask(call_line(20, "y" * 1800))
        assert accepted["result"]["content"][0]["text"] == "Y" * 1800
        refused = w.ask(call_line(21, "y" * 2000))
        assert refused["id"] == 21 and refused["error"]["code"] == -32600
        assert "over 2000 bytes" in refused["error"]["message"]


def test_max_message_bytes_caps_a_streamable_http_body() -> None:
    # Over HTTP the SDK's body limit (413 before parsing) is set from the same option.
    options = ["--transport", "http", "--max-message-bytes", "100000", "--port"]
    server = start_server(
        ["-m", "toolweave", "mcp", "serve", TOOLWEAVE, *options],
        env={"PYTHONPATH": ENV["PYTHONPATH"]},
    )
    try:
        url = f"http://127.0.0.1:{server.port}/mcp"
        headers = {"accept": "application/json, text/event-stream"}
        with httpx2.Client(timeout=WAIT) as http:
            big = http.post(url, content=call_line(1, "z" * 200_000), headers=headers)
            assert big.status_code == 413
            init = {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "initialize",
                "params": {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {},
                    "clientInfo": {"name": "raw", "version": "1"},
                },
            }
            small = http.post(url, json=init, headers=headers)
            assert small.status_code == 200
    finally:
        server.stop()
