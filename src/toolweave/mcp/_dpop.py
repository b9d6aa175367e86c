"""DPoP (RFC 9449) pieces shared by the client (`client_auth`) and the resource server
(`auth.McpAuth`): the ``htu`` form of a URL, ``ath`` of a token, a JWK's thumbprint, and
`DpopVerifier`, which checks a proof at a resource server."""

from __future__ import annotations

import base64
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import jwt

__all__ = ["DpopProofError", "DpopVerifier", "access_token_hash", "htu", "jwk_thumbprint"]

PROOF_ALGORITHMS = ("ES256", "ES384", "ES512", "RS256", "PS256", "EdDSA")
"""The proof signature algorithms `DpopVerifier` accepts by default (asymmetric only)."""

_THUMBPRINT_MEMBERS = {
    "EC": ("crv", "kty", "x", "y"),
    "RSA": ("e", "kty", "n"),
    "OKP": ("crv", "kty", "x"),
}
_PRIVATE_MEMBERS = ("d", "p", "q", "dp", "dq", "qi", "k")


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def htu(url: str) -> str:
    """`url` as a proof's ``htu``: no query, no fragment, lower-case scheme and host."""
    parts = urlsplit(str(url))
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path or "/", "", ""))


def access_token_hash(token: str) -> str:
    """A proof's ``ath``: base64url(SHA-256(token))."""
    return _b64(hashlib.sha256(token.encode("ascii")).digest())


def jwk_thumbprint(jwk: Mapping[str, Any]) -> str:
    """The RFC 7638 SHA-256 thumbprint of a public JWK (what a bound token's ``cnf.jkt`` is)."""
    members = _THUMBPRINT_MEMBERS.get(str(jwk.get("kty")))
    if members is None or any(m not in jwk for m in members):
        raise ValueError("not an EC, RSA or OKP public JWK")
    canonical = json.dumps({m: jwk[m] for m in members}, separators=(",", ":"), sort_keys=True)
    return _b64(hashlib.sha256(canonical.encode()).digest())


class DpopProofError(Exception):
    """A DPoP proof was refused: `error` is ``invalid_dpop_proof`` or ``use_dpop_nonce``
    (the message says why; it never holds the proof or the token)."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(description)
        self.error = error


@dataclass
class DpopVerifier:
    """Checks DPoP proofs at a resource server (`McpAuth.dpop`): the signature with the
    proof's own ``jwk``, ``typ``, ``htm`` / ``htu`` against the request, ``iat`` within
    `max_age` seconds, a ``jti`` not seen before (kept in memory: one process), ``ath``
    against the access token and the key against the token's ``cnf.jkt``. With
    `require_nonce`, a proof must carry a nonce this verifier issued (``DPoP-Nonce``) in
    the last `nonce_lifetime` seconds."""

    max_age: float = 60.0
    require_nonce: bool = False
    nonce_lifetime: float = 300.0
    algorithms: tuple[str, ...] = PROOF_ALGORITHMS
    _seen: dict[str, float] = field(default_factory=dict, repr=False)
    _nonces: dict[str, float] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def nonce(self) -> str:
        """A nonce to send as ``DPoP-Nonce`` (the newest, or a new one when it is old)."""
        now = time.time()
        with self._lock:
            for value, issued in self._nonces.items():
                if now - issued < self.nonce_lifetime / 2:
                    return value
            value = secrets.token_urlsafe(16)
            self._nonces = {n: t for n, t in self._nonces.items() if now - t < self.nonce_lifetime}
            self._nonces[value] = now
            return value

    def check(
        self, proof: str, *, method: str, url: str, access_token: str, jkt: str | None
    ) -> None:
        """Accept `proof` for a `method` request to `url` with `access_token` (bound to the
        key with thumbprint `jkt`), or raise `DpopProofError`."""
        try:
            header = jwt.get_unverified_header(proof)
        except jwt.PyJWTError as e:
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof is not a JWT") from e
        jwk = header.get("jwk")
        alg = header.get("alg")
        if header.get("typ") != "dpop+jwt":
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof's typ is not dpop+jwt")
        if alg not in self.algorithms:
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof's alg is not accepted")
        if not isinstance(jwk, dict) or any(m in jwk for m in _PRIVATE_MEMBERS):
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof has no public jwk")
        try:
            key = jwt.PyJWK(jwk, algorithm=alg)
            claims = jwt.decode(
                proof,
                key.key,
                algorithms=[alg],
                options={"verify_aud": False, "require": ["iat", "jti", "htm", "htu"]},
            )
        except (jwt.PyJWTError, ValueError, TypeError) as e:
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof's signature fails") from e
        if jkt is None or jwk_thumbprint(jwk) != jkt:
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof's key is not the token's")
        if claims.get("htm") != method.upper():
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof is for another method")
        if not isinstance(claims.get("htu"), str) or htu(claims["htu"]) != htu(url):
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof is for another URL")
        if claims.get("ath") != access_token_hash(access_token):
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof's ath is not the token's")
        now = time.time()
        iat = claims.get("iat")
        if not isinstance(iat, (int, float)) or abs(now - iat) > self.max_age:
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof is too old or too new")
        if self.require_nonce:
            with self._lock:
                issued = self._nonces.get(str(claims.get("nonce")))
            if issued is None or now - issued > self.nonce_lifetime:
                raise DpopProofError("use_dpop_nonce", "the DPoP proof needs this server's nonce")
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti:
            raise DpopProofError("invalid_dpop_proof", "the DPoP proof has no jti")
        with self._lock:
            self._seen = {j: t for j, t in self._seen.items() if t > now}
            if jti in self._seen:
                raise DpopProofError("invalid_dpop_proof", "the DPoP proof was used before (jti)")
            self._seen[jti] = now + 2 * self.max_age
