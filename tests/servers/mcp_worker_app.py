"""The Python-API deployment of tests/mcp/test_mcp_serve_workers.py: an ASGI app built
with `mcp_http_app`, served by `serve_mcp_workers` (each worker imports this module)."""

from __future__ import annotations

import sys

from mcp_worker_tools import whoami, worker

from toolweave.mcp import mcp_http_app, serve_mcp_workers

app = mcp_http_app([whoami], features=[worker])

if __name__ == "__main__":
    serve_mcp_workers("mcp_worker_app:app", workers=2, port=int(sys.argv[1]))
