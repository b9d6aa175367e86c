"""toolweave's MCP client as the conformance suite's client under test.

The suite runs ``python mcp_conformance_client.py <server-url>`` with the scenario's name in
``MCP_CONFORMANCE_SCENARIO`` (and scenario data in ``MCP_CONFORMANCE_CONTEXT``). Every
scenario goes through `McpClient`: list the tools, call what the scenario serves. The auth
scenarios give `McpClient` the SDK's OAuth providers as ``auth=``; the suite's authorization
server approves at once, so the "user" here just follows the authorization redirect.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthClientProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from toolweave.context import ElicitationResult
from toolweave.mcp import McpClient, McpServerConfig
from toolweave.mcp.hooks import ElicitationRequest

REDIRECT = "http://localhost:3000/callback"
CIMD_URL = "https://conformance-test.local/client-metadata.json"


async def accept_empty(request: ElicitationRequest) -> ElicitationResult:
    # The user accepts without filling anything: the client applies the schema's defaults.
    return ElicitationResult("accept", {})


class MemoryStorage:
    """The SDK's `TokenStorage`, in memory."""

    def __init__(self, client: OAuthClientInformationFull | None = None) -> None:
        self.tokens: OAuthToken | None = None
        self.client = client

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class AutoApprove:
    """The user's side of the authorization code flow: open the URL, take the code."""

    def __init__(self) -> None:
        self.result: AuthorizationCodeResult | None = None

    async def redirect(self, url: str) -> None:
        async with httpx2.AsyncClient(follow_redirects=False, timeout=10) as http:
            response = await http.get(url)
        location = response.headers.get("location", "")
        query = parse_qs(urlsplit(location).query)
        self.result = AuthorizationCodeResult(
            code=query["code"][0],
            state=query.get("state", [None])[0],
            iss=query.get("iss", [None])[0],
        )

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None, "no authorization redirect was followed"
        return self.result


async def cross_app_access(url: str, context: dict[str, Any]) -> Any:
    """SEP-990: the enterprise IdP's ID token is exchanged for an ID-JAG, which the SDK's
    identity-assertion provider trades for an access token (JWT-bearer grant)."""
    from urllib.parse import urljoin

    from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider

    async with httpx2.AsyncClient(timeout=10) as http:
        prm = (await http.get(urljoin(url, "/.well-known/oauth-protected-resource/mcp"))).json()
        auth_server = prm["authorization_servers"][0]
        metadata_url = urljoin(auth_server, "/.well-known/oauth-authorization-server")
        issuer = (await http.get(metadata_url)).json()["issuer"]

    async def id_jag(audience: str, resource: str) -> str:
        async with httpx2.AsyncClient(timeout=10) as http:
            response = await http.post(
                context["idp_token_endpoint"],
                data={
                    "grant_type": "urn:ietf:params:oauth:grant-type:token-exchange",
                    "requested_token_type": "urn:ietf:params:oauth:token-type:id-jag",
                    "subject_token": context["idp_id_token"],
                    "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
                    "audience": audience,
                    "resource": resource,
                    "client_id": context["idp_client_id"],
                },
            )
        response.raise_for_status()
        return str(response.json()["access_token"])

    return IdentityAssertionOAuthProvider(
        server_url=url,
        storage=MemoryStorage(),
        client_id=context["client_id"],
        client_secret=context["client_secret"],
        issuer=issuer,
        assertion_provider=id_jag,
        token_endpoint_auth_method="client_secret_basic",
    )


def oauth(url: str, scenario: str) -> Any:
    context: dict[str, Any] = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if scenario.startswith("auth/client-credentials-basic"):
        from mcp.client.auth.extensions.client_credentials import ClientCredentialsOAuthProvider

        return ClientCredentialsOAuthProvider(
            server_url=url,
            storage=MemoryStorage(),
            client_id=context["client_id"],
            client_secret=context["client_secret"],
        )
    if scenario.startswith("auth/client-credentials-jwt"):
        from mcp.client.auth.extensions.client_credentials import (
            PrivateKeyJWTOAuthProvider,
            SignedJWTParameters,
        )

        signer = SignedJWTParameters(
            issuer=context["client_id"],
            subject=context["client_id"],
            signing_key=context["private_key_pem"],
            signing_algorithm=context.get("signing_algorithm") or "ES256",
        )
        return PrivateKeyJWTOAuthProvider(
            server_url=url,
            storage=MemoryStorage(),
            client_id=context["client_id"],
            assertion_provider=signer.create_assertion_provider(),
        )
    storage = MemoryStorage()
    if "client_id" in context:  # pre-registered: no dynamic registration
        storage.client = OAuthClientInformationFull(
            client_id=context["client_id"],
            client_secret=context.get("client_secret"),
            redirect_uris=[REDIRECT],  # type: ignore[list-item]
            token_endpoint_auth_method="client_secret_basic"
            if context.get("client_secret")
            else "none",
        )
    user = AutoApprove()
    return OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="toolweave-conformance",
            redirect_uris=[REDIRECT],  # type: ignore[list-item]
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
        ),
        storage=storage,
        redirect_handler=user.redirect,
        callback_handler=user.callback,
        client_metadata_url=CIMD_URL,
    )


async def main(url: str, scenario: str) -> None:
    config = McpServerConfig(
        server_name="conformance", params={"url": url}, connect_timeout=10, call_timeout=20
    )
    extra: dict[str, Any] = {}
    if scenario.startswith("elicitation"):
        extra["elicitation"] = accept_empty
    if scenario.startswith("auth/cross-app-access"):
        context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
        extra["auth"] = await cross_app_access(url, context)
    elif scenario.startswith("auth/"):
        extra["auth"] = oauth(url, scenario)
    async with McpClient(config, **extra) as client:
        tools = {t.card.remote_name: t for t in await client.list_tools()}
        if "add_numbers" in tools:
            print(await tools["add_numbers"].ainvoke({"a": 2, "b": 3}))
        for name in ("test_client_elicitation_defaults", "test_reconnection", "test-tool"):
            if name in tools:
                print(await client.call_tool(name, {}))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[-1], os.environ.get("MCP_CONFORMANCE_SCENARIO", "")))
