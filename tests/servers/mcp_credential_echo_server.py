"""A hand-written HTTP "MCP server" (stdlib only) that echoes the credentials it receives
(``Authorization``, ``X-API-Key``) into everything it answers: raw, JSON-escaped and
percent-encoded. Modes:

- ``challenge``: every request is answered 401 with the credentials in ``WWW-Authenticate``;
- ``echo`` (streamable HTTP): the handshake succeeds; tool ``fail`` is answered with a
  JSON-RPC error echoing them, tool ``error_result`` with an ``isError`` result echoing
  them, after a ``notifications/message`` log echoing them, tool ``echo`` with a successful
  result echoing them in its text, a text part for the user and its structured content;
- ``sse-challenge`` / ``sse-500`` (SSE transport): ``GET /sse`` is answered 401 (echo in
  ``WWW-Authenticate``) or 500 with the credentials in the status line's reason phrase.

In-process: ``with EchoingServer("echo") as url: ...``; standalone: ``python
mcp_credential_echo_server.py MODE PORT``.
"""

from __future__ import annotations

import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote


def echo_text(headers: Any) -> str:
    """The received credentials in every form a careless server may print them."""
    parts: list[str] = []
    for name in ("Authorization", "X-API-Key"):
        value = headers.get(name) or ""
        parts += [value, json.dumps({name: value}), quote(value, safe="")]
    return " | ".join(parts)


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mode = "echo"

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, body: bytes = b"", **headers: str) -> None:
        if self.mode == "sse-500" and status == 500:
            self.send_response(500, "Oops " + echo_text(self.headers).replace("\n", " "))
        else:
            self.send_response(status)
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), value)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _refuse(self) -> None:
        challenge = f'Bearer error="invalid_token", error_description="{echo_text(self.headers)}"'
        self._send(401, WWW_Authenticate=challenge)

    def do_GET(self) -> None:
        if self.mode in ("challenge", "sse-challenge"):
            self._refuse()
        elif self.mode == "sse-500":
            self._send(500)
        else:
            self._send(405)

    def do_DELETE(self) -> None:
        self._send(200)

    def do_POST(self) -> None:
        message = json.loads(self.rfile.read(int(self.headers["content-length"])))
        if self.mode != "echo":
            self._refuse()
            return
        if "id" not in message:
            self._send(202)
            return
        method = message["method"]
        events: list[dict[str, Any]] = []
        answer: dict[str, Any] = {"result": {}}
        if method == "initialize":
            answer["result"] = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}, "logging": {}},
                "serverInfo": {"name": "echo-credentials", "version": "1"},
            }
        elif method == "tools/list":
            tools = [
                {"name": n, "inputSchema": {"type": "object"}}
                for n in ("fail", "error_result", "echo")
            ]
            answer["result"] = {"tools": tools}
        elif method == "tools/call":
            text = echo_text(self.headers)
            if message["params"]["name"] == "fail":
                answer = {"error": {"code": -32603, "message": f"bad credentials: {text}"}}
            elif message["params"]["name"] == "echo":
                content = [
                    {"type": "text", "text": f"you sent {text}"},
                    {"type": "text", "text": text, "annotations": {"audience": ["user"]}},
                ]
                structured = {"request": {"headers": [text], text: "as a key"}}
                answer["result"] = {"content": content, "structuredContent": structured}
            else:
                log = {"level": "error", "logger": "auth", "data": f"client sent {text}"}
                events.append({"jsonrpc": "2.0", "method": "notifications/message", "params": log})
                content = [{"type": "text", "text": f"refused: {text}"}]
                answer["result"] = {"content": content, "isError": True}
        events.append({"jsonrpc": "2.0", "id": message["id"], **answer})
        body = b"".join(
            b"event: message\ndata: " + json.dumps(e).encode() + b"\n\n" for e in events
        )
        self._send(200, body, content_type="text/event-stream")


class EchoingServer:
    """The server on 127.0.0.1 (a free port) in a daemon thread; the context manager
    yields the base URL (``http://127.0.0.1:PORT``)."""

    def __init__(self, mode: str) -> None:
        handler = type("ModeHandler", (Handler,), {"mode": mode})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> str:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self.url

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":
    Handler.mode = sys.argv[1]
    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[2])), Handler).serve_forever()
