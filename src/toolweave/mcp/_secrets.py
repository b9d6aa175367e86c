"""`McpSecrets`: the credentials one MCP client sends, masked wherever a server may echo them.

One rule at the boundary: every error leaving an `McpClient` (its text, `repr`, details and
the `__cause__` chain) is scrubbed in place by `McpSecrets.scrub`, and every record of the
MCP loggers (toolweave's, the SDK's client side, `httpx2`'s and `httpcore2`'s) passes a
filter that masks the credentials of every live client. A credential is any value the user
configured as one (`auth_headers` values, and values under credential-like names in
``params["headers"]``, `auth_query_params`, a stdio server's ``env``) and any credential
the client sent (headers and query values added by `tool_auth` or an ``httpx2.Auth`` such
as the SDK's OAuth provider, whose tokens are also read from it), in every form a server
may echo it: raw, JSON-escaped, percent-encoded, or as a Python ``repr``.
"""

from __future__ import annotations

import collections
import json
import logging
import re
import threading
import weakref
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import parse_qsl, quote, quote_plus

import mcp_types
from mcp.shared.exceptions import MCPError

from ..callbacks.otel import mask_secrets
from .config import McpServerConfig

__all__ = ["McpSecrets", "masked_reason"]

_MASK = "***"
_MIN_LENGTH = 6
"""Shorter values are not masked: they would mask ordinary words."""
_SEEN_KEPT = 16
"""How many credentials seen on requests (rotating tokens) a client keeps masking."""
_CREDENTIAL_NAME = re.compile(
    r"auth|token|secret|key|passw|session|cookie|signature|credential", re.IGNORECASE
)
_MAX_CHAIN = 32


def _forms(value: str) -> set[str]:
    """`value` as a server (or a log line) may print it."""
    escaped = json.dumps(value)[1:-1]
    return {
        value,
        escaped,
        escaped.replace("/", "\\/"),
        json.dumps(value, ensure_ascii=False)[1:-1],
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        repr(value)[1:-1],
    }


def _values(value: str) -> list[str]:
    """A credential value and, for ``Bearer <token>`` and the like, the token alone."""
    value = value.strip()
    parts = value.split(None, 1)
    return [value, parts[1].strip()] if len(parts) == 2 else [value]


def masked_reason(error: BaseException) -> str:
    """``"TypeName: text"`` of a hook's exception for a log record, with anything that
    looks like a credential masked (bearer and ``sk-…`` tokens, ``key=value`` pairs; the
    configured credentials are masked by the loggers' filter)."""
    text = str(error).strip()
    return f"{type(error).__name__}: {mask_secrets(text)}" if text else type(error).__name__


class _MaskedCause(Exception):
    """Stands in the `__cause__` chain for an exception whose text held a credential and
    could not be masked in place; its text is the original's type and masked text."""


class McpSecrets:
    """The credentials of one MCP client (see the module docstring)."""

    def __init__(self, config: McpServerConfig, auth: Any = None) -> None:
        self._lock = threading.Lock()
        self._auth = auth
        self._fixed: set[str] = set()
        self._seen: collections.deque[str] = collections.deque(maxlen=_SEEN_KEPT)
        self._forms: tuple[str, ...] = ()
        self.configure(config)

    # collecting --------------------------------------------------------------------------
    def configure(self, config: McpServerConfig) -> None:
        """Add the credentials `config` holds (also for a config `tool_auth` extended)."""
        values: list[str] = []
        for value in config.auth_headers.values():
            values += _values(str(value))
        for name, value in dict(config.params.get("headers") or {}).items():
            if _CREDENTIAL_NAME.search(str(name)):
                values += _values(str(value))
        values += [str(v) for v in config.auth_query_params.values()]
        for name, value in dict(config.params.get("env") or {}).items():
            if _CREDENTIAL_NAME.search(str(name)):
                values.append(str(value))
        new = {v for v in values if len(v) >= _MIN_LENGTH} - self._fixed
        if new:
            with self._lock:
                self._fixed |= new
                self._rebuild()

    def observe(self, request: Any) -> None:
        """Note the credentials of a request about to be sent (an ``httpx2`` request event
        hook): credential-like headers and query values, and the tokens `auth` holds."""
        found: list[str] = []
        for name, value in request.headers.items():
            if _CREDENTIAL_NAME.search(name):
                found += _values(value)
        query = request.url.query
        if query:
            text = query.decode("ascii", "replace") if isinstance(query, bytes) else str(query)
            found += [v for k, v in parse_qsl(text) if _CREDENTIAL_NAME.search(k)]
        found += self._auth_tokens()
        new = [v for v in found if len(v) >= _MIN_LENGTH and v not in self._fixed]
        if any(v not in self._seen for v in new):
            with self._lock:
                for v in new:
                    if v not in self._seen:
                        self._seen.append(v)
                self._rebuild()

    def _auth_tokens(self) -> list[str]:
        """The tokens an OAuth provider (the SDK's `OAuthClientProvider`) holds."""
        context = getattr(self._auth, "context", None)
        if context is None:
            return []
        tokens = getattr(context, "current_tokens", None)
        client = getattr(context, "client_info", None)
        values = [
            getattr(tokens, "access_token", None),
            getattr(tokens, "refresh_token", None),
            getattr(client, "client_secret", None),
        ]
        return [v for v in values if isinstance(v, str)]

    def _rebuild(self) -> None:
        forms: set[str] = set()
        for value in (*self._fixed, *self._seen):
            forms |= _forms(value)
        self._forms = tuple(
            sorted((f for f in forms if len(f) >= _MIN_LENGTH), key=len, reverse=True)
        )
        _IN_LOGS.watch(self)

    @property
    def forms(self) -> tuple[str, ...]:
        """Every form of every credential, longest first (so no piece of one is left)."""
        return self._forms

    # masking -----------------------------------------------------------------------------
    def mask(self, text: str) -> str:
        """`text` with every form of every credential replaced by ``***``."""
        return _masked(text, self._forms)

    def scrub(self, error: BaseException) -> BaseException:
        """Mask the credentials in `error` in place: its text and `args`, a toolweave
        error's `message` and `details`, an SDK `MCPError`'s error data, its notes, and the
        same along its `__cause__` / `__context__` chain (an exception whose text still
        shows a credential afterwards is replaced there by a masked stand-in). Returns
        `error`."""
        forms = self._forms
        if forms:
            _scrub_chain(error, forms)
        return error


def _masked(text: str, forms: tuple[str, ...]) -> str:
    for form in forms:
        if form in text:
            text = text.replace(form, _MASK)
    return text


def _masked_value(value: Any, forms: tuple[str, ...], depth: int = 0) -> Any:
    if isinstance(value, str):
        return _masked(value, forms)
    if depth > 16:
        return value
    if isinstance(value, Mapping):
        return {k: _masked_value(v, forms, depth + 1) for k, v in value.items()}
    if isinstance(value, list):
        return [_masked_value(v, forms, depth + 1) for v in value]
    if type(value) is tuple:
        return tuple(_masked_value(v, forms, depth + 1) for v in value)
    return value


def _shows(error: BaseException, forms: tuple[str, ...]) -> bool:
    try:
        text = f"{error}\n{error!r}"
    except Exception:  # an exception whose str fails shows nothing
        return False
    return any(form in text for form in forms)


def _scrub_one(error: BaseException, forms: tuple[str, ...]) -> None:
    if isinstance(error, MCPError):
        data = error.error
        message, extra = _masked(data.message, forms), _masked_value(data.data, forms)
        if message != data.message or extra != data.data:
            error.error = mcp_types.ErrorData(code=data.code, message=message, data=extra)
    try:
        error.args = tuple(_masked_value(a, forms) for a in error.args)
    except Exception:  # an exception type that refuses new args keeps them
        pass
    for name in ("message", "details"):
        value = getattr(error, name, None)
        if isinstance(value, str | dict) and not isinstance(
            getattr(type(error), name, None), property
        ):
            masked = _masked_value(value, forms)
            if masked != value:
                try:
                    setattr(error, name, masked)
                except Exception:  # a read-only attribute
                    pass
    notes = getattr(error, "__notes__", None)
    if isinstance(notes, list):
        error.__notes__ = [_masked(n, forms) if isinstance(n, str) else n for n in notes]


def _stand_in(error: BaseException, forms: tuple[str, ...]) -> BaseException:
    out: BaseException
    if isinstance(error, BaseExceptionGroup):  # its text is its message, not its args
        out = BaseExceptionGroup(_masked(error.message, forms), list(error.exceptions))
    else:
        try:
            text = _masked(str(error), forms)
        except Exception:
            text = ""
        out = _MaskedCause(f"{type(error).__name__}: {text}" if text else type(error).__name__)
    out.__traceback__ = error.__traceback__
    out.__cause__, out.__context__ = error.__cause__, error.__context__
    out.__suppress_context__ = error.__suppress_context__  # setting __cause__ set it
    return out


def _scrub_chain(error: BaseException, forms: tuple[str, ...]) -> None:
    seen: set[int] = set()
    stand_ins: dict[int, BaseException] = {}  # one per original: a cause is often the context too
    todo: list[BaseException] = [error]
    while todo and len(seen) < _MAX_CHAIN:
        e = todo.pop()
        if id(e) in seen:
            continue
        seen.add(id(e))
        _scrub_one(e, forms)
        for link in ("__cause__", "__context__"):
            linked = getattr(e, link)
            if linked is None:
                continue
            if id(linked) in stand_ins:
                linked = stand_ins[id(linked)]
            else:
                _scrub_one(linked, forms)
                if _shows(linked, forms):
                    linked = stand_ins.setdefault(id(linked), _stand_in(linked, forms))
            suppress = e.__suppress_context__
            setattr(e, link, linked)
            e.__suppress_context__ = suppress
            todo.append(linked)
        if isinstance(e, BaseExceptionGroup):
            todo.extend(e.exceptions)


class _SecretsLogFilter(logging.Filter):
    """Masks the credentials of every live MCP client in the records of the loggers an MCP
    connection logs through (a filter runs only for records of the logger it is on, so
    each is named). Attached when the first client with a credential is made."""

    _LOGGERS = (
        "toolweave.mcp",
        "toolweave.mcp.server_log",
        "toolweave.mcp.server",
        "httpx2",
        "httpcore2.http11",
        "httpcore2.http2",
        "mcp.client.client",
        "mcp.client.streamable_http",
        "mcp.client.sse",
        "mcp.client.stdio",
        "mcp.client.auth.oauth2",
        "mcp.shared.dispatcher",
        "mcp.shared.jsonrpc_dispatcher",
        "client",  # the SDK's client session logger
    )

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._clients: weakref.WeakSet[McpSecrets] = weakref.WeakSet()
        self._attached = False

    def watch(self, secrets: McpSecrets) -> None:
        if secrets in self._clients:
            return
        with self._lock:
            if not self._attached:
                for name in self._LOGGERS:
                    logging.getLogger(name).addFilter(self)
                self._attached = True
            self._clients.add(secrets)

    def _forms(self) -> Iterable[tuple[str, ...]]:
        with self._lock:
            return [s.forms for s in self._clients]

    def filter(self, record: logging.LogRecord) -> bool:
        if not self._clients:
            return True
        every = [f for forms in self._forms() for f in forms]
        if not every:
            return True
        forms = tuple(sorted(set(every), key=len, reverse=True))
        try:
            message = record.getMessage()
        except Exception:  # a record whose arguments do not format is left to the handler
            return True
        masked = _masked(message, forms)
        if masked != message:
            record.msg, record.args = masked, None
        if record.exc_info and record.exc_info[1] is not None:
            text = record.exc_text or logging.Formatter().formatException(record.exc_info)
            masked = _masked(text, forms)
            if masked != text:
                record.exc_text = masked  # handlers print exc_text when it is set
        return True


_IN_LOGS = _SecretsLogFilter()
