"""Guarding a local server that can run tools, as Jupyter does: an access token on every
request, and Host and Origin checked against DNS rebinding and cross-site requests."""

from __future__ import annotations

import hmac
import ipaddress
import urllib.parse
from collections.abc import Iterable
from http.cookies import SimpleCookie
from typing import Any

__all__ = ["LOOPBACK_NAMES", "LocalGuard"]

LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
"""The host names a loopback-bound server answers to."""


def _hostname(netloc: str) -> str:
    """The host of `host[:port]` (IPv6 in brackets), lower-cased."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        return netloc[1 : netloc.find("]")] if "]" in netloc else ""
    return netloc.rsplit(":", 1)[0] if netloc.count(":") == 1 else netloc


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name)
    except ValueError:
        return False
    return True


class LocalGuard:
    """ASGI middleware: refuses (403) a request whose `Host` is not a name of this server
    (a DNS-rebinding page reaches the server under its own name), whose `Origin` is not
    the server itself, or that a browser marks `Sec-Fetch-Site: cross-site`; refuses (401)
    one without the access `token`, given as `?token=`, `Authorization: Bearer ...` or the
    cookie set on the first visit with `?token=`.

    `allowed_hosts` are further host names; with `allow_remote`, any IP address is a valid
    host too (a name still has to be listed)."""

    def __init__(
        self,
        app: Any,
        *,
        token: str,
        allowed_hosts: Iterable[str] = (),
        allow_remote: bool = False,
        cookie_name: str = "toolweave_token",
    ) -> None:
        if len(token) < 16:
            raise ValueError("the access token must have at least 16 characters")
        self.app = app
        self.token = token
        self.hosts = LOOPBACK_NAMES | {h.lower().strip("[]") for h in allowed_hosts}
        self.allow_remote = allow_remote
        self.cookie_name = cookie_name

    def host_allowed(self, netloc: str) -> bool:
        """Whether `netloc` (a Host header's value) names this server."""
        name = _hostname(netloc)
        if not name:
            return False
        if name in self.hosts:
            return True
        if _is_ip(name):
            return self.allow_remote or ipaddress.ip_address(name).is_loopback
        return False

    def _token_ok(self, candidate: str | None) -> bool:
        return candidate is not None and hmac.compare_digest(
            candidate.encode("utf-8", "surrogatepass"), self.token.encode()
        )

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # nothing here speaks it
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "")
        if not self.host_allowed(host):
            await _refuse(send, 403, "refused: the Host header does not name this server")
            return
        origin = headers.get("origin")
        if origin is not None:
            parsed = urllib.parse.urlsplit(origin)
            same = parsed.scheme in ("http", "https") and parsed.netloc.lower() == host.lower()
            if not same:
                await _refuse(send, 403, "refused: a cross-origin request")
                return
        if headers.get("sec-fetch-site") == "cross-site":
            await _refuse(send, 403, "refused: a cross-site request")
            return
        query = urllib.parse.parse_qs(scope.get("query_string", b"").decode("latin-1"))
        from_query = query.get("token", [None])[0]
        auth = headers.get("authorization", "")
        from_header = auth.split(" ", 1)[1].strip() if " " in auth else None
        cookies = SimpleCookie()
        try:
            cookies.load(headers.get("cookie", ""))
        except Exception:  # a malformed cookie header: no cookie
            cookies = SimpleCookie()
        morsel = cookies.get(self.cookie_name)
        from_cookie = morsel.value if morsel is not None else None
        if not any(self._token_ok(t) for t in (from_query, from_header, from_cookie)):
            await _refuse(send, 401, "refused: this server needs its access token (?token=...)")
            return
        if not self._token_ok(from_query) or self._token_ok(from_cookie):
            await self.app(scope, receive, send)
            return
        cookie = f"{self.cookie_name}={self.token}; Path=/; HttpOnly; SameSite=Strict".encode()

        async def send_with_cookie(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message = {
                    **message,
                    "headers": [*message.get("headers", []), (b"set-cookie", cookie)],
                }
            await send(message)

        await self.app(scope, receive, send_with_cookie)


async def _refuse(send: Any, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
