"""Helpers for the MCP tests: real servers over stdio and HTTP (127.0.0.1, free port)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

from toolweave.mcp import McpServerConfig

SERVERS = Path(__file__).resolve().parent.parent / "servers"
DEMO = str(SERVERS / "mcp_demo_server.py")
ECHO = str(SERVERS / "mcp_echo_server.py")
BROKEN = str(SERVERS / "mcp_broken_server.py")
TOOLWEAVE = str(SERVERS / "mcp_toolweave_server.py")
MODERN_ONLY = str(SERVERS / "mcp_modern_only_server.py")

# Generous bounds: no test asserts on timing, these only stop a hang.
TEST_TIMEOUT = 90.0


def stdio_config(script: str, *args: str, name: str = "demo", **kw: object) -> McpServerConfig:
    """A stdio config running `script` with this interpreter."""
    env = kw.pop("env", None)
    params: dict[str, object] = {"command": sys.executable, "args": [script, *args]}
    if env is not None:
        params["env"] = env
    kw.setdefault("connect_timeout", 30.0)
    return McpServerConfig(server_name=name, client_type="stdio", params=params, **kw)  # type: ignore[arg-type]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, proc: subprocess.Popen[bytes], timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"server exited with {proc.returncode} before listening")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"server did not listen on {port} within {timeout} s")


class ServerProcess:
    """A server subprocess on 127.0.0.1; `restart` starts it again on the same port."""

    def __init__(self, argv: list[str], port: int, env: dict[str, str] | None = None) -> None:
        self.argv = argv
        self.port = port
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> ServerProcess:
        env = {**os.environ, **(self.env or {})}
        self.proc = subprocess.Popen(
            [sys.executable, *self.argv, str(self.port)],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port, self.proc)
        return self

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.proc = None

    def restart(self) -> None:
        self.stop()
        self.start()


def start_server(argv: list[str], env: dict[str, str] | None = None) -> ServerProcess:
    return ServerProcess(argv, free_port(), env).start()


def file_appears(path: Path, timeout: float = 30.0) -> bool:
    """Poll for `path` (a marker a test server writes); False after `timeout`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists():
            return True
        time.sleep(0.05)
    return False
