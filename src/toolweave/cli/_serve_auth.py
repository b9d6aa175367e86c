"""``toolweave mcp serve --auth ...``: the `McpAuth` the options describe."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._load import CliError, load_object

__all__ = ["serve_auth"]


def serve_auth(
    kind: str,
    *,
    stdio: bool,
    resource: str | None,
    where: tuple[str, int, str],
    issuer: str | None,
    audience: str | None,
    jwks_url: str | None,
    key_file: str | None,
    introspection_url: str | None,
    client_id: str | None,
    scopes: Sequence[str],
) -> Any:
    """`kind` is ``jwt``, ``introspection`` or ``MODULE:OBJECT`` naming an `McpAuth`;
    `where` is the bind (host, port, path), whose URL is the default resource on loopback."""
    if stdio:
        raise CliError(
            "--auth is for --transport http or sse; over stdio the client that starts the "
            "server passes credentials in its environment"
        )
    try:
        from ..mcp.auth import McpAuth, auth_from_options, default_resource
    except ImportError as e:
        raise CliError(str(e)) from None
    if kind not in ("jwt", "introspection"):
        if ":" not in kind:
            raise CliError(f"--auth expects jwt, introspection or MODULE:OBJECT, got {kind!r}")
        found = load_object(kind)
        if not isinstance(found, McpAuth):
            raise CliError(f"--auth {kind}: not an McpAuth object")
        return found
    try:
        return auth_from_options(
            kind,
            resource=resource or default_resource(*where),
            issuer=issuer,
            audience=audience,
            jwks_url=jwks_url,
            key_file=key_file,
            introspection_url=introspection_url,
            client_id=client_id,
            scopes=scopes,
        )
    except (ValueError, OSError) as e:
        raise CliError(str(e)) from None
