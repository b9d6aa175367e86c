"""`toolweave web` is guarded like Jupyter: loopback by default, the access token on every
request, Host and Origin checked, on the page and on both protocol endpoints alike."""

from __future__ import annotations

import subprocess
import sys

import httpx
import pytest

from .conftest import SCENARIO, WebServer, web_server
from .test_js_clients import _node

CHAT = {
    "id": "c",
    "messages": [{"id": "u", "role": "user", "parts": [{"type": "text", "text": "hi"}]}],
}
RUN = {"threadId": "t", "runId": "r", "messages": [{"id": "u", "role": "user", "content": "hi"}]}
ENDPOINTS = [
    pytest.param("GET", "/", None, id="page"),
    pytest.param("GET", "/api/tools", None, id="tools"),
    pytest.param("POST", "/api/tools/get_weather", {"city": "Oslo"}, id="call-tool"),
    pytest.param("POST", "/api/chat", CHAT, id="ai-sdk"),
    pytest.param("POST", "/api/ag-ui", RUN, id="ag-ui"),
    pytest.param("GET", "/api/durable/pending", None, id="durable-pending"),
]
DECIDE = {"conversation_id": "c", "call_id": "p1", "decision": "approve"}
# refused like the others; let through, it answers 404 here (no --durable-db: see
# tests/ui/test_web_durable.py, which decides through it)
REFUSED = [*ENDPOINTS, pytest.param("POST", "/api/durable/decide", DECIDE, id="durable-decide")]


def _ask(web: WebServer, method: str, path: str, body: object, **headers: str) -> httpx.Response:
    return httpx.request(method, web.base + path, json=body, headers=headers, timeout=30)


def test_it_says_it_binds_loopback_only(web: WebServer) -> None:
    assert "loopback only" in web.banner
    assert f"?token={web.token}" in web.banner


@pytest.mark.parametrize(("method", "path", "body"), REFUSED)
def test_a_request_without_the_token_is_refused(
    web: WebServer, method: str, path: str, body: object
) -> None:
    assert _ask(web, method, path, body).status_code == 401
    assert (
        _ask(web, method, path, body, authorization="Bearer wrong-token-000000000").status_code
        == 401
    )


@pytest.mark.parametrize(("method", "path", "body"), REFUSED)
def test_a_request_with_a_foreign_origin_is_refused(
    web: WebServer, method: str, path: str, body: object
) -> None:
    auth = f"Bearer {web.token}"
    for origin in ("http://evil.example", "null", f"http://localhost.evil.example:{web.port}"):
        assert _ask(web, method, path, body, authorization=auth, origin=origin).status_code == 403
    cross = _ask(web, method, path, body, authorization=auth, **{"sec-fetch-site": "cross-site"})
    assert cross.status_code == 403


@pytest.mark.parametrize(("method", "path", "body"), REFUSED)
def test_a_request_with_a_rebinding_host_is_refused(
    web: WebServer, method: str, path: str, body: object
) -> None:
    auth = f"Bearer {web.token}"
    for host in (f"evil.example:{web.port}", f"127.0.0.1.nip.io:{web.port}", ""):
        assert _ask(web, method, path, body, authorization=auth, host=host).status_code == 403


@pytest.mark.parametrize(("method", "path", "body"), ENDPOINTS)
def test_the_token_and_the_server_s_own_origin_are_let_through(
    web: WebServer, method: str, path: str, body: object
) -> None:
    origin = f"http://127.0.0.1:{web.port}"
    response = _ask(web, method, path, body, authorization=f"Bearer {web.token}", origin=origin)
    assert response.status_code == 200, response.text
    for host in (f"localhost:{web.port}", f"[::1]:{web.port}"):
        assert (
            _ask(
                web, method, path, body, authorization=f"Bearer {web.token}", host=host
            ).status_code
            == 200
        )


def test_the_first_visit_sets_a_cookie_that_later_requests_use(web: WebServer) -> None:
    with httpx.Client(base_url=web.base, timeout=30) as client:
        first = client.get(f"/?token={web.token}")
        assert first.status_code == 200 and "toolweave web" in first.text
        cookie = first.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert client.get("/api/tools").status_code == 200  # the cookie, no token
        assert [t["name"] for t in client.get("/api/tools").json()] == ["get_weather", "send_money"]


def test_the_js_clients_reach_the_guarded_endpoints_with_the_token() -> None:
    with web_server() as web:  # a fresh scripted model for each conversation
        out = _node("ai_sdk_chat.mjs", f"{web.base}/api/chat", "approve", web.token)
    assert out["errors"] == [] and out["messages"][-1]["parts"][-1]["text"].startswith("Done")
    with web_server() as web:
        out = _node("ag_ui_agent.mjs", f"{web.base}/api/ag-ui", "approve", web.token)
    assert {m["toolCallId"]: m["content"] for m in out["messages"] if m["role"] == "tool"}[
        "p1"
    ] == ("sent 5 to Ann")


def test_binding_beyond_loopback_needs_an_explicit_flag() -> None:
    cmd = [sys.executable, "-m", "toolweave", "web", "--tools", str(SCENARIO), "--host", "0.0.0.0"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    assert "--allow-remote" in proc.stderr
