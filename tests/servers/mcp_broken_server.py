"""Misbehaving "MCP servers" for failure tests.

``python mcp_broken_server.py MODE`` with MODE:

- ``garbage``: answers every line on stdin with text that is not JSON-RPC;
- ``crash``: exits with status 3 at once, after a message on stderr;
- ``silent``: reads stdin and never answers;
- ``http-garbage PORT``: an HTTP server answering every POST with 200 and invalid JSON;
- ``task-liar``: a 2025-11-25 server taking tasks whose task answers are malformed: tool
  ``bad_create`` answers ``tools/call`` with a task missing its fields, ``bad_status``
  creates a task that ``tasks/get`` then reports in a status that does not exist;
- ``task-storm``: a 2025-11-25 server taking tasks that never end: tool ``storm`` creates
  one and sends a flood of ``notifications/tasks/status`` (``working``) for it, tool
  ``deaf`` creates one and never answers ``tasks/cancel`` for it; tool ``seen`` (a plain
  call) lists the task methods received so far.
"""

from __future__ import annotations

import json
import sys
import threading
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


def task_storm() -> None:
    stamp = {"createdAt": "2025-11-25T10:00:00Z", "lastUpdatedAt": "2025-11-25T10:00:00Z"}
    required = {"taskSupport": "required"}
    tools = [
        {"name": n, "inputSchema": {"type": "object"}, "execution": required}
        for n in ("storm", "deaf")
    ] + [{"name": "seen", "inputSchema": {"type": "object"}}]
    lock = threading.Lock()
    seen: list[str] = []
    kinds: dict[str, str] = {}
    cancelled: set[str] = set()

    def send(message: dict[str, object]) -> None:
        with lock:
            sys.stdout.write(json.dumps(message) + "\n")
            sys.stdout.flush()

    def task(task_id: str, status: str = "working") -> dict[str, object]:
        return {"taskId": task_id, "status": status, "ttl": None, "pollInterval": 60_000} | stamp

    def flood(task_id: str) -> None:
        note = {"method": "notifications/tasks/status", "params": task(task_id)}
        n = 0
        while task_id not in cancelled and n < 300_000:
            send({"jsonrpc": "2.0"} | note)
            n += 1

    for line in sys.stdin:
        msg = json.loads(line)
        method, params = msg.get("method"), msg.get("params") or {}
        if "id" not in msg or method is None:
            continue
        if method.startswith("tasks/"):
            seen.append(method)
        result: dict[str, object]
        if method == "initialize":
            caps = {"tools": {}, "tasks": {"cancel": {}, "requests": {"tools": {"call": {}}}}}
            info = {"name": "storm", "version": "1"}
            result = {"protocolVersion": "2025-11-25", "capabilities": caps, "serverInfo": info}
        elif method == "tools/list":
            result = {"tools": tools}
        elif method == "tools/call" and params.get("name") == "seen":
            result = {"content": [{"type": "text", "text": json.dumps(seen)}]}
        elif method == "tools/call":
            task_id = f"t{len(kinds) + 1}"
            kinds[task_id] = params.get("name")
            result = {"task": task(task_id)}
            if kinds[task_id] == "storm":
                send({"jsonrpc": "2.0", "id": msg["id"], "result": result})
                threading.Thread(target=flood, args=(task_id,), daemon=True).start()
                continue
        elif method == "tasks/get":
            result = task(params["taskId"])
        elif method == "tasks/cancel":
            cancelled.add(params["taskId"])
            if kinds.get(params["taskId"]) == "deaf":
                continue  # never answered
            result = task(params["taskId"], "cancelled")
        else:
            result = {}
        send({"jsonrpc": "2.0", "id": msg["id"], "result": result})


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
    elif mode == "task-storm":
        task_storm()
    else:
        raise SystemExit(f"unknown mode {mode}")
