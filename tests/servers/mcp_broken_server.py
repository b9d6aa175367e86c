"""Misbehaving "MCP servers" for failure tests.

``python mcp_broken_server.py MODE`` with MODE:

- ``garbage``: answers every line on stdin with text that is not JSON-RPC;
- ``crash``: exits with status 3 at once, after a message on stderr;
- ``silent``: reads stdin and never answers;
- ``http-garbage PORT``: an HTTP server answering every POST with 200 and invalid JSON;
- ``task-liar``: a 2025-11-25 server taking tasks whose task answers are malformed: tool
  ``bad_create`` answers ``tools/call`` with a task missing its fields, ``bad_status``
  creates a task that ``tasks/get`` then reports in a status that does not exist.
"""

from __future__ import annotations

import json
import sys
import time


def garbage() -> None:
    for _line in sys.stdin:
        sys.stdout.write("this is not json-rpc {\n")
        sys.stdout.flush()


def silent() -> None:
    for _line in sys.stdin:
        pass
    time.sleep(0.1)


def task_liar() -> None:
    task = {"taskId": "t1", "status": "working", "ttl": None, "pollInterval": 10}
    task |= {"createdAt": "2025-11-25T10:00:00Z", "lastUpdatedAt": "2025-11-25T10:00:00Z"}
    required = {"taskSupport": "required"}
    tools = [
        {"name": n, "inputSchema": {"type": "object"}, "execution": required}
        for n in ("bad_create", "bad_status")
    ]
    for line in sys.stdin:
        msg = json.loads(line)
        method, params = msg.get("method"), msg.get("params") or {}
        if "id" not in msg or method is None:
            continue
        result: dict[str, object]
        if method == "initialize":
            caps = {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}
            info = {"name": "liar", "version": "1"}
            result = {"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": info}
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call" and params.get("name") == "bad_create":
            result = {"task": {"taskId": 7}}
        elif method == "tools/call":
            result = {"task": task}
        elif method == "tasks/get":
            result = {**task, "status": "exploded"}
        else:  # tasks/cancel, and anything else
            result = {**task, "status": "cancelled"}
        sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}) + "\n")
        sys.stdout.flush()


def http_garbage(port: int) -> None:
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            self.rfile.read(length)
            body = b"{not valid json"
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self) -> None:
            self.send_response(405)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    ThreadingHTTPServer(("127.0.0.1", port), Handler).serve_forever()


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "garbage":
        garbage()
    elif mode == "crash":
        sys.stderr.write("broken server: failing at start\n")
        sys.exit(3)
    elif mode == "silent":
        silent()
    elif mode == "http-garbage":
        http_garbage(int(sys.argv[2]))
    elif mode == "task-liar":
        task_liar()
    else:
        raise SystemExit(f"unknown mode {mode}")
