"""`toolweave mcp serve --auth ...` / `serve_mcp(auth=McpAuth(...))` as an OAuth 2.1
resource server, against a real authorization server on 127.0.0.1 (`oauth_server.py`), with
toolweave's McpClient, the Python SDK's client and raw HTTP."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp_support import SERVERS, TEST_TIMEOUT, free_port, wait_for_port
from oauth_server import AuthorizationServer

from toolweave.mcp import McpAuthError, McpClient, McpServerConfig

TOOLS = str(SERVERS / "mcp_auth_tools.py")
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


class Served:
    """`toolweave mcp serve` (or, `script`, mcp_auth_tools.py run by itself) in a subprocess
    on a free port; its stderr is kept (to check for tokens)."""

    def __init__(
        self,
        *auth_args: str,
        tmp: Path,
        env: dict[str, str] | None = None,
        script: str | None = None,
        port: int | None = None,
    ) -> None:
        self.port = port or free_port()
        where = "/sse" if script == "sse" else "/mcp"
        self.url = f"http://127.0.0.1:{self.port}{where}"
        self.metadata_url = (
            f"http://127.0.0.1:{self.port}/.well-known/oauth-protected-resource{where}"
        )
        self.stderr_path = tmp / f"server-{self.port}.stderr"
        self._stderr = self.stderr_path.open("wb")
        if script is not None:
            argv = [sys.executable, TOOLS, script, str(self.port)]
        else:
            argv = [sys.executable, "-m", "toolweave", "mcp", "serve", TOOLS]
            argv += ["--transport", "http", "--port", str(self.port), *auth_args]
        self.proc = subprocess.Popen(
            argv, env={**os.environ, **(env or {})}, stdout=subprocess.DEVNULL, stderr=self._stderr
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


def text(result: Any) -> str:
    return "".join(getattr(b, "text", "") for b in result.content)


def jwt_args(auth: AuthorizationServer, *extra: str) -> list[str]:
    return [
        "--auth",
        "jwt",
        "--auth-issuer",
        auth.issuer,
        "--auth-jwks-url",
        f"{auth.issuer}/jwks",
        *extra,
    ]


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
    server = Served(*jwt_args(auth_server), tmp=tmp_path_factory.mktemp("served"))
    try:
        yield server
    finally:
        server.stop()


def config(served: Served, token: str | None) -> McpServerConfig:
    headers = {"Authorization": f"Bearer {token}"} if token is not None else {}
    return McpServerConfig(
        server_name="authed",
        client_type="sse" if served.url.endswith("/sse") else "streamable-http",
        params={"url": served.url},
        auth_headers=headers,
        connect_timeout=30,
    )


async def post(
    served: Served, token: str | None, message: dict[str, Any] = INIT, **headers: str
) -> httpx2.Response:
    h = {"Accept": "application/json, text/event-stream", **headers}
    if token is not None:
        h["Authorization"] = f"Bearer {token}"
    async with httpx2.AsyncClient(timeout=TEST_TIMEOUT) as http:
        return await http.post(served.url, json=message, headers=h)


def challenge(response: httpx2.Response) -> dict[str, str]:
    """The parameters of a ``WWW-Authenticate: Bearer k="v", ...`` header."""
    value = response.headers["www-authenticate"]
    scheme, _, rest = value.partition(" ")
    assert scheme == "Bearer"
    out = {}
    for part in rest.split('", '):
        key, _, val = part.partition("=")
        out[key.strip()] = val.strip().strip('"')
    return out


def token_for(auth: AuthorizationServer, resource: str, scope: str) -> str:
    """A token from the authorization server's token endpoint (client_credentials, RFC 8707
    resource)."""
    cid, secret = auth.add_client(scopes=scope)
    response = httpx2.post(
        f"{auth.issuer}/token",
        data={"grant_type": "client_credentials", "resource": resource, "scope": scope},
        auth=(cid, secret or ""),
    )
    response.raise_for_status()
    return str(response.json()["access_token"])


# --- discovery -----------------------------------------------------------------------------------


async def test_the_metadata_document_names_the_resource_and_its_authorization_server(
    served: Served, auth_server: AuthorizationServer
) -> None:
    async with httpx2.AsyncClient() as http:
        doc = (await http.get(served.metadata_url)).json()
    assert doc["resource"] == served.url
    assert doc["authorization_servers"] == [auth_server.issuer]  # exactly: no "/" added
    assert doc["bearer_methods_supported"] == ["header"]


async def test_no_token_is_401_pointing_at_the_metadata(served: Served) -> None:
    response = await post(served, None)
    assert response.status_code == 401
    params = challenge(response)
    assert params["resource_metadata"] == served.metadata_url
    assert "error" not in params  # RFC 6750 §3.1: no error code when no credentials were sent


# --- tokens --------------------------------------------------------------------------------------


async def test_a_valid_token_reaches_the_tools_and_its_identity_is_on_the_tool_context(
    served: Served, auth_server: AuthorizationServer
) -> None:
    token = token_for(auth_server, served.url, "files:read profile")
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served, token)) as client:
        for name in ("whoami", "whoami_sync"):
            who = json.loads(text(await client.call_tool(name, {})))
            assert who["subject"].startswith("user-of-client-")
            assert who["client_id"] == who["subject"].removeprefix("user-of-")
            assert who["issuer"] == auth_server.issuer
            assert who["scopes"] == ["files:read", "profile"]
            assert who["aud"] == served.url
            assert who["has_files_write"] is False


@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_the_sdk_client_with_a_bearer_token(
    served: Served, auth_server: AuthorizationServer, mode: str
) -> None:
    token = auth_server.mint(audience=served.url, scope="files:read", subject="bob")
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=TEST_TIMEOUT)
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        http,
        Client(streamable_http_client(served.url, http_client=http), mode=mode) as client,
    ):
        result = await client.call_tool("whoami", {})
        who = json.loads(result.content[0].text)  # type: ignore[union-attr]
        assert (who["subject"], who["has_files_write"]) == ("bob", False)
        with pytest.raises(MCPError) as refused:  # the 403's JSON-RPC error
            await client.call_tool("delete_file", {"name": "a.txt"})
        assert refused.value.data["scope"] == "files:write"
    token = auth_server.mint(audience=served.url, scope="files:write", subject="bob")
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=TEST_TIMEOUT)
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        http,
        Client(streamable_http_client(served.url, http_client=http), mode=mode) as client,
    ):
        deleted = await client.call_tool("delete_file", {"name": "a.txt"})
        assert deleted.content[0].text == "deleted a.txt"  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("claims", "why"),
    [
        pytest.param({"expires_in": -600}, "the token has expired", id="expired"),
        pytest.param(
            {"audience": "http://127.0.0.1:1/other"},
            "not issued for this resource",
            id="wrong-audience",
        ),
        pytest.param({"issuer": "http://127.0.0.1:1"}, "issuer is not accepted", id="wrong-issuer"),
    ],
)
async def test_a_bad_token_is_401_invalid_token(
    served: Served, auth_server: AuthorizationServer, claims: dict[str, Any], why: str
) -> None:
    token = auth_server.mint(**{"audience": served.url, **claims})
    response = await post(served, token)
    assert response.status_code == 401
    params = challenge(response)
    assert params["error"] == "invalid_token"
    assert why in params["error_description"]
    assert params["resource_metadata"] == served.metadata_url
    assert token not in response.text and token not in response.headers["www-authenticate"]


async def test_our_client_reports_a_refused_token_as_an_auth_error(
    served: Served, auth_server: AuthorizationServer
) -> None:
    token = auth_server.mint(audience=served.url, expires_in=-600)
    with pytest.raises(McpAuthError) as caught:
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served, token)) as client:
            await client.list_tools()
    assert caught.value.status == 401
    assert token not in str(caught.value)


async def test_garbage_and_an_unsigned_token_are_refused(
    served: Served, auth_server: AuthorizationServer
) -> None:
    import jwt

    unsigned = jwt.encode(
        {"iss": auth_server.issuer, "aud": served.url, "exp": 2**31}, None, algorithm="none"
    )
    for token in ("not-a-jwt", unsigned):
        response = await post(served, token)
        assert response.status_code == 401
        assert challenge(response)["error"] == "invalid_token"


# --- scopes --------------------------------------------------------------------------------------


def call(name: str, arguments: dict[str, Any], id: int = 2) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": id,
        "method": "tools/call",
        "params": {"name": name, "arguments": arguments},
    }


async def session(served: Served, token: str) -> dict[str, str]:
    """Headers of an initialized session for raw requests."""
    response = await post(served, token)
    assert response.status_code == 200
    headers = {
        "mcp-session-id": response.headers["mcp-session-id"],
        "mcp-protocol-version": "2025-11-25",
    }
    await post(served, token, {"jsonrpc": "2.0", "method": "notifications/initialized"}, **headers)
    return headers


async def test_a_tool_that_needs_a_scope_the_token_lacks_is_403_insufficient_scope(
    served: Served, auth_server: AuthorizationServer
) -> None:
    token = auth_server.mint(audience=served.url, scope="files:read")
    headers = await session(served, token)
    fine = await post(served, token, call("whoami", {}), **headers)
    assert fine.status_code == 200 and "files:read" in fine.text
    refused = await post(served, token, call("delete_file", {"name": "x"}), **headers)
    assert refused.status_code == 403
    params = challenge(refused)
    assert params["error"] == "insufficient_scope"
    assert params["scope"] == "files:write"
    assert params["resource_metadata"] == served.metadata_url
    # the resource template and the prompt declare theirs too
    read = {"jsonrpc": "2.0", "id": 3, "method": "resources/read", "params": {"uri": "plans://q3"}}
    refused = await post(served, token, read, **headers)
    assert (refused.status_code, challenge(refused)["scope"]) == (403, "plans:read")
    get = {
        "jsonrpc": "2.0",
        "id": 4,
        "method": "prompts/get",
        "params": {"name": "review", "arguments": {"code": "x"}},
    }
    refused = await post(served, token, get, **headers)
    assert (refused.status_code, challenge(refused)["scope"]) == (403, "prompts:review")
    # with the scopes, the same calls go through
    wider = auth_server.mint(audience=served.url, scope="files:write plans:read prompts:review")
    headers = await session(served, wider)
    for message, seen in (
        (call("delete_file", {"name": "x"}), "deleted x"),
        (read, "the plan q3"),
        (get, "Review this: x"),
    ):
        response = await post(served, wider, message, **headers)
        assert response.status_code == 200 and seen in response.text


async def test_a_session_belongs_to_the_principal_that_opened_it(
    served: Served, auth_server: AuthorizationServer
) -> None:
    mine = auth_server.mint(audience=served.url, scope="files:read", subject="dave")
    headers = await session(served, mine)
    assert (await post(served, mine, call("whoami", {}), **headers)).status_code == 200
    theirs = auth_server.mint(audience=served.url, scope="files:read", subject="eve")
    stolen = await post(served, theirs, call("whoami", {}), **headers)
    assert stolen.status_code == 404  # as if the session did not exist


async def test_one_challenge_names_every_scope_the_request_needs(
    auth_server: AuthorizationServer,
) -> None:
    from toolweave.mcp import JwtVerifier, McpAuth

    sys.path.insert(0, str(SERVERS))
    try:
        import mcp_auth_tools
    finally:
        sys.path.remove(str(SERVERS))
    here = "http://127.0.0.1:1/mcp"

    async def app(scope: Any, receive: Any, send: Any) -> None:  # the MCP app's stand-in
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"served"})

    verifier = JwtVerifier(
        issuer=auth_server.issuer, audience=here, jwks_url=f"{auth_server.issuer}/jwks"
    )
    auth = McpAuth(verifier, resource=here, required_scopes=["mcp"])
    protected = auth.protect(app, tools=[mcp_auth_tools.delete_file])
    delete = call("delete_file", {"name": "x"}, id=7)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(protected)) as http:
        for granted, lacking in (("", "mcp files:write"), ("mcp", "files:write")):
            token = auth_server.mint(audience=here, scope=granted)
            response = await http.post(
                here, json=delete, headers={"Authorization": f"Bearer {token}"}
            )
            assert response.status_code == 403
            params = challenge(response)
            assert params["scope"] == "mcp files:write"  # all of them, in one challenge
            assert params["error_description"] == f"this request needs the scopes: {lacking}"
            error = response.json()  # the JSON-RPC error of request 7
            assert (error["id"], error["error"]["code"]) == (7, -32600)
            assert error["error"]["data"]["scope"] == "mcp files:write"
        token = auth_server.mint(audience=here, scope="mcp files:write")
        response = await http.post(here, json=delete, headers={"Authorization": f"Bearer {token}"})
        assert response.status_code == 200


async def test_our_client_gets_an_auth_error_for_the_one_tool_it_lacks_a_scope_for(
    served: Served, auth_server: AuthorizationServer
) -> None:
    token = auth_server.mint(audience=served.url, scope="files:read")
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served, token)) as client:
        assert "files:read" in text(await client.call_tool("whoami", {}))
        with pytest.raises(McpAuthError) as caught:
            await client.call_tool("delete_file", {"name": "x"})
        assert caught.value.status == 403
        assert caught.value.details["scope"] == "files:write"
        assert "files:write" in str(caught.value)
        # the session goes on
        assert "files:read" in text(await client.call_tool("whoami_sync", {}))


async def test_an_unknown_kid_refetches_the_discovered_keys_once_so_they_can_rotate(
    tmp_path: Path,
) -> None:
    auth = AuthorizationServer().start()
    # no --auth-jwks-url: found in the issuer's metadata (RFC 8414)
    served = Served("--auth", "jwt", "--auth-issuer", auth.issuer, tmp=tmp_path)
    try:
        first = auth.mint(audience=served.url, subject="before")
        assert (await post(served, first)).status_code == 200
        assert auth.jwks_hits == 1
        assert (await post(served, first)).status_code == 200
        assert auth.jwks_hits == 1  # cached
        auth.rotate()  # a new key, published: its kid is unknown to the server
        second = auth.mint(audience=served.url, subject="after")
        assert (await post(served, second)).status_code == 200
        assert auth.jwks_hits == 2
        # a kid that is nowhere (a forged token, a key not published yet): refused, and the
        # keys are not fetched again so soon (junk kids cannot hammer the server)
        from cryptography.hazmat.primitives.asymmetric import ec

        stranger = ec.generate_private_key(ec.SECP256R1())
        forged = auth.mint(audience=served.url, kid="nowhere", key=stranger)
        response = await post(served, forged)
        assert response.status_code == 401
        assert "key this server does not know" in challenge(response)["error_description"]
        # a token signed by a stranger's key under a kid the server knows fails its signature
        impostor = auth.mint(audience=served.url, kid=auth.keys[-1][0], key=stranger)
        response = await post(served, impostor)
        assert challenge(response)["error_description"] == "the token's signature does not verify"
        assert auth.jwks_hits == 2
        assert (await post(served, first)).status_code == 200  # the old key is still published
    finally:
        served.stop()
        auth.stop()


async def test_metadata_that_names_another_issuer_is_not_used_for_keys(
    auth_server: AuthorizationServer,
) -> None:
    from toolweave.mcp import JwtVerifier
    from toolweave.mcp.auth import VerifierUnavailable

    # the same server, spelled with a "/": its metadata names the issuer without it
    verifier = JwtVerifier(issuer=auth_server.issuer + "/", audience="http://127.0.0.1:1/mcp")
    token = auth_server.mint(audience="http://127.0.0.1:1/mcp", issuer=auth_server.issuer + "/")
    hits = auth_server.jwks_hits
    with pytest.raises(VerifierUnavailable):
        await verifier.verify(token)
    assert auth_server.jwks_hits == hits
    good = JwtVerifier(issuer=auth_server.issuer, audience="http://127.0.0.1:1/mcp")
    assert (
        await good.verify(auth_server.mint(audience="http://127.0.0.1:1/mcp"))
    ).subject == "alice"


async def test_a_verifier_with_the_sdks_face_is_held_to_this_resource(
    auth_server: AuthorizationServer,
) -> None:
    from mcp.server.auth.provider import AccessToken

    from toolweave.mcp import IntrospectionVerifier, McpAuth

    here = "http://127.0.0.1:1/mcp"

    class SdkFace:
        """Only the SDK's TokenVerifier method, over introspection with no audience check."""

        def __init__(self) -> None:
            rs_id, rs_secret = auth_server.add_client()
            self.inner = IntrospectionVerifier(
                f"{auth_server.issuer}/introspect", client_id=rs_id, client_secret=rs_secret
            )

        async def verify_token(self, token: str) -> AccessToken | None:
            found = await self.inner.verify_token(token)
            if found is None:
                return None
            aud = (found.claims or {}).get("aud")
            return found.model_copy(update={"resource": aud})

    async def app(scope: Any, receive: Any, send: Any) -> None:  # the MCP app's stand-in
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"served"})

    auth = McpAuth(SdkFace(), resource=here, authorization_servers=[auth_server.issuer])
    protected = auth.protect(app)
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(protected)) as http:
        for audience, status in ((here, 200), ("http://127.0.0.1:2/other", 401)):
            token = auth_server.mint(audience=audience)
            response = await http.get(here, headers={"Authorization": f"Bearer {token}"})
            assert response.status_code == status
        auth_server.revoke(token)
        response = await http.get(here, headers={"Authorization": f"Bearer {token}"})
        assert challenge(response)["error_description"] == "the token is not valid"


async def test_introspection_answers_can_be_cached(auth_server: AuthorizationServer) -> None:
    from toolweave.mcp import IntrospectionVerifier
    from toolweave.mcp.auth import InvalidToken

    rs_id, rs_secret = auth_server.add_client()
    endpoint = f"{auth_server.issuer}/introspect"
    verifier = IntrospectionVerifier(
        endpoint, client_id=rs_id, client_secret=rs_secret, cache_seconds=300
    )
    token = auth_server.mint(audience="http://127.0.0.1:1/mcp", scope="a b")
    asked = auth_server.introspections
    for _ in range(3):
        found = await verifier.verify(token)
        assert (found.token, found.scopes) == (token, ["a", "b"])
    assert auth_server.introspections == asked + 1
    assert all(entry.token == "" for _, entry in verifier._cache.values())  # no token kept
    auth_server.revoke(token)
    await verifier.verify(token)  # the price of the cache: accepted until the entry ends
    uncached = IntrospectionVerifier(endpoint, client_id=rs_id, client_secret=rs_secret)
    with pytest.raises(InvalidToken, match="not active"):
        await uncached.verify(token)
    expired = auth_server.mint(audience="http://127.0.0.1:1/mcp", expires_in=-600)
    with pytest.raises(InvalidToken):  # inactive answers are never cached
        await verifier.verify(expired)
    with pytest.raises(InvalidToken):
        await verifier.verify(expired)
    assert auth_server.introspections == asked + 4


async def test_introspection_accepts_an_active_token_and_refuses_a_revoked_one(
    auth_server: AuthorizationServer, tmp_path: Path
) -> None:
    rs_id, rs_secret = auth_server.add_client()  # the resource server's own client
    assert rs_secret is not None
    served = Served(
        "--auth",
        "introspection",
        "--auth-issuer",
        auth_server.issuer,
        "--auth-introspection-url",
        f"{auth_server.issuer}/introspect",
        "--auth-client-id",
        rs_id,
        tmp=tmp_path,
        env={"TOOLWEAVE_AUTH_CLIENT_SECRET": rs_secret},
    )
    try:
        token = token_for(auth_server, served.url, "files:read")
        asked = auth_server.introspections
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served, token)) as client:
            who = json.loads(text(await client.call_tool("whoami", {})))
        assert who["scopes"] == ["files:read"]
        assert who["issuer"] == auth_server.issuer
        assert auth_server.introspections > asked
        auth_server.revoke(token)
        response = await post(served, token)
        assert response.status_code == 401
        assert challenge(response)["error_description"] == "the token is not active"
        response = await post(served, "an-opaque-token-nobody-issued")
        assert challenge(response)["error_description"] == "the token is not active"
        # a token for another resource is active, but not for this server
        other = token_for(auth_server, "http://127.0.0.1:1/other", "files:read")
        response = await post(served, other)
        assert "not issued for this resource" in challenge(response)["error_description"]
    finally:
        log = served.stop()
    assert rs_secret not in log and token not in log


async def test_serve_mcp_with_a_static_key_required_and_implied_scopes_over_sse(
    auth_server: AuthorizationServer, tmp_path: Path
) -> None:
    env = {"AUTH_ISSUER": auth_server.issuer, "AUTH_PUBLIC_KEY": auth_server.public_pem()}
    served = Served(tmp=tmp_path, env=env, script="sse")
    try:
        async with httpx2.AsyncClient() as http:
            doc = (await http.get(served.metadata_url)).json()
            assert doc["resource"] == served.url
            assert doc["scopes_supported"] == ["mcp"]
            response = await http.get(served.url)
        assert response.status_code == 401
        assert challenge(response)["scope"] == "mcp"  # what to ask for, up front
        lacking = auth_server.mint(audience=served.url, scope="files")
        with pytest.raises(McpAuthError) as caught:
            async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served, lacking)) as c:
                await c.list_tools()
        assert caught.value.status == 403
        token = auth_server.mint(audience=served.url, scope="mcp files", subject="carol")
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served, token)) as client:
            who = json.loads(text(await client.call_tool("whoami_sync", {})))
            assert who["subject"] == "carol"
            assert who["scopes"] == ["files", "files:read", "files:write", "mcp"]
            assert text(await client.call_tool("delete_file", {"name": "b"})) == "deleted b"
            with pytest.raises(McpAuthError) as caught:
                await client.read_resource("plans://q4")
            assert caught.value.details["scope"] == "mcp plans:read"
    finally:
        served.stop()


class _Memory:
    """The SDK's TokenStorage, in memory."""

    def __init__(self) -> None:
        self.tokens: Any = None
        self.client: Any = None

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client_info: Any) -> None:
        self.client = client_info


async def test_the_sdk_oauth_flow_discovers_gets_a_token_and_steps_up_for_a_scope(
    served: Served, auth_server: AuthorizationServer
) -> None:
    from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

    # what it grants when the request names no scope (the challenge and metadata name none)
    cid, secret = auth_server.add_client(scopes="files:read")
    provider = ClientCredentialsOAuthProvider(
        server_url=served.url,
        storage=_Memory(),
        client_id=cid,
        client_secret=secret or "",
        scope="files:read",
        issuer=auth_server.issuer,
    )
    issued = len(auth_server.granted_scopes)
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served, None), auth=provider) as c:
        who = json.loads(text(await c.call_tool("whoami", {})))
        assert (who["client_id"], who["scopes"]) == (cid, ["files:read"])
        # 403 insufficient_scope names files:write: the client gets a token with both
        assert text(await c.call_tool("delete_file", {"name": "c"})) == "deleted c"
        who = json.loads(text(await c.call_tool("whoami", {})))
        assert who["scopes"] == ["files:read", "files:write"]
    assert sorted(auth_server.granted_scopes[issued:][-1].split()) == ["files:read", "files:write"]


def test_the_typescript_sdk_client_does_the_oauth_flow_and_steps_up(tmp_path: Path) -> None:
    from npm_support import TS_SDK, script_beside

    script = script_beside(TS_SDK, Path(__file__).resolve().parent / "ts_sdk_oauth_client.mjs")
    # no refresh tokens: the client's step-up is then a new authorization with the scope
    # (the TS SDK would refresh a token with a refresh token, and keep its scopes)
    auth = AuthorizationServer(refresh_tokens=False).start()
    served = Served(*jwt_args(auth), tmp=tmp_path)
    try:
        proc = subprocess.run(
            ["node", str(script), served.url], capture_output=True, text=True, timeout=120
        )
    finally:
        log = served.stop()
        auth.stop()
    assert proc.returncode == 0, proc.stderr[-3000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen["client_id"].startswith("dcr-")  # registered dynamically
    assert seen["before"]["client_id"] == seen["client_id"]
    assert seen["before"]["scopes"] == ["files:read"]
    assert seen["deleted"] == "deleted ts.txt"
    assert "files:write" in seen["after"]["scopes"]
    assert seen["authorizations"] == 2
    first, step_up = auth.authorizations
    assert first["scope"] == "files:read" and step_up["scope"] == "files:write"
    for asked in (first, step_up):
        assert asked["resource"] == served.url  # RFC 8707
        assert asked["code_challenge_method"] == "S256"
    assert "Bearer" not in log


@pytest.mark.parametrize(
    ("args", "why"),
    [
        pytest.param(["--auth", "jwt", "--auth-issuer", "http://a"], "over stdio", id="stdio"),
        pytest.param(
            [
                "--transport",
                "http",
                "--host",
                "0.0.0.0",
                "--auth",
                "jwt",
                "--auth-issuer",
                "http://a",
            ],
            "--auth needs --auth-resource",
            id="public-bind-without-resource",
        ),
        pytest.param(
            ["--transport", "http", "--auth", "jwt"], "needs --auth-issuer", id="no-issuer"
        ),
        pytest.param(
            ["--transport", "http", "--auth", "introspection", "--auth-issuer", "http://a"],
            "needs --auth-introspection-url",
            id="no-introspection-url",
        ),
        pytest.param(["--transport", "http", "--auth", "nope"], "MODULE:OBJECT", id="unknown"),
    ],
)
def test_the_cli_refuses_an_auth_it_cannot_serve(args: list[str], why: str) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "toolweave", "mcp", "serve", TOOLS, *args],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    assert done.returncode == 1
    assert why in done.stderr


@pytest.mark.parametrize("form", ["pem", "jwk", "jwks"])
async def test_the_cli_verifies_with_a_static_key_file(
    auth_server: AuthorizationServer, tmp_path: Path, form: str
) -> None:
    key_file = tmp_path / f"key.{form}"
    if form == "pem":
        key_file.write_text(auth_server.public_pem())
    elif form == "jwk":
        key_file.write_text(json.dumps(auth_server.public_jwk()))
    else:
        key_file.write_text(json.dumps({"keys": [auth_server.public_jwk()]}))
    args = ["--auth", "jwt", "--auth-issuer", auth_server.issuer, "--auth-key-file", str(key_file)]
    served = Served(*args, tmp=tmp_path)
    hits = auth_server.jwks_hits
    try:
        assert (await post(served, auth_server.mint(audience=served.url))).status_code == 200
        stranger = AuthorizationServer()  # never started: only its key signs
        forged = stranger.mint(
            audience=served.url, issuer=auth_server.issuer, kid=auth_server.keys[-1][0]
        )
        assert (await post(served, forged)).status_code == 401
    finally:
        served.stop()
    assert auth_server.jwks_hits == hits  # the keys came from the file


async def test_the_cli_serves_an_mcp_auth_object_from_a_module(
    auth_server: AuthorizationServer, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {
        "AUTH_ISSUER": auth_server.issuer,
        "AUTH_PUBLIC_KEY": auth_server.public_pem(),
        "AUTH_RESOURCE": url,
    }
    served = Served("--auth", f"{TOOLS}:auth", tmp=tmp_path, env=env, port=port)
    try:
        assert (await post(served, auth_server.mint(audience=url))).status_code == 403  # no mcp
        token = auth_server.mint(audience=url, scope="mcp", subject="frank")
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served, token)) as client:
            assert json.loads(text(await client.call_tool("whoami", {})))["subject"] == "frank"
    finally:
        served.stop()


async def test_a_gateways_proxied_tools_take_scopes_by_their_served_names(
    auth_server: AuthorizationServer, tmp_path: Path
) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/mcp"
    env = {
        "AUTH_ISSUER": auth_server.issuer,
        "AUTH_PUBLIC_KEY": auth_server.public_pem(),
        "AUTH_RESOURCE": url,
        "AUTH_TOOL_SCOPES": json.dumps({"up_whoami": ["admin"]}),
    }
    upstream = f"up={sys.executable} -m toolweave mcp serve {TOOLS}"
    served = Served(
        "--auth", f"{TOOLS}:auth", "--proxy", upstream, tmp=tmp_path, env=env, port=port
    )
    try:
        token = auth_server.mint(audience=url, scope="mcp")
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served, token)) as client:
            names = {t.name for t in await client.list_tools()}
            assert {"whoami", "up_whoami"} <= names
            assert json.loads(text(await client.call_tool("whoami", {})))["scopes"] == ["mcp"]
            with pytest.raises(McpAuthError) as caught:
                await client.call_tool("up_whoami", {})
            assert caught.value.details["scope"] == "mcp admin"
        admin = auth_server.mint(audience=url, scope="mcp admin")
        async with asyncio.timeout(TEST_TIMEOUT), McpClient(config(served, admin)) as client:
            # the upstream runs over stdio without auth: it sees no identity (and no token)
            assert json.loads(text(await client.call_tool("up_whoami", {}))) is None
    finally:
        served.stop()


def test_a_tool_called_without_auth_has_no_identity() -> None:
    sys.path.insert(0, str(SERVERS))
    try:
        import mcp_auth_tools
    finally:
        sys.path.remove(str(SERVERS))
    assert json.loads(mcp_auth_tools.whoami_sync.invoke({})) is None


def test_tool_scopes_are_kept_on_the_card() -> None:
    from toolweave import tool

    @tool(scopes="notes:read notes:write", metadata={"title": "Edit"})
    def edit(name: str) -> str:
        """Edit a note."""
        return name

    assert edit.card.metadata == {"title": "Edit", "scopes": ["notes:read", "notes:write"]}
    again = tool(edit, card=edit.card, scopes=["admin"])
    assert again.card.metadata["scopes"] == ["admin"]


# --- logs ----------------------------------------------------------------------------------------


async def test_no_log_record_holds_a_token_at_debug(
    auth_server: AuthorizationServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Every path (accepted, expired, another audience, a missing scope, introspection
    active and inactive, an unreachable JWKS) with every logger at DEBUG: no record's
    message, arguments or traceback holds the token."""
    import logging

    from toolweave.mcp import IntrospectionVerifier, JwtVerifier, McpAuth

    sys.path.insert(0, str(SERVERS))
    try:
        import mcp_auth_tools
    finally:
        sys.path.remove(str(SERVERS))
    here = "http://127.0.0.1:1/mcp"

    async def app(scope: Any, receive: Any, send: Any) -> None:  # the MCP app's stand-in
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"served"})

    rs_id, rs_secret = auth_server.add_client()
    verifiers = [
        JwtVerifier(
            issuer=auth_server.issuer, audience=here, jwks_url=f"{auth_server.issuer}/jwks"
        ),
        IntrospectionVerifier(
            f"{auth_server.issuer}/introspect",
            client_id=rs_id,
            client_secret=rs_secret,
            audience=here,
        ),
        JwtVerifier(
            issuer=auth_server.issuer,
            audience=here,
            jwks_url=f"http://127.0.0.1:{free_port()}/jwks",
        ),
    ]
    tokens = [
        auth_server.mint(audience=here, scope="files:read"),
        auth_server.mint(audience=here, expires_in=-600),
        auth_server.mint(audience="http://127.0.0.1:2/other"),
    ]
    revoked = auth_server.mint(audience=here)
    auth_server.revoke(revoked)
    tokens.append(revoked)
    caplog.set_level(logging.DEBUG)
    statuses = set()
    for verifier in verifiers:
        auth = McpAuth(verifier, resource=here, authorization_servers=[auth_server.issuer])
        protected = auth.protect(app, tools=[mcp_auth_tools.delete_file])
        async with httpx2.AsyncClient(transport=httpx2.ASGITransport(protected)) as http:
            for token in tokens:
                headers = {"Authorization": f"Bearer {token}"}
                for body in (INIT, call("delete_file", {"name": "x"})):
                    response = await http.post(here, json=body, headers=headers)
                    statuses.add(response.status_code)
                    assert token not in response.text
    assert statuses == {200, 401, 403, 503}  # every path was taken
    assert caplog.records, "nothing was logged: the check would prove nothing"
    for record in caplog.records:
        seen = record.getMessage() + repr(record.args) + (record.exc_text or "")
        for token in tokens:
            assert token not in seen
            assert token.split(".")[2] not in seen
    assert all(rs_secret not in r.getMessage() + repr(r.args) for r in caplog.records)


def test_tokens_never_reach_the_server_log(
    auth_server: AuthorizationServer, tmp_path: Path
) -> None:
    server = Served(*jwt_args(auth_server), tmp=tmp_path)
    tokens = [
        auth_server.mint(audience=server.url, expires_in=-600),
        auth_server.mint(audience="http://127.0.0.1:1/elsewhere"),
        auth_server.mint(audience=server.url, scope="files:read"),
    ]
    try:
        for token in tokens:
            asyncio.run(post(server, token))
            asyncio.run(post(server, token, call("delete_file", {"name": "x"})))
    finally:
        log = server.stop()
    for token in tokens:
        assert token not in log
        assert token.split(".")[2] not in log
