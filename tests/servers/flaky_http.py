"""A loopback HTTP server that fails the first N requests: by dropping the connection
without an answer (a transient failure), or by answering an error status."""

from __future__ import annotations

import json
import socket
import struct
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field


@dataclass
class Flaky:
    """What the server does and what it saw: `failures` requests fail (`mode` "drop" or
    "status"), the rest are answered 200 with a JSON body."""

    failures: int
    mode: str = "drop"
    status: int = 500
    url: str = ""
    requests: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def count(self) -> int:
        """How many requests reached the server."""
        with self.lock:
            return len(self.requests)


def _read_request(conn: socket.socket) -> bytes:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value.strip())
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            break
        body += chunk
    return head + b"\r\n\r\n" + body


def _reply(status: int, payload: object) -> bytes:
    body = json.dumps(payload).encode()
    reason = {200: "OK", 500: "Internal Server Error", 503: "Service Unavailable"}.get(status, "X")
    return (
        f"HTTP/1.1 {status} {reason}\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode() + body


@contextmanager
def flaky_server(failures: int, mode: str = "drop", status: int = 500) -> Iterator[Flaky]:
    """Serve on 127.0.0.1 until the block ends; yields the `Flaky` record (`url` set)."""
    state = Flaky(failures, mode, status)
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    listener.settimeout(0.1)
    state.url = f"http://127.0.0.1:{listener.getsockname()[1]}"
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with conn:
                conn.settimeout(5)
                try:
                    request = _read_request(conn)
                except OSError:
                    continue
                if not request:
                    continue
                with state.lock:
                    state.requests.append(request)
                    n = len(state.requests)
                if n <= state.failures and state.mode == "drop":
                    # close without answering: the client sees the connection dropped
                    conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    continue
                if n <= state.failures:
                    conn.sendall(_reply(state.status, {"error": "try later"}))
                    continue
                conn.sendall(_reply(200, {"ok": True, "attempt": n}))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        stop.set()
        thread.join(5)
        listener.close()
