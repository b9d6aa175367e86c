"""A small OAuth 2.1 authorization server on 127.0.0.1 for the auth tests.

It serves what a real one does: RFC 8414 metadata, a JWKS (ES256 keys, rotatable), dynamic
client registration, an authorization endpoint that approves at once (no user to ask),
a token endpoint (authorization_code with PKCE S256, client_credentials, refresh_token;
RFC 8707 ``resource`` becomes the token's ``aud``) and RFC 7662 introspection. The tests
also ask it directly for tokens with odd claims (`mint`).

For the client auth tests it also binds tokens to a DPoP key (RFC 9449: the proof's
signature with its own jwk, htm/htu, iat, jti replay, nonces when `dpop_nonce_required`;
``cnf.jkt`` in the token), grants the JWT bearer grant (RFC 7523 §2.1, assertions signed by
an issuer `trust_issuer` registered) and authenticates clients by ``private_key_jwt``
(RFC 7523 §2.2, against the key `add_client(jwk=...)` registered; ``aud`` = the token
endpoint).
"""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
import uuid
from typing import Any
from urllib.parse import urlencode

import jwt
import uvicorn
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from mcp_support import free_port
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
CLIENT_ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


class AuthorizationServer:
    """The server, run on a thread; `issuer` is its URL."""

    def __init__(self, *, refresh_tokens: bool = True) -> None:
        self.refresh_tokens = refresh_tokens
        self.authorizations: list[dict[str, Any]] = []  # the query of each /authorize
        self.port = free_port()
        self.issuer = f"http://127.0.0.1:{self.port}"
        self.keys: list[tuple[str, ec.EllipticCurvePrivateKey]] = []
        self.rotate()
        self.clients: dict[str, dict[str, Any]] = {}
        self.codes: dict[str, dict[str, Any]] = {}
        self.refresh: dict[str, dict[str, Any]] = {}
        self.issued: dict[str, dict[str, Any]] = {}  # jti -> claims
        self.revoked: set[str] = set()
        self.jwks_hits = 0
        self.introspections = 0
        self.granted_scopes: list[str] = []  # the scope of each token issued at /token
        self.dpop_nonce_required = False
        self.dpop_nonces: list[str] = []  # issued, newest last
        self.dpop_jtis: set[str] = set()
        self.assertion_jtis: set[str] = set()
        self.trusted_issuers: dict[str, Any] = {}  # iss -> public key (JWT bearer grant)
        self.token_requests: list[dict[str, str]] = []  # each /token form, secrets removed
        app = Starlette(
            routes=[
                Route("/.well-known/oauth-authorization-server", self.metadata),
                Route("/jwks", self.jwks),
                Route("/register", self.register, methods=["POST"]),
                Route("/authorize", self.authorize),
                Route("/token", self.token, methods=["POST"]),
                Route("/introspect", self.introspect, methods=["POST"]),
            ]
        )
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)

    # -- test controls ---------------------------------------------------------------------
    def start(self) -> AuthorizationServer:
        self._thread.start()
        deadline = time.monotonic() + 30
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the authorization server did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)

    def rotate(self) -> str:
        """A new signing key (the old one stays published); its kid."""
        kid = f"key-{len(self.keys) + 1}-{secrets.token_hex(4)}"
        self.keys.append((kid, ec.generate_private_key(ec.SECP256R1())))
        return kid

    def add_client(
        self, *, scopes: str = "", secret: bool = True, jwk: dict[str, Any] | None = None
    ) -> tuple[str, str | None]:
        """A pre-registered client: (client_id, client_secret); with `jwk` (a public key) it
        authenticates by private_key_jwt, and has no secret."""
        cid = f"client-{uuid.uuid4().hex[:8]}"
        sec = secrets.token_urlsafe(16) if secret and jwk is None else None
        self.clients[cid] = {"secret": sec, "scope": scopes, "redirect_uris": [], "jwk": jwk}
        return cid, sec

    def trust_issuer(self, issuer: str, public_key: Any) -> None:
        """Accept JWT bearer grant assertions that `issuer` signs with `public_key`."""
        self.trusted_issuers[issuer] = public_key

    def mint(
        self,
        *,
        audience: str | list[str],
        scope: str = "",
        subject: str = "alice",
        expires_in: int = 300,
        issuer: str | None = None,
        kid: str | None = None,
        key: ec.EllipticCurvePrivateKey | None = None,
        client_id: str = "test-client",
        **claims: Any,
    ) -> str:
        """A signed access token (with the newest key unless `kid`/`key` say otherwise)."""
        now = int(time.time())
        jti = uuid.uuid4().hex
        body = {
            "iss": issuer or self.issuer,
            "sub": subject,
            "aud": audience,
            "scope": scope,
            "client_id": client_id,
            "iat": now,
            "exp": now + expires_in,
            "jti": jti,
            **claims,
        }
        use_kid, use_key = self.keys[-1]
        if kid is not None:
            use_kid = kid
            use_key = key or dict(self.keys).get(kid) or use_key
        self.issued[jti] = body
        return jwt.encode(
            body, use_key, algorithm="ES256", headers={"kid": use_kid, "typ": "at+jwt"}
        )

    def public_pem(self) -> str:
        """The newest signing key's public half, PEM (for a server given a static key)."""
        from cryptography.hazmat.primitives import serialization

        return (
            self.keys[-1][1]
            .public_key()
            .public_bytes(
                serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
            )
            .decode()
        )

    def public_jwk(self) -> dict[str, Any]:
        """The newest signing key's public half, as a JWK (with its kid)."""
        kid, key = self.keys[-1]
        return {**ECAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": kid}

    def revoke(self, token: str) -> None:
        self.revoked.add(jwt.decode(token, options={"verify_signature": False})["jti"])

    # -- endpoints -------------------------------------------------------------------------
    async def metadata(self, request: Request) -> Response:
        i = self.issuer
        return JSONResponse(
            {
                "issuer": i,
                "authorization_endpoint": f"{i}/authorize",
                "token_endpoint": f"{i}/token",
                "registration_endpoint": f"{i}/register",
                "introspection_endpoint": f"{i}/introspect",
                "jwks_uri": f"{i}/jwks",
                "response_types_supported": ["code"],
                "grant_types_supported": [
                    "authorization_code",
                    "client_credentials",
                    "refresh_token",
                    "urn:ietf:params:oauth:grant-type:jwt-bearer",
                ],
                "dpop_signing_alg_values_supported": ["ES256"],
                "code_challenge_methods_supported": ["S256"],
                "token_endpoint_auth_methods_supported": [
                    "client_secret_basic",
                    "client_secret_post",
                    "private_key_jwt",
                    "none",
                ],
                "token_endpoint_auth_signing_alg_values_supported": ["ES256"],
                "authorization_response_iss_parameter_supported": True,
            }
        )

    async def jwks(self, request: Request) -> Response:
        self.jwks_hits += 1
        keys = []
        for kid, key in self.keys:
            jwk = ECAlgorithm.to_jwk(key.public_key(), as_dict=True)
            keys.append({**jwk, "kid": kid, "use": "sig", "alg": "ES256"})
        return JSONResponse({"keys": keys})

    async def register(self, request: Request) -> Response:
        meta = await request.json()
        cid = f"dcr-{uuid.uuid4().hex[:8]}"
        method = meta.get("token_endpoint_auth_method", "client_secret_basic")
        sec = None if method == "none" else secrets.token_urlsafe(16)
        self.clients[cid] = {
            "secret": sec,
            "scope": meta.get("scope", ""),
            "redirect_uris": meta.get("redirect_uris", []),
        }
        out = {**meta, "client_id": cid, "client_id_issued_at": int(time.time())}
        if sec is not None:
            out["client_secret"] = sec
        return JSONResponse(out, status_code=201)

    async def authorize(self, request: Request) -> Response:
        q = request.query_params
        self.authorizations.append(dict(q))
        client = self.clients.get(q.get("client_id", ""))
        redirect = q.get("redirect_uri", "")
        if client is None or redirect not in client["redirect_uris"]:
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        if q.get("code_challenge_method") != "S256" or not q.get("code_challenge"):
            return JSONResponse({"error": "invalid_request"}, status_code=400)
        code = secrets.token_urlsafe(16)
        self.codes[code] = {
            "client_id": q["client_id"],
            "challenge": q["code_challenge"],
            "redirect_uri": redirect,
            "scope": q.get("scope", ""),
            "resource": q.get("resource"),
        }
        params = {"code": code, "iss": self.issuer}
        if q.get("state"):
            params["state"] = q["state"]
        return RedirectResponse(f"{redirect}?{urlencode(params)}", status_code=302)

    def _client(self, request: Request, form: Any) -> str | None:
        if form.get("client_assertion_type") == CLIENT_ASSERTION_TYPE:
            return self._asserted_client(form)
        header = request.headers.get("authorization", "")
        if header.lower().startswith("basic "):
            cid, _, sec = base64.b64decode(header[6:]).decode().partition(":")
        else:
            cid, sec = form.get("client_id", ""), form.get("client_secret")
        client = self.clients.get(cid)
        if client is None or (client["secret"] is not None and client["secret"] != sec):
            return None
        if client.get("jwk") is not None:
            return None  # a private_key_jwt client must send its assertion
        return cid

    def _asserted_client(self, form: Any) -> str | None:
        """private_key_jwt: the client whose registered key signed the assertion."""
        assertion = str(form.get("client_assertion", ""))
        try:
            cid = jwt.decode(assertion, options={"verify_signature": False})["iss"]
            jwk = self.clients[cid]["jwk"]
            claims = jwt.decode(
                assertion,
                jwt.PyJWK(jwk).key,
                algorithms=["ES256"],
                audience=f"{self.issuer}/token",
                options={"require": ["iss", "sub", "aud", "exp", "jti"]},
            )
        except (jwt.PyJWTError, KeyError, TypeError):
            return None
        if claims["sub"] != cid or form.get("client_id", cid) != cid:
            return None
        if claims["jti"] in self.assertion_jtis:
            return None
        self.assertion_jtis.add(claims["jti"])
        return str(cid)

    def _grant_assertion(self, form: Any) -> dict[str, Any] | None:
        """The JWT bearer grant: the assertion's claims, if a trusted issuer signed it for
        this token endpoint and it has not expired."""
        assertion = str(form.get("assertion", ""))
        try:
            iss = jwt.decode(assertion, options={"verify_signature": False})["iss"]
            claims: dict[str, Any] = jwt.decode(
                assertion,
                self.trusted_issuers[iss],
                algorithms=["ES256", "RS256"],
                audience=f"{self.issuer}/token",
                options={"require": ["iss", "sub", "aud", "exp"]},
            )
        except (jwt.PyJWTError, KeyError, TypeError):
            return None
        return claims

    def _dpop_key(self, request: Request) -> tuple[str | None, Response | None]:
        """The thumbprint of the key of the request's DPoP proof (None without one), or the
        400 that refuses the proof."""
        proof = request.headers.get("dpop")
        if proof is None:
            return None, None

        def refuse(error: str, why: str) -> tuple[None, Response]:
            body = {"error": error, "error_description": why}
            headers = {}
            if error == "use_dpop_nonce":
                self.dpop_nonces.append(secrets.token_urlsafe(12))
                headers["DPoP-Nonce"] = self.dpop_nonces[-1]
            return None, JSONResponse(body, status_code=400, headers=headers)

        try:
            header = jwt.get_unverified_header(proof)
            if header.get("typ") != "dpop+jwt" or header.get("alg") != "ES256":
                return refuse("invalid_dpop_proof", "typ or alg")
            jwk = header["jwk"]
            if "d" in jwk:
                return refuse("invalid_dpop_proof", "a private key in the proof")
            claims = jwt.decode(proof, jwt.PyJWK(jwk).key, algorithms=["ES256"])
        except (jwt.PyJWTError, KeyError, TypeError, ValueError):
            return refuse("invalid_dpop_proof", "bad signature")
        if claims.get("htm") != "POST" or claims.get("htu") != f"{self.issuer}/token":
            return refuse("invalid_dpop_proof", "htm or htu")
        if abs(time.time() - claims.get("iat", 0)) > 60 or "ath" in claims:
            return refuse("invalid_dpop_proof", "iat or ath")
        if claims.get("jti") in self.dpop_jtis or not claims.get("jti"):
            return refuse("invalid_dpop_proof", "jti replayed")
        if self.dpop_nonce_required and claims.get("nonce") not in self.dpop_nonces[-2:]:
            return refuse("use_dpop_nonce", "use the nonce")
        self.dpop_jtis.add(claims["jti"])
        members = {m: jwk[m] for m in ("crv", "kty", "x", "y")}
        canonical = json.dumps(members, separators=(",", ":"), sort_keys=True).encode()
        digest = base64.urlsafe_b64encode(hashlib.sha256(canonical).digest())
        return digest.rstrip(b"=").decode(), None

    async def token(self, request: Request) -> Response:
        form = await request.form()
        hidden = ("client_secret", "client_assertion", "assertion", "refresh_token", "code")
        self.token_requests.append({k: str(v) for k, v in form.items() if k not in hidden})
        jkt, refused = self._dpop_key(request)
        if refused is not None:
            return refused
        grant = form.get("grant_type")
        resource = form.get("resource")
        if grant == JWT_BEARER_GRANT:
            asserted = self._grant_assertion(form)
            if asserted is None:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            has_auth = "client_assertion" in form or "authorization" in request.headers
            cid = self._client(request, form) if has_auth else "workload"
            if cid is None:
                return JSONResponse({"error": "invalid_client"}, status_code=401)
            if not resource:
                return JSONResponse({"error": "invalid_target"}, status_code=400)
            scope = str(form.get("scope") or "")
            self.granted_scopes.append(scope)
            return self._issue(str(resource), scope, str(asserted["sub"]), cid, jkt)
        cid = self._client(request, form)
        if cid is None:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        if grant == "authorization_code":
            code = self.codes.pop(str(form.get("code")), None)
            verifier = str(form.get("code_verifier", ""))
            digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
            if code is None or code["client_id"] != cid:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            if digest.rstrip(b"=").decode() != code["challenge"]:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            scope, resource = code["scope"], resource or code["resource"]
        elif grant == "client_credentials":
            scope = str(form.get("scope") or self.clients[cid]["scope"])
        elif grant == "refresh_token":
            old = self.refresh.get(str(form.get("refresh_token")))
            if old is None or old["client_id"] != cid:
                return JSONResponse({"error": "invalid_grant"}, status_code=400)
            scope, resource = str(form.get("scope") or old["scope"]), resource or old["resource"]
        else:
            return JSONResponse({"error": "unsupported_grant_type"}, status_code=400)
        if not resource:
            return JSONResponse({"error": "invalid_target"}, status_code=400)
        self.granted_scopes.append(str(scope))
        if jkt is not None:
            return self._issue(str(resource), str(scope), f"user-of-{cid}", cid, jkt)
        access = self.mint(
            audience=str(resource), scope=str(scope), subject=f"user-of-{cid}", client_id=cid
        )
        answer = {"access_token": access, "token_type": "Bearer", "expires_in": 300, "scope": scope}
        if self.refresh_tokens:
            refresh = secrets.token_urlsafe(16)
            self.refresh[refresh] = {"client_id": cid, "scope": scope, "resource": resource}
            answer["refresh_token"] = refresh
        return JSONResponse(answer, headers={"Cache-Control": "no-store"})

    def _issue(
        self, resource: str, scope: str, subject: str, cid: str, jkt: str | None
    ) -> Response:
        """A token without a refresh token; DPoP-bound (``cnf.jkt``) when `jkt`."""
        extra: dict[str, Any] = {"cnf": {"jkt": jkt}} if jkt is not None else {}
        access = self.mint(audience=resource, scope=scope, subject=subject, client_id=cid, **extra)
        answer = {
            "access_token": access,
            "token_type": "DPoP" if jkt is not None else "Bearer",
            "expires_in": 300,
            "scope": scope,
        }
        return JSONResponse(answer, headers={"Cache-Control": "no-store"})

    async def introspect(self, request: Request) -> Response:
        form = await request.form()
        if self._client(request, form) is None:
            return JSONResponse({"error": "invalid_client"}, status_code=401)
        self.introspections += 1
        token = str(form.get("token", ""))
        try:
            claims = jwt.decode(token, options={"verify_signature": False})
        except jwt.PyJWTError:
            return JSONResponse({"active": False})
        jti = claims.get("jti")
        if jti not in self.issued or jti in self.revoked or claims["exp"] < time.time():
            return JSONResponse({"active": False})
        return JSONResponse({"active": True, "token_type": "Bearer", **self.issued[jti]})
