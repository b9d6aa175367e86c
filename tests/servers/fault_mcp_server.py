"""A hand-written stdio MCP server (raw JSON-RPC lines) that misbehaves on demand.

``python fault_mcp_server.py [MODE]``; MODE ``crash-at-start`` exits before reading anything,
``crash-after-init`` exits right after answering ``initialize``; ``silent-list`` never
answers ``tools/list``; otherwise it serves.

Every message received is appended as one JSON line to the file named by
``FAULT_MCP_LOG`` (so tests count calls and see ``notifications/cancelled``). Tools:

- ``ok(x)``: answers ``"ok <x>"``;
- ``hang``: never answers;
- ``crash``: the process exits mid-call;
- ``garbage``: writes a line that is not JSON-RPC (and then nothing);
- ``wrong_id``: answers with an id nobody asked for (and then nothing);
- ``bad_result``: a JSON-RPC result that is not a ``CallToolResult``;
- ``rpc_error``: a JSON-RPC error ``-32603``;
- ``half_line``: writes half a JSON message and exits.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

TOOLS = ["ok", "hang", "crash", "garbage", "wrong_id", "bad_result", "rpc_error", "half_line"]


def _log(message: Any) -> None:
    path = os.environ.get("FAULT_MCP_LOG")
    if path:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(message) + "\n")


def _send(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def _tool(name: str) -> dict[str, Any]:
    props = {"x": {"type": "string"}} if name == "ok" else {}
    return {
        "name": name,
        "description": f"The {name} fault.",
        "inputSchema": {"type": "object", "properties": props},
    }


def _call(msg_id: Any, name: str, args: dict[str, Any]) -> None:
    if name == "ok":
        _send(
            {
                "jsonrpc": "2.0",
                "id": msg_id,
                "result": {"content": [{"type": "text", "text": f"ok {args.get('x', '')}"}]},
            }
        )
    elif name == "hang":
        return
    elif name == "crash":
        os._exit(4)
    elif name == "garbage":
        sys.stdout.write("<<< this is not json-rpc >>>\n")
        sys.stdout.flush()
    elif name == "wrong_id":
        _send({"jsonrpc": "2.0", "id": 987654321, "result": {"content": []}})
    elif name == "bad_result":
        _send({"jsonrpc": "2.0", "id": msg_id, "result": {"content": "not a list"}})
    elif name == "rpc_error":
        _send({"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32603, "message": "it broke"}})
    elif name == "half_line":
        sys.stdout.write('{"jsonrpc": "2.0", "id": ')
        sys.stdout.flush()
        os._exit(5)
    else:
        _send(
            {"jsonrpc": "2.0", "id": msg_id, "error": {"code": -32602, "message": "unknown tool"}}
        )


def main(mode: str) -> None:
    if mode == "crash-at-start":
        sys.stderr.write("fault server: crashing at start\n")
        sys.exit(3)
    for line in sys.stdin:
        line = line.strip()
        if not line:
            continue
        message = json.loads(line)
        _log(message)
        method = message.get("method")
        msg_id = message.get("id")
        if method == "initialize":
            params = message.get("params") or {}
            _send(
                {
                    "jsonrpc": "2.0",
                    "id": msg_id,
                    "result": {
                        "protocolVersion": params.get("protocolVersion", "2025-06-18"),
                        "capabilities": {"tools": {}},
                        "serverInfo": {"name": "fault", "version": "1.0"},
                    },
                }
            )
            if mode == "crash-after-init":
                os._exit(6)
        elif method == "tools/list":
            if mode == "silent-list":
                continue
            _send({"jsonrpc": "2.0", "id": msg_id, "result": {"tools": [_tool(n) for n in TOOLS]}})
        elif method == "tools/call":
            params = message.get("params") or {}
            _call(msg_id, params.get("name", ""), params.get("arguments") or {})
        elif method == "ping":
            _send({"jsonrpc": "2.0", "id": msg_id, "result": {}})
        elif msg_id is not None:
            _send(
                {
                    "jsonrpc": "2.0",
                    "id": msg_id,
                    "error": {"code": -32601, "message": f"no method {method}"},
                }
            )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "serve")
