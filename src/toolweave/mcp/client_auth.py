"""OAuth client auth the `mcp` SDK lacks, as ``httpx2.Auth`` for ``McpClient(auth=...)``:

- `ClientCredentialsAuth`: the client credentials grant, the client authenticated by a
  secret or by ``private_key_jwt`` (`PrivateKeyJwt`, RFC 7523 §2.2);
- `JwtBearerAuth`: the JWT bearer grant (RFC 7523 §2.1) with an assertion from a workload
  identity source (a file re-read on each token request, such as a Kubernetes projected
  service-account token, or a callable);
- either with ``dpop=DpopKey()``: DPoP (RFC 9449), tokens bound to a proof-of-possession key,
  every request sent with ``Authorization: DPoP <token>`` and a fresh ``DPoP`` proof.

The token endpoint is given (`token_endpoint`) or discovered as the SDK's OAuth flow does it:
the server's 401 names its protected resource metadata (RFC 9728), that names the
authorization server, whose metadata (RFC 8414) names the token endpoint. Tokens are cached
until shortly before they expire and fetched anew on a 401. Tokens, assertions and keys are
never logged nor put in an error message.
"""

from __future__ import annotations

import asyncio
import base64
import inspect
import json
import logging
import os
import secrets
import time
from collections.abc import AsyncGenerator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

import httpx2
import jwt
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from mcp.client.auth.utils import (
    build_oauth_authorization_server_metadata_discovery_urls,
    build_protected_resource_metadata_discovery_urls,
    create_oauth_metadata_request,
    extract_resource_metadata_from_www_auth,
    handle_auth_metadata_response,
    handle_protected_resource_response,
)

from ._dpop import access_token_hash, htu, jwk_thumbprint

__all__ = [
    "ClientAuthError",
    "ClientCredentialsAuth",
    "DpopKey",
    "JwtBearerAuth",
    "PrivateKeyJwt",
]

log = logging.getLogger("toolweave.mcp.client_auth")

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"

AssertionSource = Callable[[], str | Awaitable[str]]


class ClientAuthError(Exception):
    """The token could not be obtained (discovery failed, or the authorization server
    refused); the message has the server's ``error`` and description, never a credential."""


def _private_key(key: Any) -> Any:
    if isinstance(key, (str, bytes)):
        data = key.encode() if isinstance(key, str) else key
        return serialization.load_pem_private_key(data, password=None)
    return key


class DpopKey:
    """A DPoP proof-of-possession key (EC P-256, ES256; a new one unless `private_key` is
    given) that signs one proof JWT per request."""

    algorithm = "ES256"

    def __init__(self, private_key: ec.EllipticCurvePrivateKey | None = None) -> None:
        self._key = private_key or ec.generate_private_key(ec.SECP256R1())
        self.public_jwk: dict[str, Any] = dict(
            ECAlgorithm.to_jwk(self._key.public_key(), as_dict=True)
        )
        """The public half, as the proof's ``jwk`` header."""
        self.thumbprint = jwk_thumbprint(self.public_jwk)
        """The RFC 7638 thumbprint: a token bound to this key carries it as ``cnf.jkt``."""

    def __repr__(self) -> str:
        return f"DpopKey(thumbprint={self.thumbprint!r})"

    def proof(
        self,
        method: str,
        url: str,
        *,
        access_token: str | None = None,
        nonce: str | None = None,
    ) -> str:
        """A proof for one `method` request to `url` (``htu`` without query or fragment),
        with ``ath`` of `access_token` and the server's `nonce` when given."""
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(16),
            "htm": method.upper(),
            "htu": htu(url),
            "iat": int(time.time()),
        }
        if access_token is not None:
            claims["ath"] = access_token_hash(access_token)
        if nonce is not None:
            claims["nonce"] = nonce
        headers = {"typ": "dpop+jwt", "jwk": self.public_jwk}
        return jwt.encode(claims, self._key, algorithm=self.algorithm, headers=headers)


class PrivateKeyJwt:
    """``private_key_jwt`` client authentication (RFC 7523 §2.2): each token request carries
    a short-lived assertion (``iss`` = ``sub`` = `client_id`, ``aud`` = the token endpoint,
    or `audience`) signed with `private_key` (a key object or PEM) whose public half the
    authorization server has registered (under `kid`, if given)."""

    def __init__(
        self,
        client_id: str,
        private_key: Any,
        *,
        kid: str | None = None,
        algorithm: str = "ES256",
        lifetime: int = 60,
        audience: str | None = None,
    ) -> None:
        self.client_id = client_id
        self._key = _private_key(private_key)
        self.kid, self.algorithm, self.lifetime, self.audience = kid, algorithm, lifetime, audience

    def __repr__(self) -> str:
        return f"PrivateKeyJwt(client_id={self.client_id!r}, kid={self.kid!r})"

    def assertion(self, token_endpoint: str) -> str:
        """A new client assertion for a request to `token_endpoint`."""
        now = int(time.time())
        claims = {
            "iss": self.client_id,
            "sub": self.client_id,
            "aud": self.audience or token_endpoint,
            "iat": now,
            "exp": now + self.lifetime,
            "jti": secrets.token_urlsafe(16),
        }
        headers = {"kid": self.kid} if self.kid else None
        return jwt.encode(claims, self._key, algorithm=self.algorithm, headers=headers)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def _challenge(response: httpx2.Response) -> tuple[str, dict[str, str]]:
    """The scheme and parameters of a ``WWW-Authenticate`` header (one challenge)."""
    value = response.headers.get("www-authenticate", "")
    scheme, _, rest = value.strip().partition(" ")
    params: dict[str, str] = {}
    for part in rest.split(","):
        key, eq, val = part.strip().partition("=")
        if eq:
            params[key.strip().lower()] = val.strip().strip('"')
    return scheme.lower(), params


class _TokenAuth(httpx2.Auth):
    """What both grants share: discovery, the token request (with DPoP), the cache, retries."""

    def __init__(
        self,
        *,
        client_id: str | None,
        client_secret: str | None,
        private_key_jwt: PrivateKeyJwt | None,
        scope: str | None,
        resource: str | None,
        token_endpoint: str | None,
        dpop: DpopKey | None,
        leeway: float,
        timeout: float,
    ) -> None:
        if client_secret is not None and private_key_jwt is not None:
            raise ValueError("give client_secret or private_key_jwt, not both")
        if private_key_jwt is not None and client_id not in (None, private_key_jwt.client_id):
            raise ValueError("client_id is not private_key_jwt's client_id")
        self.client_id = client_id or (private_key_jwt.client_id if private_key_jwt else None)
        self._secret = client_secret
        self.private_key_jwt = private_key_jwt
        self.scope, self.resource, self.token_endpoint = scope, resource, token_endpoint
        self.dpop, self.leeway, self.timeout = dpop, leeway, timeout
        self._token: str | None = None
        self._token_type = "Bearer"
        self._expires_at = 0.0
        self._nonces: dict[str, str] = {}  # origin -> the DPoP-Nonce it sent last
        self._lock = asyncio.Lock()

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(client_id={self.client_id!r}, "
            f"token_endpoint={self.token_endpoint!r}, dpop={self.dpop is not None})"
        )

    # -- what a grant adds ------------------------------------------------------------------
    async def _grant(self) -> dict[str, str]:
        raise NotImplementedError

    # -- the flow -----------------------------------------------------------------------------
    def _valid(self) -> bool:
        return self._token is not None and time.time() < self._expires_at

    def invalidate(self) -> None:
        """Forget the cached token (the next request fetches a new one)."""
        self._token = None

    async def async_auth_flow(
        self, request: httpx2.Request
    ) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        """Add the token (and a DPoP proof) to `request`; fetch, discover and retry as needed."""
        if not self._valid() and self.token_endpoint is None:
            response = yield request  # its 401 says where the metadata is
            if response.status_code != 401:
                return
            await self._discover(str(request.url), response)
        if self.resource is None:  # RFC 8707: the server's URL (MCP's canonical URI)
            parts = request.url
            self.resource = f"{parts.scheme}://{parts.netloc.decode('ascii')}{parts.path}"
        if not self._valid():
            await self._refresh_token(None)
        used = self._authorize(request)
        response = yield request
        self._note_nonce(str(request.url), response)
        if response.status_code != 401:
            return
        scheme, params = _challenge(response)
        if self.dpop is not None and scheme == "dpop" and params.get("error") == "use_dpop_nonce":
            used = self._authorize(request)  # the same token, a proof with the nonce
            response = yield request
            self._note_nonce(str(request.url), response)
            if response.status_code != 401:
                return
        await self._refresh_token(used)
        self._authorize(request)
        response = yield request
        self._note_nonce(str(request.url), response)

    def _http(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(timeout=self.timeout, follow_redirects=False)

    async def _refresh_token(self, stale: str | None) -> None:
        """A new token, unless another request got one since `stale` was sent."""
        async with self._lock:
            if self._valid() and self._token != stale:
                return
            self._token = None
            endpoint = self.token_endpoint
            if endpoint is None:
                raise ClientAuthError("no token endpoint: pass token_endpoint=")
            async with self._http() as http:
                for attempt in range(2):
                    form, headers = await self._token_request(endpoint)
                    response = await http.post(endpoint, data=form, headers=headers)
                    self._note_nonce(endpoint, response)
                    body = _json(response)
                    if response.status_code == 200:
                        self._take(body)
                        return
                    error = str(body.get("error", ""))
                    if self.dpop is not None and error == "use_dpop_nonce" and attempt == 0:
                        continue  # once more, with the nonce it just sent
                    why = body.get("error_description")
                    raise ClientAuthError(
                        f"the token endpoint {endpoint} refused ({response.status_code}"
                        + (f" {error}" if error else "")
                        + (f": {why}" if why else "")
                        + ")"
                    )

    async def _token_request(self, endpoint: str) -> tuple[dict[str, str], dict[str, str]]:
        form = await self._grant()
        headers = {"Accept": "application/json"}
        if self.scope:
            form["scope"] = self.scope
        if self.resource:
            form["resource"] = self.resource
        if self.private_key_jwt is not None:
            form["client_assertion_type"] = CLIENT_ASSERTION_TYPE
            form["client_assertion"] = self.private_key_jwt.assertion(endpoint)
            form["client_id"] = self.private_key_jwt.client_id
        elif self.client_id is not None and self._secret is not None:
            pair = f"{quote(self.client_id, safe='')}:{quote(self._secret, safe='')}"
            headers["Authorization"] = "Basic " + base64.b64encode(pair.encode()).decode()
        elif self.client_id is not None:
            form["client_id"] = self.client_id
        if self.dpop is not None:
            nonce = self._nonces.get(_origin(endpoint))
            headers["DPoP"] = self.dpop.proof("POST", endpoint, nonce=nonce)
        return form, headers

    def _take(self, body: Mapping[str, Any]) -> None:
        token = body.get("access_token")
        if not isinstance(token, str) or not token:
            raise ClientAuthError("the token endpoint answered no access_token")
        kind = str(body.get("token_type", "Bearer"))
        if self.dpop is not None and kind.lower() != "dpop":
            raise ClientAuthError(
                f"the authorization server did not bind the token to the DPoP key "
                f"(token_type {kind!r})"
            )
        lifetime = body.get("expires_in")
        life = float(lifetime) if isinstance(lifetime, (int, float)) else 3600.0
        self._token, self._token_type = token, "DPoP" if self.dpop is not None else "Bearer"
        self._expires_at = time.time() + life - min(self.leeway, life / 2)
        log.debug("got a %s token (expires in %s s)", self._token_type, lifetime)

    def _authorize(self, request: httpx2.Request) -> str | None:
        """Put the token (and a new proof) on `request`; the token put there."""
        token = self._token
        if token is None:
            return None
        request.headers["Authorization"] = f"{self._token_type} {token}"
        if self.dpop is not None:
            url = str(request.url)
            request.headers["DPoP"] = self.dpop.proof(
                request.method, url, access_token=token, nonce=self._nonces.get(_origin(url))
            )
        return token

    def _note_nonce(self, url: str, response: httpx2.Response) -> None:
        nonce = response.headers.get("dpop-nonce")
        if nonce:
            self._nonces[_origin(url)] = nonce

    async def _discover(self, server_url: str, response: httpx2.Response) -> None:
        """Protected resource metadata -> authorization server metadata -> token endpoint
        (and, unless given, the resource), with the SDK's discovery steps."""
        async with self._lock:
            if self.token_endpoint is not None:
                return
            hinted = extract_resource_metadata_from_www_auth(response)
            async with self._http() as http:
                prm = None
                for url in build_protected_resource_metadata_discovery_urls(hinted, server_url):
                    got = await http.send(create_oauth_metadata_request(url))
                    prm = await handle_protected_resource_response(got)
                    if prm is not None:
                        break
                if prm is None or not prm.authorization_servers:
                    raise ClientAuthError(f"no protected resource metadata for {server_url}")
                issuer = str(prm.authorization_servers[0])
                urls = build_oauth_authorization_server_metadata_discovery_urls(issuer, server_url)
                for url in urls:
                    got = await http.send(create_oauth_metadata_request(url))
                    go_on, asm = await handle_auth_metadata_response(got)
                    if asm is not None:
                        if str(asm.issuer).rstrip("/") != issuer.rstrip("/"):
                            raise ClientAuthError(f"the metadata of {issuer} names another issuer")
                        if self.resource is None:
                            self.resource = str(prm.resource)
                        self.token_endpoint = str(asm.token_endpoint)
                        return
                    if not go_on:
                        break
            raise ClientAuthError(f"no authorization server metadata for {issuer}")


def _json(response: httpx2.Response) -> dict[str, Any]:
    try:
        body = json.loads(response.content or b"{}")
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


class ClientCredentialsAuth(_TokenAuth):
    """The client credentials grant: the client authenticates with `client_secret`
    (HTTP Basic) or `private_key_jwt`; `scope`; `resource` (RFC 8707, by default the one
    the server's metadata names); `token_endpoint` (by default discovered); `dpop` binds
    the tokens to a `DpopKey`. With `token_endpoint` and no `resource`, the resource is
    the URL of the first request (the MCP server's). Tokens are reused until `leeway` seconds before expiry."""

    def __init__(
        self,
        client_id: str | None = None,
        *,
        client_secret: str | None = None,
        private_key_jwt: PrivateKeyJwt | None = None,
        scope: str | None = None,
        resource: str | None = None,
        token_endpoint: str | None = None,
        dpop: DpopKey | None = None,
        leeway: float = 30.0,
        timeout: float = 30.0,
    ) -> None:
        if client_id is None and private_key_jwt is None:
            raise ValueError("ClientCredentialsAuth needs client_id or private_key_jwt")
        super().__init__(
            client_id=client_id,
            client_secret=client_secret,
            private_key_jwt=private_key_jwt,
            scope=scope,
            resource=resource,
            token_endpoint=token_endpoint,
            dpop=dpop,
            leeway=leeway,
            timeout=timeout,
        )

    async def _grant(self) -> dict[str, str]:
        return {"grant_type": "client_credentials"}


class JwtBearerAuth(_TokenAuth):
    """The JWT bearer grant (RFC 7523 §2.1) for workload identity: the assertion is read
    from `assertion_file` on every token request (a Kubernetes projected service-account
    token, a cloud's identity token file: they are rotated in place) or returned by
    `assertion` (a callable, sync or async). The client may also authenticate
    (`client_id` with `client_secret` or `private_key_jwt`); the other options are those of
    `ClientCredentialsAuth`."""

    def __init__(
        self,
        *,
        assertion_file: str | os.PathLike[str] | None = None,
        assertion: AssertionSource | None = None,
        client_id: str | None = None,
        client_secret: str | None = None,
        private_key_jwt: PrivateKeyJwt | None = None,
        scope: str | None = None,
        resource: str | None = None,
        token_endpoint: str | None = None,
        dpop: DpopKey | None = None,
        leeway: float = 30.0,
        timeout: float = 30.0,
    ) -> None:
        if (assertion_file is None) == (assertion is None):
            raise ValueError("JwtBearerAuth needs one of assertion_file= and assertion=")
        self.assertion_file = Path(assertion_file) if assertion_file is not None else None
        self._source = assertion
        super().__init__(
            client_id=client_id,
            client_secret=client_secret,
            private_key_jwt=private_key_jwt,
            scope=scope,
            resource=resource,
            token_endpoint=token_endpoint,
            dpop=dpop,
            leeway=leeway,
            timeout=timeout,
        )

    async def _assertion(self) -> str:
        if self.assertion_file is not None:
            try:
                text = await asyncio.to_thread(self.assertion_file.read_text)
            except OSError as e:
                raise ClientAuthError(
                    f"cannot read the assertion file {self.assertion_file}: {e.strerror}"
                ) from None
            return text.strip()
        assert self._source is not None
        value = self._source()
        if inspect.isawaitable(value):
            value = await value
        return str(value).strip()

    async def _grant(self) -> dict[str, str]:
        return {"grant_type": JWT_BEARER_GRANT, "assertion": await self._assertion()}
