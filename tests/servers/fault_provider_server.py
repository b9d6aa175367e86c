"""A raw HTTP/1.1 server on 127.0.0.1 for fault injection: it can do what a well-behaved
framework cannot (reset a connection mid-body, trickle bytes, lie about lengths, close
without answering).

Each request pops the next scripted `Fault` (FIFO; `repeat=True` keeps it at the head) and
is recorded first (method, path, headers, body), so tests count attempts from the log. A
fault is a list of actions run in order on the connection:

- `("write", bytes)`: raw bytes;
- `("chunk", bytes)`: one HTTP chunk (the head must say `transfer-encoding: chunked`);
- `("end",)`: the last, empty chunk;
- `("sleep", seconds)`;
- `("reset",)`: abort with a TCP RST (`SO_LINGER` 0) and stop;
- `("close",)`: close the connection cleanly and stop.

The connection is closed after the last action. Every answer says `connection: close`, so
each attempt is a new connection.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from collections import deque
from dataclasses import dataclass
from typing import Any

Action = tuple[Any, ...]


@dataclass
class Fault:
    """A scripted behaviour for one request."""

    actions: list[Action]
    repeat: bool = False


@dataclass
class Recorded:
    """A request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes

    @property
    def json(self) -> Any:
        return json.loads(self.body) if self.body else None


def head(status: int, headers: dict[str, str] | None = None, reason: str = "X") -> bytes:
    """A response head ending with the blank line."""
    lines = [f"HTTP/1.1 {status} {reason}"]
    merged = {"connection": "close", **(headers or {})}
    lines.extend(f"{k}: {v}" for k, v in merged.items())
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def respond(
    status: int,
    body: bytes | str,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
    *,
    declared_length: int | None = None,
    repeat: bool = False,
) -> Fault:
    """A complete response (or, with `declared_length` larger than the body, a truncated one:
    the head promises more bytes than are sent before the close)."""
    data = body.encode("utf-8") if isinstance(body, str) else body
    length = len(data) if declared_length is None else declared_length
    h = {"content-type": content_type, "content-length": str(length), **(headers or {})}
    return Fault([("write", head(status, h) + data)], repeat=repeat)


def json_error(
    status: int, message: str = "boom", headers: dict[str, str] | None = None, repeat: bool = False
) -> Fault:
    """A JSON error body in the OpenAI shape."""
    body = json.dumps({"error": {"message": message, "type": "server_error"}})
    return respond(status, body, headers=headers, repeat=repeat)


def sse_head(headers: dict[str, str] | None = None) -> Action:
    """The head of a chunked `text/event-stream` 200 answer."""
    return (
        "write",
        head(
            200,
            {
                "content-type": "text/event-stream",
                "transfer-encoding": "chunked",
                **(headers or {}),
            },
        ),
    )


def chunks(*events: str) -> list[Action]:
    """Each SSE event text as its own HTTP chunk."""
    return [("chunk", e.encode("utf-8")) for e in events]


class FaultServer:
    """The server; `start()` runs it on a daemon thread, `stop()` ends it."""

    def __init__(self) -> None:
        self.queue: deque[Fault] = deque()
        self.requests: list[Recorded] = []
        self.lock = threading.Lock()
        self.port = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()
        self._conns: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def enqueue(self, *faults: Fault) -> None:
        with self.lock:
            self.queue.extend(faults)

    def reset(self) -> None:
        with self.lock:
            self.queue.clear()
            self.requests.clear()

    @property
    def attempts(self) -> int:
        with self.lock:
            return len(self.requests)

    def start(self) -> FaultServer:
        self._thread = threading.Thread(target=self._run, name="fault-provider-server", daemon=True)
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the fault server did not start")
        return self

    def stop(self) -> None:
        loop = self._loop
        if loop is not None and not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        if self._thread is not None:
            self._thread.join(5)

    def _run(self) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        self._server = loop.run_until_complete(
            asyncio.start_server(self._accept, sock=sock, backlog=512)
        )
        self._ready.set()
        try:
            loop.run_forever()
        finally:
            for task in list(self._conns):
                task.cancel()
            self._server.close()
            loop.run_until_complete(asyncio.sleep(0))
            loop.close()

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._conns.add(task)
        try:
            await self._serve(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, OSError):
            pass
        finally:
            self._conns.discard(task)
            if not writer.is_closing():
                writer.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raw = await reader.readuntil(b"\r\n\r\n")
        lines = raw.decode("latin-1").split("\r\n")
        method, path, _ = lines[0].split(" ", 2)
        headers = {}
        for line in lines[1:]:
            if ":" in line:
                k, v = line.split(":", 1)
                headers[k.strip().lower()] = v.strip()
        body = b""
        if headers.get("content-length"):
            body = await reader.readexactly(int(headers["content-length"]))
        with self.lock:
            self.requests.append(Recorded(method, path, headers, body))
            if not self.queue:
                fault = json_error(418, "no scripted response left")
            elif self.queue[0].repeat:
                fault = self.queue[0]
            else:
                fault = self.queue.popleft()
        for action in fault.actions:
            kind = action[0]
            if kind == "write":
                writer.write(action[1])
                await writer.drain()
            elif kind == "chunk":
                data = action[1]
                writer.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
                await writer.drain()
            elif kind == "end":
                writer.write(b"0\r\n\r\n")
                await writer.drain()
            elif kind == "sleep":
                await asyncio.sleep(action[1])
            elif kind == "reset":
                sock = writer.get_extra_info("socket")
                if sock is not None:
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                writer.transport.abort()
                return
            elif kind == "close":
                break
        writer.close()
