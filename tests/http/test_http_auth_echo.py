"""Credentials that `auth=` / `tool_auth` add never come back to the model through a 2xx body
that echoes the request (an echo endpoint, an error page printing the request): masked in
the text, and in every string of a parsed JSON value, raw, JSON-escaped or percent-encoded."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from threading import Thread
from typing import Any
from urllib.parse import quote, quote_plus

import pytest

from toolweave.callbacks.events import ToolCallEvents as E
from toolweave.callbacks.framework import CallbackFramework
from toolweave.http import RestfulApi, RestfulApiCard, SsrfPolicy

TOKEN = "tw-TOKEN/abc+def=42"
"""The bearer token `auth=` adds (characters that percent-encoding and `\\/` change)."""
KEY = "qk-KEY/xyz+1=2 end"
"""The query key `auth=` adds."""
ADDED = (TOKEN, KEY)


def _forms(value: str) -> set[str]:
    escaped = json.dumps(value)[1:-1]
    return {value, quote(value, safe=""), quote_plus(value), escaped, escaped.replace("/", "\\/")}


def _leaks(where: str, text: str) -> list[str]:
    found = []
    for secret in ADDED:
        for form in _forms(secret):
            if form in text:
                found.append(f"{where}: {form!r}")
        for piece in (secret[:10], secret[-8:]):  # no half of one either
            if piece in text:
                found.append(f"{where}: part {piece!r}")
    return found


class _Echo(BaseHTTPRequestHandler):
    """Answers 200 with the request as it arrived, in the shape the path names."""

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0]
        headers = {k.lower(): v for k, v in self.headers.items()}
        if path == "/text":
            lines = [f"{self.command} {self.path} {self.request_version}"]
            lines += [f"{k}: {v}" for k, v in self.headers.items()]
            body, ctype = "\n".join(lines).encode(), "text/plain; charset=utf-8"
        elif path == "/html":
            page = f"<html><body><h1>Oops</h1><pre>{self.path}\n{headers}</pre></body></html>"
            body, ctype = page.encode(), "text/html"
        elif path == "/uescaped":  # every character as \uXXXX: no raw form in the text
            escaped = "".join(f"\\u{ord(c):04x}" for c in headers.get("authorization", ""))
            body, ctype = f'{{"echo": "{escaped}"}}'.encode(), "application/json"
        elif path == "/nested":
            value: Any = {"authorization": headers.get("authorization")}
            for _ in range(250):  # under the 256-level limit, beyond a careless recursion
                value = [value]
            body, ctype = json.dumps(value).encode(), "application/json"
        else:
            payload = {
                "url": self.path,  # the query key percent-encoded
                "headers": headers,  # the token raw
                "request": json.dumps({"headers": headers}),  # the token JSON-escaped
                headers.get("authorization", "none"): "the token as a key",
            }
            body = json.dumps(payload).replace("/", "\\/").encode()  # `\/` as PHP writes it
            ctype = "application/json"
        self.send_response(200)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def echo_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
    thread = Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join(5)


def _tool(url: str, callbacks: CallbackFramework, *, auth: Any = None) -> RestfulApi:
    return RestfulApi(
        RestfulApiCard(
            name="api",
            url=url,
            method="GET",
            input_params={"type": "object", "properties": {"q": {"type": "string"}}},
            ssrf_policy=SsrfPolicy(allowed_networks=("127.0.0.1/32",)),
            timeout=10,
        ),
        callbacks=callbacks,
        auth=auth,
    )


_AUTH = {"headers": {"Authorization": f"Bearer {TOKEN}"}, "query": {"api_key": KEY}}


async def _call(tool: RestfulApi, face: str) -> dict[str, Any]:
    if face == "async":
        result: dict[str, Any] = await tool.ainvoke({"q": "plain"})
    else:
        result = await asyncio.to_thread(tool.invoke, {"q": "plain"})
    return result


def _watch(callbacks: CallbackFramework) -> list[str]:
    seen: list[str] = []
    for event in (E.TOOL_CALL_FINISHED, E.TOOL_RESULT_RECEIVED):
        callbacks.register(event, lambda **kw: seen.append(repr(kw)))
    return seen


@pytest.mark.parametrize("shape", ["json", "text", "html", "nested", "uescaped"])
@pytest.mark.parametrize("how", ["auth", "tool_auth"])
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_an_echoing_success_body_returns_no_added_credential(
    echo_url: str, shape: str, how: str, face: str
) -> None:
    callbacks = CallbackFramework()
    seen = _watch(callbacks)
    if how == "tool_auth":
        callbacks.register(E.TOOL_AUTH, lambda: _AUTH)
    tool = _tool(f"{echo_url}/{shape}", callbacks, auth=_AUTH if how == "auth" else None)
    async with tool:
        result = await _call(tool, face)
    assert result["code"] == 200
    text = json.dumps(result["data"]) if not isinstance(result["data"], str) else result["data"]
    assert "***" in text  # the credentials were sent, and echoed
    assert _leaks("data", text) + _leaks("repr", repr(result)) == []
    assert seen and _leaks("callbacks", "\n".join(seen)) == []
    if shape == "json":
        data = result["data"]
        assert data["headers"]["authorization"] == "***"
        assert "api_key=***" in data["url"] and "q=plain" in data["url"]
        assert data["***"] == "the token as a key"
        assert json.loads(data["request"])["headers"]["authorization"] == "***"
    if shape == "text":
        assert "Authorization: ***" in result["data"]
    if shape == "uescaped":
        assert result["data"] == {"echo": "***"}


async def test_without_auth_the_body_is_untouched(echo_url: str) -> None:
    """Masking costs nothing when toolweave added no credential: the body is as sent."""
    callbacks = CallbackFramework()
    tool = _tool(f"{echo_url}/text", callbacks)
    async with tool:
        result = await tool.ainvoke({"q": f"Bearer {TOKEN}"})
    assert quote_plus(f"Bearer {TOKEN}") in result["data"]  # the model's own argument, as sent
