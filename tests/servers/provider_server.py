"""A scripted provider server for the provider tests: a Starlette app run by uvicorn on
127.0.0.1 (free port) in a background thread.

Each request pops the next scripted response (FIFO; a response with `"repeat": true` stays)
and is recorded (method, path, query, headers, raw and decoded body). A response is a dict:

- `status` (default 200), `headers` (dict);
- one of `json` (an object, serialised compactly), `body` (text), `sse` (a list of raw
  strings, each written as its own chunk, byte for byte), or `frames` (a list of bytes, an
  AWS event stream, each written as its own chunk);
- `cut: true` drops the connection after the chunks, without ending the chunked body.

Transcripts (tests/transcripts/*/*.json) hold `exchanges`: `[{"request": {...expected...},
"response": {...}}]`; `enqueue_transcript` queues their responses.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

TRANSCRIPTS = Path(__file__).resolve().parent.parent / "transcripts"


def load_transcript(name: str) -> dict[str, Any]:
    """The transcript `tests/transcripts/<name>.json`."""
    return json.loads((TRANSCRIPTS / f"{name}.json").read_text(encoding="utf-8"))  # type: ignore[no-any-return]


@dataclass
class RecordedRequest:
    """What the server received."""

    method: str
    path: str
    query: str
    headers: dict[str, str]
    raw: bytes
    body: Any = None
    raw_path: str = ""
    """The path as sent (percent-encoding kept)."""


class _ScriptedResponse(Response):
    def __init__(self, spec: dict[str, Any]) -> None:
        self.spec = spec
        super().__init__()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        spec = self.spec
        headers = {k.lower(): str(v) for k, v in (spec.get("headers") or {}).items()}
        chunks: list[bytes]
        if "frames" in spec:
            headers.setdefault("content-type", "application/vnd.amazon.eventstream")
            chunks = list(spec["frames"])
        elif "sse" in spec:
            headers.setdefault("content-type", "text/event-stream")
            chunks = [c.encode("utf-8") for c in spec["sse"]]
        elif "json" in spec:
            headers.setdefault("content-type", "application/json")
            chunks = [json.dumps(spec["json"], ensure_ascii=False).encode("utf-8")]
        else:
            headers.setdefault("content-type", "text/plain")
            chunks = [str(spec.get("body", "")).encode("utf-8")]
        if not spec.get("cut") and "sse" not in spec and "frames" not in spec:
            headers["content-length"] = str(sum(len(c) for c in chunks))
        await send(
            {
                "type": "http.response.start",
                "status": int(spec.get("status", 200)),
                "headers": [(k.encode(), v.encode()) for k, v in headers.items()],
            }
        )
        for chunk in chunks:
            await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await asyncio.sleep(0)
        if spec.get("cut"):
            # Returning without the final body message makes uvicorn drop the connection
            # mid-body: the client sees an incomplete chunked read.
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


@dataclass
class ProviderServer:
    """The running server: `url`, the response queue and the recorded requests."""

    host: str = "127.0.0.1"
    port: int = 0
    queue: deque[dict[str, Any]] = field(default_factory=deque)
    requests: list[RecordedRequest] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def url(self) -> str:
        """`http://127.0.0.1:<port>`."""
        return f"http://{self.host}:{self.port}"

    def reset(self) -> None:
        """Forget queued responses and recorded requests."""
        with self.lock:
            self.queue.clear()
            self.requests.clear()

    def enqueue(self, *responses: dict[str, Any]) -> None:
        """Queue responses."""
        with self.lock:
            self.queue.extend(responses)

    def enqueue_transcript(self, transcript: dict[str, Any] | str) -> dict[str, Any]:
        """Queue every response of a transcript (a name or the loaded dict); return it."""
        data = load_transcript(transcript) if isinstance(transcript, str) else transcript
        self.enqueue(*(exchange["response"] for exchange in data["exchanges"]))
        return data

    @property
    def bodies(self) -> list[Any]:
        """The decoded request bodies received so far."""
        with self.lock:
            return [r.body for r in self.requests]

    async def handle(self, request: Request) -> Response:
        raw = await request.body()
        try:
            body: Any = json.loads(raw) if raw else None
        except ValueError:
            body = raw.decode("utf-8", "replace")
        with self.lock:
            self.requests.append(
                RecordedRequest(
                    method=request.method,
                    path=request.url.path,
                    query=request.url.query,
                    headers={k.lower(): v for k, v in request.headers.items()},
                    raw=raw,
                    body=body,
                    raw_path=request.scope.get("raw_path", b"").decode("latin-1"),
                )
            )
            if not self.queue:
                spec: dict[str, Any] = {
                    "status": 418,
                    "json": {"error": {"message": "no scripted response left"}},
                }
            elif self.queue[0].get("repeat"):
                spec = self.queue[0]
            else:
                spec = self.queue.popleft()
        return _ScriptedResponse(spec)


class RunningServer:
    """Runs a `ProviderServer` with uvicorn in a daemon thread."""

    def __init__(self) -> None:
        self.state = ProviderServer()
        app = Starlette(routes=[Route("/{path:path}", self.state.handle, methods=["GET", "POST"])])
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.state.port = sock.getsockname()[1]
        self._sock = sock
        config = uvicorn.Config(app, log_level="critical", lifespan="off", timeout_keep_alive=30)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=self.server.run, kwargs={"sockets": [sock]}, daemon=True
        )

    def start(self) -> ProviderServer:
        self.thread.start()
        for _ in range(500):
            if self.server.started:
                return self.state
            threading.Event().wait(0.01)
        raise RuntimeError("the provider test server did not start")

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=5)
        self._sock.close()
