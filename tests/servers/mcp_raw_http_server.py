"""A hand-written streamable HTTP "MCP server" (stdlib only) answering every request with
one server-sent event. Its tool ``big`` returns a text of ``size`` bytes, so a test can send
an event larger than a client accepts. ``python mcp_raw_http_server.py [modern] PORT``: with
``modern`` it speaks only 2026-07-28 (``server/discover``; ``initialize`` refused) and its
results carry no ``resultType`` (nor ``ttlMs`` / ``cacheScope``)."""

from __future__ import annotations

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

MODERN = "2026-07-28" if "modern" in sys.argv[1:-1] else ""


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _empty(self, status: int) -> None:
        self.send_response(status)
        self.send_header("content-length", "0")
        self.end_headers()

    def do_GET(self) -> None:  # no standalone stream
        self._empty(405)

    def do_DELETE(self) -> None:
        self._empty(200)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if "id" not in message:
            self._empty(202)
            return
        method = message["method"]
        result: dict[str, Any] = {}
        answer: dict[str, Any] | None = None
        if MODERN and method == "initialize":
            error = {"code": -32022, "message": "unsupported", "data": {"supported": [MODERN]}}
            answer = {"jsonrpc": "2.0", "id": message["id"], "error": error}
        elif method == "server/discover":
            result = {"supportedVersions": [MODERN], "capabilities": {"tools": {}}}
        elif method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw-http", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "big", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            text = "x" * int(message["params"]["arguments"]["size"])
            result = {"content": [{"type": "text", "text": text}]}
        data = json.dumps(answer or {"jsonrpc": "2.0", "id": message["id"], "result": result})
        body = b"event: message\ndata: " + data.encode() + b"\n\n"
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


if __name__ == "__main__":
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[-1])), Handler).serve_forever()
