"""A Starlette app for HTTP tool tests: echo, content types, sizes, delays, statuses.

Every request is appended to `app.state.log` as (method, path) so tests can assert that a
request was (or was not) received.
"""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import AsyncIterator, Iterator
from contextlib import contextmanager
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route


async def _log(request: Request) -> None:
    request.app.state.log.append((request.method, request.url.path))


async def echo(request: Request) -> Response:
    await _log(request)
    raw = await request.body()
    ctype = request.headers.get("content-type", "")
    parsed: Any = None
    form: Any = None
    if ctype.startswith("application/json") and raw:
        parsed = json.loads(raw)
    elif ctype.startswith("application/x-www-form-urlencoded"):
        data = await request.form()
        form = [[k, str(v)] for k, v in data.multi_items()]
    payload = {
        "method": request.method,
        "path": request.url.path,
        "raw_path": request.scope.get("raw_path", b"").decode("latin-1"),
        "query": [[k, v] for k, v in request.query_params.multi_items()],
        "headers": dict(request.headers),
        "json": parsed,
        "form": form,
        "body": raw.decode("utf-8", errors="replace"),
    }
    if request.method == "HEAD":
        return Response(status_code=200, headers={"x-echo": "head"})
    return JSONResponse(payload, headers={"x-echo": "yes"})


_TYPED: dict[str, tuple[str, bytes]] = {
    "json": ("application/json", b'{"ok": true, "n": 1}'),
    "json-charset": ("application/json; charset=utf-8", '{"name": "café"}'.encode()),
    "problem": ("application/problem+json", b'{"title": "nope"}'),
    "vnd": ("application/vnd.api+json", b'{"data": [1, 2]}'),
    "text": ("text/plain; charset=utf-8", b"hello text"),
    "latin1": ("text/plain; charset=iso-8859-1", "café".encode("latin-1")),
    "html": ("text/html", b"<html><body><h1>Hi</h1></body></html>"),
    "xml": ("application/xml", b"<?xml version='1.0'?><root><a>1</a></root>"),
    "atom": ("application/atom+xml", b"<feed/>"),
    "empty-json": ("application/json", b""),
    "empty-text": ("text/plain", b""),
    "bad-json": ("application/json", b"this is not json {"),
    "binary": ("application/octet-stream", b"\xff\xfe\x00\x81binary"),
    "no-type": ("", b"untyped body"),
}


async def typed(request: Request) -> Response:
    await _log(request)
    ctype, body = _TYPED[request.path_params["kind"]]
    headers = {"x-custom": "custom-value"}
    response = Response(content=body, headers=headers)
    if ctype:
        response.headers["content-type"] = ctype
    else:
        del response.headers["content-type"]
    return response


async def big(request: Request) -> Response:
    await _log(request)
    size = int(request.query_params.get("size", "1000"))
    chunk = int(request.query_params.get("chunk", "4096"))

    async def body() -> AsyncIterator[bytes]:
        sent = 0
        while sent < size:
            n = min(chunk, size - sent)
            sent += n
            yield b"a" * n

    return StreamingResponse(body(), media_type="text/plain")


async def big_declared(request: Request) -> Response:
    await _log(request)
    size = int(request.query_params.get("size", "1000"))
    return Response(b"b" * size, media_type="text/plain")


async def slow(request: Request) -> Response:
    await _log(request)
    await asyncio.sleep(float(request.query_params.get("delay", "2")))
    return JSONResponse({"slow": True})


async def trickle(request: Request) -> Response:
    await _log(request)
    count = int(request.query_params.get("count", "40"))
    gap = float(request.query_params.get("gap", "0.1"))

    async def body() -> AsyncIterator[bytes]:
        for _ in range(count):
            yield b"x"
            await asyncio.sleep(gap)

    return StreamingResponse(body(), media_type="text/plain")


async def status(request: Request) -> Response:
    await _log(request)
    code = int(request.path_params["code"])
    return Response(f"error body {code}", status_code=code, media_type="text/plain")


async def redirect(request: Request) -> Response:
    await _log(request)
    target = request.query_params.get("to", "/typed/json")
    return Response(status_code=302, headers={"location": target})


async def secured(request: Request) -> Response:
    await _log(request)
    if request.headers.get("x-api-key") != "secret" or request.query_params.get("token") != "t0k":
        return JSONResponse({"error": "unauthorized"}, status_code=401)
    return JSONResponse({"authorized": True, "query": dict(request.query_params)})


def make_app() -> Starlette:
    """Build a fresh app with an empty request log."""
    app = Starlette(
        routes=[
            Route(
                "/echo/{rest:path}",
                echo,
                methods=["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"],
            ),
            Route("/typed/{kind}", typed),
            Route("/big", big),
            Route("/big-declared", big_declared),
            Route("/slow", slow),
            Route("/trickle", trickle),
            Route("/status/{code:int}", status, methods=["GET", "POST"]),
            Route("/redirect", redirect),
            Route("/secured", secured),
        ]
    )
    app.state.log = []
    return app


@contextmanager
def serve(app: Any, host: str = "127.0.0.1", port: int = 0) -> Iterator[str]:
    """Run `app` with uvicorn in a background thread (on a free port unless `port` is given);
    yields the base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    port = sock.getsockname()[1]
    config = uvicorn.Config(
        app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1, access_log=False
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(500):
        if server.started or not thread.is_alive():
            break
        threading.Event().wait(0.01)
    if not server.started:
        raise RuntimeError("test HTTP server did not start")
    try:
        yield f"http://{host}:{port}"
    finally:
        server.should_exit = True
        thread.join(5)
        sock.close()


@contextmanager
def serve_raw(reply: bytes) -> Iterator[str]:
    """A TCP server that answers every connection with `reply` bytes and closes."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    port = listener.getsockname()[1]
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(2)
                try:
                    conn.recv(65536)
                    conn.sendall(reply)
                except OSError:
                    pass

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        stop.set()
        thread.join(5)
        listener.close()
