"""An `McpAuth` whose DPoP proofs must carry this server's nonce, for
``toolweave mcp serve mcp_auth_tools.py --auth mcp_dpop_auth.py:auth`` (``AUTH_ISSUER``: the
authorization server, its keys at ``/jwks``; ``AUTH_RESOURCE``: this server's URL)."""

from __future__ import annotations

import os

from toolweave.mcp import DpopVerifier, JwtVerifier, McpAuth

_resource = os.environ["AUTH_RESOURCE"]
_issuer = os.environ["AUTH_ISSUER"]

auth = McpAuth(
    JwtVerifier(issuer=_issuer, audience=_resource, jwks_url=f"{_issuer}/jwks"),
    resource=_resource,
    dpop=DpopVerifier(require_nonce=True),
)
