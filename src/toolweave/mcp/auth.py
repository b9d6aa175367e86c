"""OAuth 2.1 resource-server auth for `serve_mcp` (``serve_mcp(..., auth=McpAuth(...))``).

Every HTTP request must carry ``Authorization: Bearer <token>``; the token is verified by a
`JwtVerifier` (signature, issuer, audience, expiry; keys from a JWKS URL, cached, refetched
when a token names an unknown ``kid``, or a static key) or an `IntrospectionVerifier`
(RFC 7662). The server publishes its Protected Resource Metadata (RFC 9728) at
``/.well-known/oauth-protected-resource<path>`` and answers as the MCP authorization
specification asks:

- no token, or one that fails verification: 401 with
  ``WWW-Authenticate: Bearer resource_metadata="...", scope="..."`` (and
  ``error="invalid_token"`` for a bad token);
- a token without the scopes the request needs (the server's `required_scopes`, or those of
  the tool called, the resource read, the prompt got): 403 with
  ``error="insufficient_scope", scope="<all the scopes the operation needs>"``, so the client
  can step up.

A served tool sees the caller as `ToolContext.identity` (subject, client, scopes, claims).
Tokens are never logged, echoed or kept beyond the request.

From the SDK: its `AccessToken` and ``TokenVerifier`` face, its metadata route, and its
`AuthenticatedUser` in the request scope (so its session manager binds each session to the
principal that opened it, and its ``get_access_token()`` works). Not its
``RequireAuthMiddleware``: its challenges carry no ``scope`` and a 401 without a token an
error code, and it cannot refuse one tool call.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import math
import time
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable
from urllib.parse import urlsplit

import httpx2
import jwt
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.routes import build_resource_metadata_url, create_protected_resource_routes
from mcp.shared.exceptions import MCPError
from mcp.shared.uri_template import UriTemplate
from mcp_types import INVALID_REQUEST
from pydantic import AnyHttpUrl
from starlette.authentication import AuthCredentials
from starlette.routing import Router

from ..identity import Identity, current_identity, use_identity
from ..tools.base import Tool
from ._dpop import DpopProofError, DpopVerifier
from .features import Feature, McpPrompt, McpResource

__all__ = [
    "DpopVerifier",
    "IntrospectionVerifier",
    "InvalidToken",
    "JwtVerifier",
    "McpAuth",
    "TokenVerifier",
    "VerifierUnavailable",
]

log = logging.getLogger("toolweave.mcp.auth")

ASGIApp = Callable[[Any, Any, Any], Any]

DEFAULT_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
"""The signature algorithms `JwtVerifier` accepts by default (asymmetric only)."""


class InvalidToken(Exception):
    """A bearer token failed verification; the message says why (it never holds the token)
    and is sent to the client as the ``error_description``."""


class VerifierUnavailable(Exception):
    """The token could not be checked (the JWKS or introspection endpoint did not answer);
    the client is answered 503."""


@runtime_checkable
class TokenVerifier(Protocol):
    """Verifies a bearer token: its `AccessToken`, or `InvalidToken` saying why not.

    The SDK's own ``TokenVerifier`` (``verify_token`` returning None for a bad token) is
    accepted by `McpAuth` too."""

    async def verify(self, token: str) -> AccessToken:
        """The verified token's principal and scopes."""
        ...


def _scopes_of(value: Any) -> list[str]:
    """Scopes from a claim: RFC 9068 ``scope`` (space-separated) or a ``scp`` list."""
    if isinstance(value, str):
        return value.split()
    if isinstance(value, (list, tuple)):
        return [str(s) for s in value]
    return []


def _access_token(token: str, claims: Mapping[str, Any], resource: str | None) -> AccessToken:
    scopes = _scopes_of(claims.get("scope")) or _scopes_of(claims.get("scp"))
    client = claims.get("client_id") or claims.get("azp") or claims.get("cid") or ""
    exp = claims.get("exp")
    sub = claims.get("sub")
    return AccessToken(
        token=token,
        client_id=str(client),
        scopes=scopes,
        expires_at=int(exp) if isinstance(exp, (int, float)) else None,
        resource=resource,
        subject=str(sub) if sub is not None else None,
        claims=dict(claims),
    )


def _audiences(audience: str | Sequence[str]) -> list[str]:
    return [audience] if isinstance(audience, str) else list(audience)


def _matching_audience(claimed: Any, accepted: Sequence[str]) -> str | None:
    values = [claimed] if isinstance(claimed, str) else list(claimed or ())
    norm = {a.rstrip("/"): a for a in accepted}
    return next(
        (norm[v.rstrip("/")] for v in values if isinstance(v, str) and v.rstrip("/") in norm), None
    )


class JwtVerifier:
    """Verifies JWT access tokens (RFC 9068) with PyJWT: the signature, ``iss`` = `issuer`,
    ``aud`` holding one of `audience` (this server's canonical URL), ``exp`` (with `leeway`
    seconds), ``nbf``.

    Keys come from `jwks_url` (fetched on first use, kept `jwks_cache_seconds`, fetched again
    at once when a token names a ``kid`` not in the set, at most once per
    `min_refetch_seconds`, so key rotation needs no restart and junk ``kid`` values cannot
    hammer the authorization server), from a static `key` (a PEM public key, a JWK or JWK
    Set as a mapping, or a shared secret as ``bytes`` with ``algorithms=["HS256"]``), or,
    with neither, from the ``jwks_uri`` of the issuer's metadata (RFC 8414, else OpenID
    Connect discovery; its ``issuer`` must be `issuer` exactly).
    """

    def __init__(
        self,
        *,
        issuer: str,
        audience: str | Sequence[str],
        jwks_url: str | None = None,
        key: str | bytes | Mapping[str, Any] | None = None,
        algorithms: Sequence[str] | None = None,
        leeway: float = 30.0,
        jwks_cache_seconds: float = 300.0,
        min_refetch_seconds: float = 30.0,
        timeout: float = 10.0,
        http_client: httpx2.AsyncClient | None = None,
    ) -> None:
        if jwks_url is not None and key is not None:
            raise ValueError("JwtVerifier takes jwks_url= or key=, not both")
        self.issuer = issuer
        self.audience = _audiences(audience)
        if not self.audience:
            raise ValueError("JwtVerifier needs the audience its tokens must name (aud)")
        self.jwks_url = jwks_url
        self._discover = jwks_url is None and key is None
        self.leeway = leeway
        self.jwks_cache_seconds = jwks_cache_seconds
        self.min_refetch_seconds = min_refetch_seconds
        self.timeout = timeout
        self._http = http_client
        self._static: str | bytes | None = None
        self._keys: list[dict[str, Any]] = []
        if isinstance(key, Mapping):
            self._keys = _jwk_list(key)
        elif key is not None:
            self._static = key
        if algorithms is None:
            if isinstance(key, bytes) or (isinstance(key, str) and "-----BEGIN" not in key):
                raise ValueError("a shared-secret key needs algorithms= (e.g. ['HS256'])")
            algorithms = DEFAULT_ALGORITHMS
        if "none" in [a.lower() for a in algorithms]:
            raise ValueError("the 'none' algorithm is never accepted")
        self.algorithms = tuple(algorithms)
        self._fetched_at: float | None = None
        self._refetched_at = -math.inf
        self._failed_at = -math.inf
        self._parsed: dict[tuple[Any, str], jwt.PyJWK] = {}
        self._lock = asyncio.Lock()
        self.jwks_fetches = 0
        """How many times the JWKS was fetched (for monitoring)."""

    def __repr__(self) -> str:
        if self._discover and self.jwks_url is None:
            where = "jwks_url=<from the issuer's metadata>"
        else:
            where = f"jwks_url={self.jwks_url!r}" if self.jwks_url else "key=<static>"
        return f"JwtVerifier(issuer={self.issuer!r}, audience={self.audience!r}, {where})"

    async def verify(self, token: str) -> AccessToken:
        """The token's `AccessToken`, or `InvalidToken`."""
        try:
            header = jwt.get_unverified_header(token)
        except jwt.PyJWTError:
            raise InvalidToken("the token is not a well-formed JWT") from None
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in self.algorithms:
            raise InvalidToken("the token's signing algorithm is not accepted")
        key: Any = self._static if self._static is not None else await self._key(header, alg)
        try:
            claims = jwt.decode(
                token,
                key,
                algorithms=[alg],
                audience=self.audience,
                issuer=self.issuer,
                leeway=self.leeway,
                options={"require": ["exp", "iss", "aud"]},
            )
        except jwt.ExpiredSignatureError:
            raise InvalidToken("the token has expired") from None
        except jwt.InvalidAudienceError:
            raise InvalidToken("the token was not issued for this resource (aud)") from None
        except jwt.InvalidIssuerError:
            raise InvalidToken("the token's issuer is not accepted (iss)") from None
        except jwt.ImmatureSignatureError:
            raise InvalidToken("the token is not valid yet (nbf)") from None
        except jwt.MissingRequiredClaimError as e:
            raise InvalidToken(f"the token has no {e.claim!r} claim") from None
        except jwt.InvalidSignatureError:
            raise InvalidToken("the token's signature does not verify") from None
        except jwt.PyJWTError as e:
            raise InvalidToken(f"the token is not valid ({type(e).__name__})") from None
        return _access_token(token, claims, _matching_audience(claims.get("aud"), self.audience))

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's ``TokenVerifier`` face: None for a bad token."""
        try:
            return await self.verify(token)
        except (InvalidToken, VerifierUnavailable):
            return None

    async def _key(self, header: Mapping[str, Any], alg: str) -> jwt.PyJWK:
        kid = header.get("kid")
        remote = self.jwks_url is not None or self._discover
        if remote:
            stale = (
                self._fetched_at is None
                or time.monotonic() - self._fetched_at >= self.jwks_cache_seconds
            )
            if stale:
                await self._refresh(self._fetched_at)
        jwk = self._find(kid, alg)
        if jwk is None and remote:
            # An unknown kid: the keys may have rotated. One refetch per interval at most.
            seen = self._fetched_at
            if time.monotonic() - self._refetched_at >= self.min_refetch_seconds:
                self._refetched_at = time.monotonic()
                await self._refresh(seen)
                jwk = self._find(kid, alg)
        if jwk is None:
            raise InvalidToken("the token was signed with a key this server does not know (kid)")
        cached = self._parsed.get((kid, alg))
        if cached is not None:
            return cached
        try:
            parsed = jwt.PyJWK(jwk, algorithm=jwk.get("alg") or alg)
        except jwt.PyJWTError:
            raise InvalidToken("the token's key does not fit its algorithm") from None
        self._parsed[(kid, alg)] = parsed
        return parsed

    def _find(self, kid: Any, alg: str) -> dict[str, Any] | None:
        signing = [k for k in self._keys if k.get("use", "sig") == "sig"]
        if kid is None:
            fitting = [k for k in signing if k.get("alg") in (None, alg)]
            return fitting[0] if len(fitting) == 1 else None
        return next((k for k in signing if k.get("kid") == kid), None)

    async def _refresh(self, seen: float | None) -> None:
        async with self._lock:
            if self._fetched_at != seen:
                return  # another request fetched the keys while this one waited
            if time.monotonic() - self._failed_at < min(self.min_refetch_seconds, 5.0):
                # it failed a moment ago: do not ask again for every request
                if self._fetched_at is None:
                    raise VerifierUnavailable("the signing keys could not be fetched")
                return
            try:
                if self.jwks_url is None:
                    self.jwks_url = await self._jwks_uri()
                keys = _jwk_list(await self._get_json(self.jwks_url))
            except Exception as e:
                self._failed_at = time.monotonic()
                where = self.jwks_url or f"the metadata of {self.issuer}"
                log.warning("could not fetch the JWKS (%s): %s", where, type(e).__name__)
                if self._fetched_at is None:
                    raise VerifierUnavailable("the signing keys could not be fetched") from None
                return  # keep the keys we have
            self.jwks_fetches += 1
            self._keys, self._parsed = keys, {}
            self._fetched_at = time.monotonic()

    async def _get_json(self, url: str) -> Any:
        if self._http is not None:
            response = await self._http.get(url, timeout=self.timeout)
        else:
            async with httpx2.AsyncClient(timeout=self.timeout) as http:
                response = await http.get(url)
        response.raise_for_status()
        return response.json()

    async def _jwks_uri(self) -> str:
        """The ``jwks_uri`` of the issuer's metadata (RFC 8414 §3, OpenID Connect)."""
        for url in _metadata_urls(self.issuer):
            try:
                meta = await self._get_json(url)
            except (httpx2.HTTPError, ValueError):
                continue
            if not isinstance(meta, dict):
                continue
            if meta.get("issuer") != self.issuer:
                # RFC 8414 §3.3: metadata naming another issuer must not be used
                raise ValueError(f"the metadata at {url} is for another issuer")
            uri = meta.get("jwks_uri")
            if isinstance(uri, str) and uri:
                return uri
        raise ValueError(f"no metadata of {self.issuer} names a jwks_uri")


def _metadata_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: RFC 8414 (path inserted), OpenID Connect (path
    inserted, then appended)."""
    parts = urlsplit(issuer)
    origin = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    return [
        f"{origin}/.well-known/oauth-authorization-server{path}",
        f"{origin}/.well-known/openid-configuration{path}",
        *([f"{origin}{path}/.well-known/openid-configuration"] if path else []),
    ]


def _jwk_list(value: Any) -> list[dict[str, Any]]:
    if not isinstance(value, Mapping):
        raise ValueError("a JWK Set is a JSON object")
    if "keys" in value:
        keys = value["keys"]
        if not isinstance(keys, list):
            raise ValueError("a JWK Set's keys is a list")
        return [dict(k) for k in keys if isinstance(k, Mapping)]
    return [dict(value)]


class IntrospectionVerifier:
    """Verifies opaque tokens by asking the authorization server (RFC 7662 token
    introspection at `endpoint`, authenticated as `client_id` / `client_secret` with HTTP
    Basic): the token must be ``active``, unexpired and, when given, name one of `audience`
    in ``aud`` and `issuer` in ``iss``.

    `cache_seconds` (0: off) keeps an active token's answer that long (never past its
    ``exp``), keyed by the token's SHA-256, for at most `cache_size` tokens: fewer round
    trips, but a revoked token is accepted until its entry ends.
    """

    def __init__(
        self,
        endpoint: str,
        *,
        client_id: str | None = None,
        client_secret: str | None = None,
        audience: str | Sequence[str] | None = None,
        issuer: str | None = None,
        timeout: float = 10.0,
        http_client: httpx2.AsyncClient | None = None,
        cache_seconds: float = 0.0,
        cache_size: int = 10_000,
    ) -> None:
        self.endpoint = endpoint
        self.cache_seconds = cache_seconds
        self.cache_size = cache_size
        self._cache: dict[str, tuple[float, AccessToken]] = {}
        self.client_id = client_id
        self._secret = client_secret
        self.audience = _audiences(audience) if audience is not None else None
        self.issuer = issuer
        self.timeout = timeout
        self._http = http_client

    def __repr__(self) -> str:
        return f"IntrospectionVerifier({self.endpoint!r}, client_id={self.client_id!r})"

    async def verify(self, token: str) -> AccessToken:
        """The token's `AccessToken`, or `InvalidToken`."""
        if self.cache_seconds <= 0:
            return await self._introspect(token)
        key = hashlib.sha256(token.encode()).hexdigest()
        now = time.monotonic()
        hit = self._cache.get(key)
        if hit is not None and hit[0] > now and not _expired(hit[1]):
            return hit[1].model_copy(update={"token": token})
        self._cache.pop(key, None)
        found = await self._introspect(token)
        if len(self._cache) >= self.cache_size:
            self._cache = {k: v for k, v in self._cache.items() if v[0] > now}
            while len(self._cache) >= self.cache_size:  # still full: drop the oldest
                self._cache.pop(next(iter(self._cache)))
        # kept without the token itself
        self._cache[key] = (now + self.cache_seconds, found.model_copy(update={"token": ""}))
        return found

    async def _introspect(self, token: str) -> AccessToken:
        auth: Any = (self.client_id, self._secret or "") if self.client_id is not None else None
        data = {"token": token, "token_type_hint": "access_token"}
        try:
            if self._http is not None:
                response = await self._http.post(
                    self.endpoint, data=data, auth=auth, timeout=self.timeout
                )
            else:
                async with httpx2.AsyncClient(timeout=self.timeout) as http:
                    response = await http.post(self.endpoint, data=data, auth=auth)
            response.raise_for_status()
            claims = response.json()
        except Exception as e:
            log.warning("token introspection at %s failed: %s", self.endpoint, type(e).__name__)
            raise VerifierUnavailable("the token could not be introspected") from None
        if not isinstance(claims, dict) or claims.get("active") is not True:
            raise InvalidToken("the token is not active")
        exp = claims.get("exp")
        if isinstance(exp, (int, float)) and exp < time.time():
            raise InvalidToken("the token has expired")
        if self.issuer is not None and claims.get("iss") != self.issuer:
            raise InvalidToken("the token's issuer is not accepted (iss)")
        resource = None
        if self.audience is not None:
            resource = _matching_audience(claims.get("aud"), self.audience)
            if resource is None:
                raise InvalidToken("the token was not issued for this resource (aud)")
        return _access_token(token, claims, resource)

    async def verify_token(self, token: str) -> AccessToken | None:
        """The SDK's ``TokenVerifier`` face: None for a bad token."""
        try:
            return await self.verify(token)
        except (InvalidToken, VerifierUnavailable):
            return None


def _expired(token: AccessToken) -> bool:
    return token.expires_at is not None and token.expires_at < time.time()


def _scope_list(value: Any) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(value.split())
    return tuple(str(s) for s in value)


@dataclass(frozen=True)
class McpAuth:
    """How `serve_mcp` authenticates its HTTP clients (an OAuth 2.1 resource server).

    `verifier` checks each bearer token (`JwtVerifier`, `IntrospectionVerifier`, or the SDK's
    ``TokenVerifier``). `resource` is this server's canonical URL, as clients reach it
    (``https://tools.example.com/mcp``; by default ``http://host:port/path`` of a loopback
    bind); tokens must be issued for it. `authorization_servers` are listed in the protected
    resource metadata (by default the verifier's issuer).

    `required_scopes` are needed for every request; a tool also needs the scopes its card
    declares (``@tool(scopes=[...])``, that is ``metadata={"scopes": [...]}``) and those in
    `tool_scopes` (by tool name); a resource or prompt those of `McpResource.scopes` / `McpPrompt.scopes`
    (``@resource(uri, scopes=...)``) and `resource_scopes` (by URI or URI template) /
    `prompt_scopes` (by name). `implied_scopes` maps a broader scope to the narrower ones it
    grants (``{"files": ["files:read", "files:write"]}``).
    """

    verifier: Any
    resource: str | None = None
    authorization_servers: Sequence[str] = ()
    required_scopes: Sequence[str] = ()
    tool_scopes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    resource_scopes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    prompt_scopes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    implied_scopes: Mapping[str, Sequence[str]] = field(default_factory=dict)
    scopes_supported: Sequence[str] | None = None
    """Listed in the metadata (by default `required_scopes`)."""
    resource_name: str | None = None
    resource_documentation: str | None = None
    dpop: DpopVerifier = field(default_factory=DpopVerifier)
    """Checks the DPoP proof (RFC 9449) of a DPoP-bound token (one with ``cnf.jkt``, sent
    as ``Authorization: DPoP <token>``); such a token without its proof is refused."""

    def __post_init__(self) -> None:
        if not (hasattr(self.verifier, "verify") or hasattr(self.verifier, "verify_token")):
            raise TypeError(f"not a token verifier: {self.verifier!r}")
        if not self.authorization_servers and getattr(self.verifier, "issuer", None) is None:
            raise ValueError("McpAuth needs authorization_servers= (the verifier names none)")

    def protect(
        self,
        app: ASGIApp,
        *,
        resource: str | None = None,
        tools: Iterable[Tool] = (),
        features: Iterable[Feature] = (),
        max_message_bytes: int = 4 * 1024 * 1024,
        server: Any = None,
        transport: str = "streamable-http",
    ) -> ASGIApp:
        """`app` (an MCP server's ASGI app) behind this auth, with the metadata document;
        `tools` and `features` are what it serves (for their declared scopes); `resource`
        stands in for an unset `McpAuth.resource`.

        With `server` (the SDK's low-level `Server` behind `app`), an operation the token
        lacks scopes for is also refused inside the server, with a JSON-RPC error: on
        ``transport="sse"`` that is the only refusal (a reply travels on the event stream,
        and clients do not read a 403 to the message POST); on streamable HTTP the request
        is answered 403 before it gets there."""
        url = self.resource or resource
        if not url:
            raise ValueError("McpAuth needs resource= (this server's URL as clients reach it)")
        policy = _Policy(self, tools, features)
        if server is not None:
            server.middleware.append(_ScopeGuard(policy))
        return _Protected(app, self, url, policy, max_message_bytes, per_request=transport != "sse")

    async def verify(self, token: str) -> Identity:
        """The `Identity` of `token`, or `InvalidToken` / `VerifierUnavailable`."""
        return self._identity(await self._access_token(token))

    async def _access_token(self, token: str, resource: str | None = None) -> AccessToken:
        verify = getattr(self.verifier, "verify", None)
        if verify is not None:
            found: AccessToken = await verify(token)
            return found
        # the SDK's face: None says no; the token's resource, when it names one, must be
        # `resource` (its audience is otherwise the verifier's to check)
        maybe = _checked_access(await self.verifier.verify_token(token))
        if maybe is None:
            raise InvalidToken("the token is not valid")
        if maybe.expires_at is not None and maybe.expires_at < time.time():
            raise InvalidToken("the token has expired")
        elsewhere = maybe.resource is not None and resource is not None
        if elsewhere and _matching_audience(maybe.resource, [str(resource)]) is None:
            raise InvalidToken("the token was not issued for this resource (aud)")
        return maybe

    def granted(self, scopes: Iterable[str]) -> frozenset[str]:
        """`scopes` with all they imply (`implied_scopes`, transitively)."""
        out = set(scopes)
        todo = list(out)
        while todo:
            for narrower in _scope_list(self.implied_scopes.get(todo.pop())):
                if narrower not in out:
                    out.add(narrower)
                    todo.append(narrower)
        return frozenset(out)

    def _identity(self, token: AccessToken) -> Identity:
        claims = dict(token.claims or {})
        iss = claims.get("iss")
        return Identity(
            subject=token.subject,
            client_id=token.client_id or None,
            issuer=str(iss) if iss is not None else None,
            scopes=self.granted(token.scopes),
            claims=MappingProxyType(claims),
            expires_at=token.expires_at,
        )


def _checked_access(value: Any) -> AccessToken | None:
    if value is not None and not isinstance(value, AccessToken):
        raise TypeError("a token verifier returned something other than an AccessToken")
    return value


class _Policy:
    """The scopes each operation needs."""

    def __init__(self, auth: McpAuth, tools: Iterable[Tool], features: Iterable[Feature]):
        self.base = _scope_list(auth.required_scopes)
        self.tools: dict[str, tuple[str, ...]] = {}
        for t in tools:
            declared = _scope_list(t.card.metadata.get("scopes"))
            self.tools[t.card.name] = _union(
                declared, _scope_list(auth.tool_scopes.get(t.card.name))
            )
        for name, scopes in auth.tool_scopes.items():
            self.tools.setdefault(name, _scope_list(scopes))
        self.resources: dict[str, tuple[str, ...]] = {}
        self.templates: list[tuple[UriTemplate, tuple[str, ...]]] = []
        self.prompts: dict[str, tuple[str, ...]] = {}
        for f in features:
            if isinstance(f, McpResource):
                scopes = _union(f.scopes, _scope_list(auth.resource_scopes.get(f.uri)))
                if f.is_template:
                    self.templates.append((UriTemplate.parse(f.uri), scopes))
                else:
                    self.resources[f.uri] = scopes
            elif isinstance(f, McpPrompt):
                self.prompts[f.name] = _union(f.scopes, _scope_list(auth.prompt_scopes.get(f.name)))
        for uri, scopes in auth.resource_scopes.items():
            if uri not in self.resources and not any(str(t) == uri for t, _ in self.templates):
                if "{" in uri:
                    self.templates.append((UriTemplate.parse(uri), _scope_list(scopes)))
                else:
                    self.resources[uri] = _scope_list(scopes)
        for name, scopes in auth.prompt_scopes.items():
            self.prompts.setdefault(name, _scope_list(scopes))

    def resource(self, uri: str) -> tuple[str, ...]:
        if uri in self.resources:
            return self.resources[uri]
        for template, scopes in self.templates:
            if template.match(uri) is not None:
                return scopes  # the first matching template decides, as when it is read
        return ()

    def needed(self, message: Any) -> tuple[str, ...]:
        """The scopes one JSON-RPC message needs beyond the base ones."""
        if not isinstance(message, dict):
            return ()
        method, params = message.get("method"), message.get("params")
        if not isinstance(params, dict):
            return ()
        if method == "tools/call":
            return self.tools.get(str(params.get("name")), ())
        if method in ("resources/read", "resources/subscribe"):
            return self.resource(str(params.get("uri")))
        if method == "prompts/get":
            return self.prompts.get(str(params.get("name")), ())
        if method == "completion/complete":
            ref = params.get("ref")
            if isinstance(ref, dict) and ref.get("type") == "ref/prompt":
                return self.prompts.get(str(ref.get("name")), ())
            if isinstance(ref, dict) and ref.get("type") == "ref/resource":
                return self.resource(str(ref.get("uri")))
        return ()


def _union(*groups: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(s for g in groups for s in g))


def _quoted(value: str) -> str:
    return '"' + value.replace("\\", "").replace('"', "'") + '"'


class _ScopeGuard:
    """A server middleware refusing, with a JSON-RPC error, an operation whose scopes the
    caller's token lacks (requests not authenticated over HTTP pass)."""

    def __init__(self, policy: _Policy) -> None:
        self.policy = policy

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        identity = current_identity()
        if identity is not None:
            params = ctx.params
            message = {"method": ctx.method, "params": dict(params) if params else {}}
            needed = self.policy.needed(message)
            if needed and not identity.has_scopes(needed):
                lacking = " ".join(s for s in needed if s not in identity.scopes)
                why = f"this request needs the scopes: {lacking}"
                scopes = " ".join(_union(self.policy.base, needed))
                raise MCPError(
                    INVALID_REQUEST,
                    f"Forbidden (insufficient_scope): {why}",
                    data={"error": "insufficient_scope", "error_description": why, "scope": scopes},
                )
        return await call_next(ctx)


class _Protected:
    """The ASGI app in front of the MCP app: metadata document, token check, scopes."""

    def __init__(
        self,
        app: ASGIApp,
        auth: McpAuth,
        resource: str,
        policy: _Policy,
        max_body: int,
        *,
        per_request: bool = True,
    ) -> None:
        self.app, self.auth, self.policy, self.max_body = app, auth, policy, max_body
        self.per_request = per_request
        self.resource = resource
        parsed = urlsplit(resource)
        if parsed.scheme not in ("http", "https") or not parsed.netloc or parsed.fragment:
            raise ValueError(f"McpAuth resource {resource!r} is not an absolute http(s) URL")
        servers = list(auth.authorization_servers) or [auth.verifier.issuer]
        self.metadata_url = str(build_resource_metadata_url(AnyHttpUrl(resource)))
        self.metadata_path = urlsplit(self.metadata_url).path
        supported = auth.scopes_supported
        if supported is None:
            supported = list(policy.base) or None
        self.metadata = Router(
            routes=create_protected_resource_routes(
                # strings, not AnyHttpUrl: that would add a "/" to a path-less issuer,
                # which clients compare exactly (RFC 8414)
                resource_url=typing.cast(Any, resource),
                authorization_servers=typing.cast(Any, list(servers)),
                scopes_supported=list(supported) if supported is not None else None,
                resource_name=auth.resource_name,
                resource_documentation=(
                    AnyHttpUrl(auth.resource_documentation) if auth.resource_documentation else None
                ),
            )
        )
        self.challenge_scopes = list(policy.base) or list(supported or ())

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        if scope["path"] == self.metadata_path:
            await self.metadata(scope, receive, send)
            return
        scheme, token = _credentials(scope)
        if token is None:
            await self._refuse(send, 401, None, "", self.challenge_scopes)
            return
        try:
            access = await self.auth._access_token(token, self.resource)
            identity = self.auth._identity(access)
        except InvalidToken as e:
            log.info("refused a bearer token: %s", e)
            await self._refuse(send, 401, "invalid_token", str(e), self.challenge_scopes)
            return
        except VerifierUnavailable as e:
            await self._unavailable(send, str(e))
            return
        jkt = _bound_key(access)
        if jkt is not None or scheme == "dpop":
            try:
                self._check_dpop(scope, scheme, token, jkt)
            except DpopProofError as e:
                log.info("refused a DPoP request: %s", e)
                await self._refuse_dpop(send, e.error, str(e))
                return
        del token
        needed, request_id = self.policy.base, None
        if scope["method"] == "POST" and self.per_request:
            receive, wanted, request_id = await self._inspect(receive)
            needed = _union(needed, wanted)
        if not identity.has_scopes(needed):
            # every scope the request needs in one challenge, so one step-up is enough
            lacking = " ".join(s for s in needed if s not in identity.scopes)
            why = f"this request needs the scopes: {lacking}"
            await self._refuse(send, 403, "insufficient_scope", why, needed, request_id)
            return
        scope["user"] = AuthenticatedUser(access)
        scope["auth"] = AuthCredentials(sorted(identity.scopes))
        sdk_token = auth_context_var.set(scope["user"])
        try:
            with use_identity(identity):
                await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(sdk_token)

    async def _inspect(self, receive: Any) -> tuple[Any, tuple[str, ...], Any]:
        """Read the request body (up to the size limit) to find the scopes the JSON-RPC
        message(s) in it need: a `receive` that replays it, the scopes, and the id of the
        request when the body is one (else None)."""
        chunks: list[bytes] = []
        size = 0
        more = True
        tail: list[Any] = []
        while more:
            message = await receive()
            if message["type"] != "http.request":
                tail.append(message)
                break
            body = message.get("body", b"")
            chunks.append(body)
            size += len(body)
            more = bool(message.get("more_body", False))
            if size > self.max_body:
                break  # the app refuses it (413); not ours to parse
        data = b"".join(chunks)
        replay = [{"type": "http.request", "body": data, "more_body": more}, *tail]

        async def replayed() -> Any:
            return replay.pop(0) if replay else await receive()

        needed: tuple[str, ...] = ()
        request_id = None
        if not more and size <= self.max_body:
            try:
                parsed = json.loads(data)
            except ValueError:
                parsed = None
            messages = parsed if isinstance(parsed, list) else [parsed]
            needed = _union(*(self.policy.needed(m) for m in messages))
            if isinstance(parsed, dict) and isinstance(parsed.get("id"), (str, int)):
                request_id = parsed["id"]
        return replayed, needed, request_id

    async def _refuse(
        self,
        send: Any,
        status: int,
        error: str | None,
        description: str,
        scopes: Sequence[str],
        request_id: Any = None,
    ) -> None:
        parts = []
        if error is not None:
            parts.append(f"error={_quoted(error)}")
            if description:
                parts.append(f"error_description={_quoted(description)}")
        if scopes:
            parts.append(f"scope={_quoted(' '.join(scopes))}")
        parts.append(f"resource_metadata={_quoted(self.metadata_url)}")
        body: dict[str, Any] = {"error": error or "unauthorized"}
        body["error_description"] = description or "a bearer token is required"
        if request_id is not None:
            # A JSON-RPC request refused for its scopes: the body is its JSON-RPC error, so
            # a client without an OAuth flow still reads what was missing.
            data = {**body, "scope": " ".join(scopes)}
            message = f"Forbidden ({error}): {description}"
            body = {
                "jsonrpc": "2.0",
                "id": request_id,
                "error": {"code": INVALID_REQUEST, "message": message, "data": data},
            }
        await _send_json(
            send, status, body, [(b"www-authenticate", ("Bearer " + ", ".join(parts)).encode())]
        )

    def _check_dpop(self, scope: Any, scheme: str, token: str, jkt: str | None) -> None:
        """A DPoP-bound token must come as ``Authorization: DPoP`` with one valid proof
        for this request; a DPoP token must be bound."""
        if jkt is None:
            raise DpopProofError("invalid_token", "a DPoP token must be bound to a key (cnf.jkt)")
        if scheme != "dpop":
            raise DpopProofError(
                "invalid_token", "the token is DPoP-bound: send it as DPoP with a proof"
            )
        proofs = [v for k, v in scope.get("headers", ()) if k.lower() == b"dpop"]
        if len(proofs) != 1:
            raise DpopProofError("invalid_dpop_proof", "the request needs one DPoP proof")
        origin = urlsplit(self.resource)
        url = f"{origin.scheme}://{origin.netloc}{scope.get('path', '/')}"
        self.auth.dpop.check(
            bytes(proofs[0]).decode("latin-1"),
            method=scope["method"],
            url=url,
            access_token=token,
            jkt=jkt,
        )

    async def _refuse_dpop(self, send: Any, error: str, description: str) -> None:
        algs = " ".join(self.auth.dpop.algorithms)
        parts = [f"error={_quoted(error)}", f"error_description={_quoted(description)}"]
        parts += [f"algs={_quoted(algs)}", f"resource_metadata={_quoted(self.metadata_url)}"]
        headers = [(b"www-authenticate", ("DPoP " + ", ".join(parts)).encode())]
        if self.auth.dpop.require_nonce:
            headers.append((b"dpop-nonce", self.auth.dpop.nonce().encode()))
        body = {"error": error, "error_description": description}
        await _send_json(send, 401, body, headers)

    async def _unavailable(self, send: Any, description: str) -> None:
        body = {"error": "temporarily_unavailable", "error_description": description}
        await _send_json(send, 503, body, [(b"retry-after", b"5")])


async def _send_json(
    send: Any, status: int, body: Mapping[str, Any], headers: list[tuple[bytes, bytes]]
) -> None:
    data = json.dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                (b"cache-control", b"no-store"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})


def _credentials(scope: Any) -> tuple[str, str | None]:
    """The scheme (``bearer`` or ``dpop``) and token of the request's Authorization."""
    for name, value in scope.get("headers", ()):
        if name.lower() == b"authorization":
            text: str = bytes(value).decode("latin-1")
            kind, _, token = text.partition(" ")
            token = token.strip()
            if kind.lower() in ("bearer", "dpop") and token:
                return kind.lower(), token
            return "", None
    return "", None


def _bound_key(access: AccessToken) -> str | None:
    """The ``cnf.jkt`` (RFC 9449) a token is bound to, if any."""
    cnf = (access.claims or {}).get("cnf")
    jkt = cnf.get("jkt") if isinstance(cnf, Mapping) else None
    return str(jkt) if jkt is not None else None


def default_resource(host: str, port: int, path: str) -> str | None:
    """The resource URL of a server bound to a loopback `host`:`port` at `path` (None for
    any other bind: its public URL must be given, `McpAuth.resource`)."""
    if host in ("127.0.0.1", "localhost"):
        return f"http://{host}:{port}{path}"
    if host == "::1":
        return f"http://[::1]:{port}{path}"
    return None


CLIENT_SECRET_ENV = "TOOLWEAVE_AUTH_CLIENT_SECRET"
"""The environment variable `toolweave mcp serve --auth introspection` reads the
introspection client's secret from (never a command-line argument: those are visible to
every user of the machine)."""


def auth_from_options(
    kind: str,
    *,
    resource: str | None,
    issuer: str | None = None,
    audience: str | None = None,
    jwks_url: str | None = None,
    key_file: str | None = None,
    introspection_url: str | None = None,
    client_id: str | None = None,
    scopes: Sequence[str] = (),
) -> McpAuth:
    """The `McpAuth` of ``toolweave mcp serve --auth jwt|introspection`` and its
    ``--auth-*`` options (`resource`: the server's public URL)."""
    import os
    from pathlib import Path

    if not resource:
        raise ValueError("--auth needs --auth-resource, the server's URL as clients reach it")
    if kind == "jwt":
        if not issuer:
            raise ValueError("--auth jwt needs --auth-issuer")
        key: Any = None
        if key_file is not None:
            text = Path(key_file).read_text()
            key = json.loads(text) if text.lstrip().startswith("{") else text
        verifier: Any = JwtVerifier(
            issuer=issuer, audience=audience or resource, jwks_url=jwks_url, key=key
        )
    elif kind == "introspection":
        if not introspection_url:
            raise ValueError("--auth introspection needs --auth-introspection-url")
        if not issuer:
            raise ValueError("--auth introspection needs --auth-issuer (its authorization server)")
        verifier = IntrospectionVerifier(
            introspection_url,
            client_id=client_id,
            client_secret=os.environ.get(CLIENT_SECRET_ENV),
            audience=audience or resource,
            issuer=issuer,
        )
    else:
        raise ValueError(f"unknown --auth {kind!r}: use jwt, introspection or MODULE:OBJECT")
    return McpAuth(
        verifier, resource=resource, authorization_servers=[issuer], required_scopes=scopes
    )
