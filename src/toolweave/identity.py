"""Who is calling: the verified identity behind a request (`Identity`).

Set by a server that authenticated the request (`serve_mcp(auth=...)` verifies the bearer
token) for the code that serves it; a tool reads it as `ToolContext.identity`.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

__all__ = ["Identity", "current_identity", "use_identity"]


@dataclass(frozen=True, slots=True)
class Identity:
    """A verified caller: the principal of an access token (never the token itself)."""

    subject: str | None = None
    """The resource owner (``sub``); unique only per `issuer`."""
    client_id: str | None = None
    """The OAuth client the token was issued to (``client_id``, ``azp``)."""
    issuer: str | None = None
    """The authorization server that issued the token (``iss``)."""
    scopes: frozenset[str] = frozenset()
    """The scopes the token grants (with any scopes they imply on this server)."""
    claims: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """The token's claims (a JWT's payload, an introspection response), read-only."""
    expires_at: int | None = None
    """When the token expires (``exp``, seconds since the epoch)."""

    def has_scopes(self, scopes: Iterable[str]) -> bool:
        """Whether every one of `scopes` is granted."""
        return self.scopes.issuperset(scopes)


_IDENTITY: contextvars.ContextVar[Identity | None] = contextvars.ContextVar(
    "toolweave_identity", default=None
)


def current_identity() -> Identity | None:
    """The identity of the request being served here, if it was authenticated."""
    return _IDENTITY.get()


@contextlib.contextmanager
def use_identity(identity: Identity | None) -> Iterator[None]:
    """Serve the code inside this block as a request from `identity`."""
    token = _IDENTITY.set(identity)
    try:
        yield
    finally:
        _IDENTITY.reset(token)
