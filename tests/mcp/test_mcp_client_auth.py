"""DPoP (RFC 9449) and workload-identity JWT bearer / private_key_jwt (RFC 7523) client auth
(`toolweave.mcp.client_auth`): toolweave's McpClient against `toolweave mcp serve --auth jwt`
(a subprocess on 127.0.0.1) and the authorization server of `oauth_server.py` (a thread),
and raw HTTP for what the resource server refuses."""

from __future__ import annotations

import asyncio
import json
import logging
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm
from mcp_support import SERVERS, TEST_TIMEOUT, free_port, wait_for_port
from oauth_server import AuthorizationServer

from toolweave.mcp import (
    ClientAuthError,
    ClientCredentialsAuth,
    DpopKey,
    DpopVerifier,
    JwtBearerAuth,
    McpAuthError,
    McpClient,
    McpServerConfig,
    PrivateKeyJwt,
)
from toolweave.mcp._dpop import DpopProofError, access_token_hash

TOOLS = str(SERVERS / "mcp_auth_tools.py")
NONCE_AUTH = str(SERVERS / "mcp_dpop_auth.py")
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}
WORKLOAD_ISSUER = "https://kubernetes.default.svc"


class Served:
    """`toolweave mcp serve mcp_auth_tools.py --transport http` with `args`, in a subprocess."""

    def __init__(self, *args: str, tmp: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        self.stderr_path = tmp / f"server-{self.port}.stderr"
        self._stderr = self.stderr_path.open("wb")
        argv = [sys.executable, "-m", "toolweave", "mcp", "serve", TOOLS]
        argv += ["--transport", "http", "--port", str(self.port), *args]
        extra = {"AUTH_RESOURCE": self.url, **env} if env is not None else {}
        self.proc = subprocess.Popen(
            argv, env={**os.environ, **extra}, stdout=subprocess.DEVNULL, stderr=self._stderr
        )
        wait_for_port(self.port, self.proc)

    def stop(self) -> str:
        """Stop it; what it wrote to stderr."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self._stderr.close()
        return self.stderr_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def auth_server() -> Iterator[AuthorizationServer]:
    server = AuthorizationServer().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="module")
def served(
    auth_server: AuthorizationServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    args = ["--auth", "jwt", "--auth-issuer", auth_server.issuer]
    args += ["--auth-jwks-url", f"{auth_server.issuer}/jwks"]
    server = Served(*args, tmp=tmp_path_factory.mktemp("served"))
    try:
        yield server
    finally:
        log = server.stop()
        assert "eyJ" not in log  # no token, proof or assertion in the server's log


def config(served: Served) -> McpServerConfig:
    return McpServerConfig(
        server_name="authed",
        client_type="streamable-http",
        params={"url": served.url},
        connect_timeout=30,
    )


def text(result: Any) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


async def whoami(served: Served, auth: httpx2.Auth) -> dict[str, Any]:
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served), auth=auth) as client:
        return dict(json.loads(text(await client.call_tool("whoami", {}))))


def claims_of(token: str) -> dict[str, Any]:
    return dict(jwt.decode(token, options={"verify_signature": False}))


def dpop_token(auth: AuthorizationServer, key: DpopKey, resource: str) -> str:
    """A DPoP-bound token from the token endpoint (client credentials), by hand."""
    cid, secret = auth.add_client(scopes="files:read")
    response = httpx2.post(
        f"{auth.issuer}/token",
        data={"grant_type": "client_credentials", "resource": resource},
        auth=(cid, secret or ""),
        headers={"DPoP": key.proof("POST", f"{auth.issuer}/token")},
    )
    assert response.status_code == 200, response.text
    assert response.json()["token_type"] == "DPoP"
    return str(response.json()["access_token"])


async def post(served: Served, headers: dict[str, str]) -> httpx2.Response:
    h = {"Accept": "application/json, text/event-stream", **headers}
    async with httpx2.AsyncClient(timeout=TEST_TIMEOUT) as http:
        return await http.post(served.url, json=INIT, headers=h)


def dpop_challenge(response: httpx2.Response) -> dict[str, str]:
    scheme, _, rest = response.headers["www-authenticate"].partition(" ")
    assert scheme == "DPoP"
    out = {}
    for part in rest.split('", '):
        key, _, val = part.partition("=")
        out[key.strip()] = val.strip().strip('"')
    return out


# --- DPoP ----------------------------------------------------------------------------------------


async def test_dpop_client_credentials_discovered_bound_and_called(
    served: Served, auth_server: AuthorizationServer
) -> None:
    cid, secret = auth_server.add_client(scopes="files:read")
    key = DpopKey()
    auth = ClientCredentialsAuth(cid, client_secret=secret, dpop=key)
    auth_server.dpop_nonce_required = True  # the first token request is told to use a nonce
    try:
        asked = len(auth_server.token_requests)
        who = await whoami(served, auth)
    finally:
        auth_server.dpop_nonce_required = False
    assert who["client_id"] == cid
    assert who["aud"] == served.url  # the resource came from the discovered metadata
    assert auth.token_endpoint == f"{auth_server.issuer}/token"
    assert len(auth_server.token_requests) - asked == 2  # use_dpop_nonce, then the token
    token = auth._token
    assert token is not None
    assert claims_of(token)["cnf"] == {"jkt": key.thumbprint}


async def test_the_resource_servers_nonce_is_used_after_one_retry(
    auth_server: AuthorizationServer, tmp_path: Path
) -> None:
    # (mcp_auth_tools.py builds its own McpAuth too when AUTH_RESOURCE is set: unused here)
    env = {"AUTH_ISSUER": auth_server.issuer, "AUTH_PUBLIC_KEY": auth_server.public_pem()}
    served = Served("--auth", f"{NONCE_AUTH}:auth", tmp=tmp_path, env=env)
    try:
        key = DpopKey()
        token = dpop_token(auth_server, key, served.url)
        # without the nonce: 401 DPoP error="use_dpop_nonce" with a DPoP-Nonce
        proof = key.proof("POST", served.url, access_token=token)
        response = await post(served, {"Authorization": f"DPoP {token}", "DPoP": proof})
        assert response.status_code == 401
        assert dpop_challenge(response)["error"] == "use_dpop_nonce"
        nonce = response.headers["dpop-nonce"]
        proof = key.proof("POST", served.url, access_token=token, nonce=nonce)
        response = await post(served, {"Authorization": f"DPoP {token}", "DPoP": proof})
        assert response.status_code == 200
        # and the client retries by itself, within the one request
        cid, secret = auth_server.add_client(scopes="files:read")
        auth = ClientCredentialsAuth(cid, client_secret=secret, dpop=DpopKey())
        async with httpx2.AsyncClient(auth=auth, timeout=TEST_TIMEOUT) as http:
            assert (await http.post(served.url, json=INIT, headers=ACCEPT)).status_code == 200
        who = await whoami(served, ClientCredentialsAuth(cid, client_secret=secret, dpop=DpopKey()))
        assert who["client_id"] == cid
    finally:
        log = served.stop()
    assert token not in log


@pytest.mark.parametrize(
    "case",
    ["bearer", "no-proof", "other-url", "other-method", "other-key", "no-ath", "query-ignored"],
)
async def test_the_resource_server_checks_the_proof(
    served: Served, auth_server: AuthorizationServer, case: str
) -> None:
    key = DpopKey()
    token = dpop_token(auth_server, key, served.url)
    headers = {"Authorization": f"DPoP {token}"}
    ok = key.proof("POST", served.url, access_token=token)
    if case == "bearer":  # a bound token used as a bearer token, without its proof
        headers = {"Authorization": f"Bearer {token}"}
    elif case == "other-url":
        headers["DPoP"] = key.proof("POST", f"{served.url}/other", access_token=token)
    elif case == "other-method":
        headers["DPoP"] = key.proof("GET", served.url, access_token=token)
    elif case == "other-key":
        headers["DPoP"] = DpopKey().proof("POST", served.url, access_token=token)
    elif case == "no-ath":
        headers["DPoP"] = key.proof("POST", served.url)
    elif case == "query-ignored":  # htu has no query: a proof for the URL with one is fine
        headers["DPoP"] = key.proof("POST", f"{served.url}?x=1#f", access_token=token)
    response = await post(served, headers)
    if case == "query-ignored":
        assert response.status_code == 200
        return
    assert response.status_code == 401
    error = dpop_challenge(response)["error"]
    assert error == ("invalid_token" if case == "bearer" else "invalid_dpop_proof")
    # the same token with a good proof passes: only the proof was wrong
    assert (await post(served, {"Authorization": f"DPoP {token}", "DPoP": ok})).status_code == 200


async def test_a_replayed_proof_is_refused(
    served: Served, auth_server: AuthorizationServer
) -> None:
    key = DpopKey()
    token = dpop_token(auth_server, key, served.url)
    headers = {
        "Authorization": f"DPoP {token}",
        "DPoP": key.proof("POST", served.url, access_token=token),
    }
    assert (await post(served, headers)).status_code == 200
    again = await post(served, headers)
    assert again.status_code == 401
    assert "used before" in dpop_challenge(again)["error_description"]


async def test_the_authorization_server_refuses_a_replayed_or_misdirected_proof(
    auth_server: AuthorizationServer,
) -> None:
    cid, secret = auth_server.add_client()
    key = DpopKey()
    endpoint = f"{auth_server.issuer}/token"
    form = {"grant_type": "client_credentials", "resource": "http://127.0.0.1:1/mcp"}
    proof = key.proof("POST", endpoint)
    async with httpx2.AsyncClient(auth=(cid, secret or "")) as http:
        assert (await http.post(endpoint, data=form, headers={"DPoP": proof})).status_code == 200
        replay = await http.post(endpoint, data=form, headers={"DPoP": proof})
        wrong = await http.post(
            endpoint, data=form, headers={"DPoP": key.proof("POST", f"{endpoint}x")}
        )
    assert (replay.status_code, replay.json()["error"]) == (400, "invalid_dpop_proof")
    assert (wrong.status_code, wrong.json()["error"]) == (400, "invalid_dpop_proof")


async def test_the_authorization_servers_refusal_is_a_client_auth_error(
    served: Served, auth_server: AuthorizationServer
) -> None:
    # a proof the authorization server cannot read: its 400 names the error, no token is sent
    class NoProof(DpopKey):
        def proof(self, *args: Any, **kwargs: Any) -> str:
            return "not-a-proof"

    cid, secret = auth_server.add_client()
    auth = ClientCredentialsAuth(
        cid,
        client_secret=secret,
        dpop=NoProof(),
        token_endpoint=f"{auth_server.issuer}/token",
        resource=served.url,
    )
    async with httpx2.AsyncClient(auth=auth, timeout=TEST_TIMEOUT) as http:
        with pytest.raises(ClientAuthError, match="invalid_dpop_proof"):
            await http.post(served.url, json=INIT)


# --- workload identity: JWT bearer grant and private_key_jwt ------------------------------------


def workload_token(
    key: ec.EllipticCurvePrivateKey, aud: str, sub: str, expires_in: int = 600
) -> str:
    """A projected service-account token as Kubernetes would write it."""
    now = int(time.time())
    claims = {"iss": WORKLOAD_ISSUER, "sub": sub, "aud": aud, "iat": now, "exp": now + expires_in}
    return jwt.encode(claims, key, algorithm="ES256", headers={"kid": "sa-key"})


@pytest.fixture(scope="module")
def workload_key(auth_server: AuthorizationServer) -> ec.EllipticCurvePrivateKey:
    key = ec.generate_private_key(ec.SECP256R1())
    auth_server.trust_issuer(WORKLOAD_ISSUER, key.public_key())
    return key


async def test_jwt_bearer_from_a_token_file_reread_on_each_token_request(
    served: Served,
    auth_server: AuthorizationServer,
    workload_key: ec.EllipticCurvePrivateKey,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    endpoint = f"{auth_server.issuer}/token"
    path = tmp_path / "token"
    first = workload_token(workload_key, endpoint, "system:serviceaccount:ns:one")
    path.write_text(first + "\n")
    auth = JwtBearerAuth(assertion_file=path)
    assert (await whoami(served, auth))["subject"] == "system:serviceaccount:ns:one"
    asked = len(auth_server.token_requests)
    assert (await whoami(served, auth))["subject"] == "system:serviceaccount:ns:one"
    assert len(auth_server.token_requests) == asked  # cached: no new token request
    assert (
        auth_server.token_requests[-1]["grant_type"]
        == "urn:ietf:params:oauth:grant-type:jwt-bearer"
    )
    # the kubelet rotates the file; the next token request reads the new one
    path.write_text(workload_token(workload_key, endpoint, "system:serviceaccount:ns:two"))
    auth.invalidate()
    assert (await whoami(served, auth))["subject"] == "system:serviceaccount:ns:two"
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert first not in logged and "eyJ" not in logged


async def test_jwt_bearer_from_a_callable_with_dpop(
    served: Served, auth_server: AuthorizationServer, workload_key: ec.EllipticCurvePrivateKey
) -> None:
    endpoint = f"{auth_server.issuer}/token"

    async def source() -> str:
        return workload_token(workload_key, endpoint, "spiffe://example.org/agent")

    key = DpopKey()
    auth = JwtBearerAuth(assertion=source, token_endpoint=endpoint, dpop=key)
    who = await whoami(served, auth)
    assert who["subject"] == "spiffe://example.org/agent"
    assert who["aud"] == served.url  # no resource= given: the server's URL
    assert auth._token is not None and claims_of(auth._token)["cnf"]["jkt"] == key.thumbprint


@pytest.mark.parametrize("case", ["expired", "other-audience", "untrusted-issuer"])
async def test_a_bad_assertion_is_refused(
    served: Served,
    auth_server: AuthorizationServer,
    workload_key: ec.EllipticCurvePrivateKey,
    case: str,
) -> None:
    endpoint = f"{auth_server.issuer}/token"
    if case == "expired":
        assertion = workload_token(workload_key, endpoint, "sa", expires_in=-120)
    elif case == "other-audience":
        assertion = workload_token(workload_key, "https://elsewhere/token", "sa")
    else:
        assertion = workload_token(ec.generate_private_key(ec.SECP256R1()), endpoint, "sa")
    auth = JwtBearerAuth(assertion=lambda: assertion)
    async with httpx2.AsyncClient(auth=auth, timeout=TEST_TIMEOUT) as http:
        with pytest.raises(ClientAuthError, match="invalid_grant") as caught:
            await http.post(served.url, json=INIT)
    assert assertion not in str(caught.value)


def registered_client(auth: AuthorizationServer) -> tuple[str, ec.EllipticCurvePrivateKey]:
    key = ec.generate_private_key(ec.SECP256R1())
    jwk = {**ECAlgorithm.to_jwk(key.public_key(), as_dict=True), "kid": "k1"}
    cid, secret = auth.add_client(scopes="files:read", jwk=jwk)
    assert secret is None
    return cid, key


async def test_private_key_jwt_client_credentials_with_an_explicit_endpoint_and_dpop(
    served: Served, auth_server: AuthorizationServer
) -> None:
    cid, key = registered_client(auth_server)
    endpoint = f"{auth_server.issuer}/token"
    auth = ClientCredentialsAuth(
        private_key_jwt=PrivateKeyJwt(cid, key, kid="k1"),
        token_endpoint=endpoint,
        resource=served.url,
        dpop=DpopKey(),
    )
    who = await whoami(served, auth)
    assert who["client_id"] == cid
    sent = auth_server.token_requests[-1]
    assert sent["client_assertion_type"] == "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"


@pytest.mark.parametrize("case", ["other-key", "other-audience", "no-assertion"])
async def test_private_key_jwt_with_a_wrong_key_or_audience_is_invalid_client(
    served: Served, auth_server: AuthorizationServer, case: str
) -> None:
    cid, key = registered_client(auth_server)
    if case == "other-key":
        key = ec.generate_private_key(ec.SECP256R1())
    audience = "https://elsewhere/token" if case == "other-audience" else None
    if case == "no-assertion":
        auth: httpx2.Auth = ClientCredentialsAuth(cid)  # the client id alone
    else:
        auth = ClientCredentialsAuth(private_key_jwt=PrivateKeyJwt(cid, key, audience=audience))
    async with httpx2.AsyncClient(auth=auth, timeout=TEST_TIMEOUT) as http:
        with pytest.raises(ClientAuthError, match="invalid_client"):
            await http.post(served.url, json=INIT)


async def test_a_401_fetches_a_new_token_once(
    served: Served, auth_server: AuthorizationServer
) -> None:
    cid, secret = auth_server.add_client(scopes="files:read")
    auth = ClientCredentialsAuth(cid, client_secret=secret, dpop=DpopKey())
    async with httpx2.AsyncClient(auth=auth, timeout=TEST_TIMEOUT) as http:
        assert (await http.post(served.url, json=INIT, headers=ACCEPT)).status_code == 200
        first = auth._token
        # a token the server refuses (signed by a stranger), though not expired here
        auth._token = "eyJ.bad.token-" + uuid.uuid4().hex
        assert (await http.post(served.url, json=INIT, headers=ACCEPT)).status_code == 200
    assert auth._token not in (None, first) and str(auth._token).count(".") == 2


ACCEPT = {"Accept": "application/json, text/event-stream"}


async def test_mcp_client_reports_a_refused_assertion_as_an_auth_error(
    served: Served, auth_server: AuthorizationServer, workload_key: ec.EllipticCurvePrivateKey
) -> None:
    expired = workload_token(workload_key, f"{auth_server.issuer}/token", "sa", expires_in=-120)
    with pytest.raises(McpAuthError, match="invalid_grant") as caught:
        await whoami(served, JwtBearerAuth(assertion=lambda: expired))
    assert expired not in str(caught.value)


# --- DpopVerifier (the resource server's check) by itself ------------------------------------


def forged(key: DpopKey, claims: dict[str, Any], **header: Any) -> str:
    """A proof with the claims and header given (signed with `key`)."""
    headers = {"typ": "dpop+jwt", "jwk": key.public_jwk, **header}
    return jwt.encode(claims, key._key, algorithm="ES256", headers=headers)


@pytest.mark.parametrize("case", ["old-iat", "future-iat", "private-jwk", "typ", "hs256"])
def test_the_verifier_refuses_a_malformed_proof(case: str) -> None:
    key = DpopKey()
    url, token = "http://127.0.0.1:1/mcp", "a-token"
    good = {"htm": "POST", "htu": url, "ath": access_token_hash(token), "jti": uuid.uuid4().hex}
    now = int(time.time())
    verifier = DpopVerifier()
    if case == "old-iat":
        proof = forged(key, {**good, "iat": now - 600})
    elif case == "future-iat":
        proof = forged(key, {**good, "iat": now + 600})
    elif case == "private-jwk":
        private = ECAlgorithm.to_jwk(key._key, as_dict=True)
        proof = forged(key, {**good, "iat": now}, jwk=private)
    elif case == "typ":
        proof = forged(key, {**good, "iat": now}, typ="JWT")
    else:
        proof = jwt.encode(
            {**good, "iat": now},
            "k" * 32,
            algorithm="HS256",
            headers={"typ": "dpop+jwt", "jwk": key.public_jwk},
        )
    with pytest.raises(DpopProofError) as caught:
        verifier.check(proof, method="POST", url=url, access_token=token, jkt=key.thumbprint)
    assert caught.value.error == "invalid_dpop_proof"
    # the same claims, well formed, pass
    verifier.check(
        forged(key, {**good, "jti": uuid.uuid4().hex, "iat": now}),
        method="POST",
        url=url,
        access_token=token,
        jkt=key.thumbprint,
    )


def test_the_verifier_accepts_only_its_own_nonces() -> None:
    key = DpopKey()
    url, token = "http://127.0.0.1:1/mcp", "a-token"
    verifier = DpopVerifier(require_nonce=True)

    def check(nonce: str | None) -> None:
        proof = key.proof("POST", url, access_token=token, nonce=nonce)
        verifier.check(proof, method="POST", url=url, access_token=token, jkt=key.thumbprint)

    for nonce in (None, "made-up", DpopVerifier(require_nonce=True).nonce()):
        with pytest.raises(DpopProofError) as caught:
            check(nonce)
        assert caught.value.error == "use_dpop_nonce"
    check(verifier.nonce())
