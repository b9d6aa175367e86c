"""The official TypeScript SDK client (npm ``@modelcontextprotocol/sdk``) lists and calls
toolweave-served tools, and sees outputSchema, structuredContent and progress."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from mcp_support import free_port, wait_for_port
from npm_support import TS_SDK, script_beside

HERE = Path(__file__).resolve().parent
SERVER_MODULE = str(HERE.parent / "servers/mcp_typed_server.py")


def test_typescript_sdk_client_sees_typed_tools_and_progress() -> None:
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
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    tools = {t["name"]: t for t in seen["tools"]}
    assert set(tools) == {"weather", "count"}
    assert tools["weather"]["outputSchema"]["properties"].keys() == {"city", "celsius"}
    assert "outputSchema" not in tools["count"]
    assert seen["weather"]["structuredContent"] == {"city": "Oslo", "celsius": 21.5}
    assert "Oslo" in seen["weather"]["content"][0]["text"]
    assert seen["progress"] == [1, 2, 3]
    assert seen["counted"]["content"][0]["text"] == "counted to 3"
    assert seen["failed"]["isError"] is True  # a missing argument, reported to the model
    assert seen["server"]["name"] == "typed"
