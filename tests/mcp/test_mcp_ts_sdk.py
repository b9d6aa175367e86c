"""The official TypeScript SDK client (npm ``@modelcontextprotocol/sdk``) lists and calls
toolweave-served tools, and sees outputSchema, structuredContent and progress."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_support import free_port, wait_for_port
from npm_support import TS_SDK, script_beside

HERE = Path(__file__).resolve().parent
SERVER_MODULE = str(HERE.parent / "servers/mcp_typed_server.py")


@pytest.fixture(scope="module")
def seen() -> dict[str, Any]:
    """What the TypeScript client saw (one server, one client run for the module)."""
    script = script_beside(TS_SDK, HERE / "ts_sdk_client.mjs")
    port = free_port()
    argv = [sys.executable, "-m", "toolweave", "mcp", "serve", SERVER_MODULE, "--transport"]
    server = subprocess.Popen(
        [*argv, "http", "--port", str(port), "--name", "typed"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, server)  # type: ignore[arg-type]
        proc = subprocess.run(
            ["node", str(script), f"http://127.0.0.1:{port}/mcp"],
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        server.terminate()
        server.wait(10)
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return seen


def test_typescript_sdk_client_sees_typed_tools_and_progress(seen: dict[str, Any]) -> None:
    tools = {t["name"]: t for t in seen["tools"]}
    assert set(tools) == {"weather", "count", "stats"}
    assert tools["weather"]["outputSchema"]["properties"].keys() == {"city", "celsius"}
    assert "outputSchema" not in tools["count"]
    assert seen["weather"]["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    assert "Oslo" in seen["weather"]["content"][0]["text"]
    assert seen["progress"] == [1, 2, 3]
    assert seen["counted"]["content"][0]["text"] == "counted to 3"
    assert seen["failed"]["isError"] is True  # a missing argument, reported to the model
    assert seen["server"]["name"] == "typed"


def test_typescript_sdk_client_accepts_a_result_that_broke_its_output_schema(
    seen: dict[str, Any],
) -> None:
    """A served tool declared ``-> Stats`` returns ``{"nope": key}``: the client gets an
    isError result saying so (not structured content it must reject, text and all)."""
    broken = seen["broken"]
    assert "thrown" not in broken, broken
    assert broken["isError"] is True
    assert "structuredContent" not in broken
    text = broken["content"][0]["text"]
    assert "broke its declared output type Stats" in text and "hits" in text
