"""Misbehaving "MCP servers" for failure tests.

``python mcp_broken_server.py MODE`` with MODE:

- ``garbage``: answers every line on stdin with text that is not JSON-RPC;
- ``crash``: exits with status 3 at once, after a message on stderr;
- ``silent``: reads stdin and never answers;
- ``http-garbage PORT``: an HTTP server answering every POST with 200 and invalid JSON.
"""

from __future__ import annotations

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
    else:
        raise SystemExit(f"unknown mode {mode}")
