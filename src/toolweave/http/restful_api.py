"""`RestfulApi`: a tool that calls one HTTP endpoint described by a `RestfulApiCard`."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, quote_plus

import httpx2

from ..callbacks.events import ToolCallEvents as E
from ..callbacks.framework import CallbackFramework
from ..errors import ErrorCode, RestfulApiError, ToolArgumentsError, ToolCardError
from ..tools.base import Tool
from .card import PLACEHOLDER, Location, RestfulApiCard, property_location
from .errors import RestfulApiResponseError, RestfulApiTimeoutError, SsrfBlockedError
from .response import parse_body
from .ssrf import GuardedAsyncTransport, GuardedSyncTransport, Resolver, total_deadline

__all__ = ["AuthSpec", "PreparedRequest", "RestfulApi"]

_BODYLESS = frozenset({"GET", "HEAD", "OPTIONS", "DELETE"})
_EXCERPT = 500
_REDACTED = "***"
_HEADER_TEXT = re.compile(r"[\t\x20-\x7e]*")


def _masked(text: str, values: Sequence[str]) -> str:
    """`text` with each of `values` (longest first, so no prefix of one is left) replaced
    by ``***``."""
    for value in values:
        if value in text:
            text = text.replace(value, _REDACTED)
    return text


def _forms(value: str) -> set[str]:
    """`value` as a server may echo it back: raw, percent-encoded (path, query, form) and
    JSON-escaped (with and without `\\/`)."""
    escaped = json.dumps(value)[1:-1]
    return {
        value,
        quote(value, safe=""),
        quote_plus(value),
        quote(value),
        escaped,
        escaped.replace("/", "\\/"),
        json.dumps(value, ensure_ascii=False)[1:-1],
    }


_CALL_SECRETS: ContextVar[tuple[str, ...]] = ContextVar("toolweave_http_call_secrets", default=())


class _CallSecretsLogFilter(logging.Filter):
    """Masks the credentials of the HTTP call in progress (every form, see `_forms`) in
    `httpx2`'s own log line (``HTTP Request: GET <url> "HTTP/1.1 401 <reason>"``, logged at
    INFO with the URL as sent and the reason phrase as received) and in `httpcore2`'s DEBUG
    lines (request and response heads). The lines are logged in the task or thread that
    sends, so the call's secrets are found in a context variable; the filter is attached to
    those loggers on first use."""

    def __init__(self) -> None:
        super().__init__()
        self._attached = False
        self._lock = threading.Lock()

    @contextlib.contextmanager
    def call(self, values: list[str]) -> Iterator[None]:
        if not values:
            yield
            return
        if not self._attached:
            with self._lock:
                if not self._attached:
                    for name in ("httpx2", "httpcore2.http11", "httpcore2.http2"):
                        logging.getLogger(name).addFilter(self)
                    self._attached = True
        token = _CALL_SECRETS.set(tuple(values))
        try:
            yield
        finally:
            _CALL_SECRETS.reset(token)

    def filter(self, record: logging.LogRecord) -> bool:
        values = _CALL_SECRETS.get()
        if values:
            message = record.getMessage()
            masked = _masked(message, values)
            if masked != message:
                record.msg, record.args = masked, None
        return True


_SECRETS_IN_LOGS = _CallSecretsLogFilter()

_CREDENTIAL_NAME = re.compile(
    r"auth|token|secret|key|passw|session|cookie|signature|credential", re.IGNORECASE
)
"""Card defaults (`headers`, `queries`) under such names are credentials: masked like auth's."""

AuthSpec = Mapping[str, Any] | Callable[["PreparedRequest"], Any]
"""Static auth for a `RestfulApi`: a mapping like a `tool_auth` result, or a callable
returning one (given the `PreparedRequest`)."""


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list, tuple)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def _pairs(name: str, value: Any) -> list[tuple[str, str]]:
    if value is None:
        return []
    if isinstance(value, (list, tuple)):
        return [(name, _scalar(v)) for v in value if v is not None]
    return [(name, _scalar(value))]


def _missing(value: Any) -> bool:
    return value is None or value == ""


@dataclass
class PreparedRequest:
    """A request before sending: what `RestfulApi.build_request` returns."""

    method: str
    url: str
    headers: dict[str, str] = field(default_factory=dict)
    params: list[tuple[str, str]] = field(default_factory=list)
    json_body: dict[str, Any] | None = None
    form: dict[str, Any] | None = None
    verify: Any = True
    cert: Any = None
    secret_params: set[str] = field(default_factory=set)
    secret_values: set[str] = field(default_factory=set)
    """Credential values added by auth (header values, their tokens, query values); masked
    wherever the server might echo them back (error messages, body excerpts)."""

    def apply_auth(self, result: Any) -> None:
        """Apply one `tool_auth` callback result (a mapping; see docs/http-tools.md)."""
        if result is None:
            return
        if hasattr(result, "model_dump"):
            result = result.model_dump()
        if not isinstance(result, Mapping):
            return
        for key, value in (result.get("headers") or {}).items():
            self.headers[str(key)] = _scalar(value)
            self._secret_header(self.headers[str(key)])
        query = result.get("query") or result.get("queries") or result.get("params") or {}
        for key, value in query.items():
            self.params = [(k, v) for k, v in self.params if k != key]
            self.params.extend(_pairs(str(key), value))
            self.secret_params.add(str(key))
            for _, v in _pairs(str(key), value):
                self._secret(v)
        if "verify" in result:
            self.verify = result["verify"]
        if "cert" in result:
            self.cert = result["cert"]

    def _secret(self, value: str) -> None:
        if len(value) >= 6:  # shorter values would mask ordinary words
            self.secret_values.add(value)

    def _secret_header(self, text: str) -> None:
        self._secret(text)
        self._secret(text.rsplit(None, 1)[-1] if text.strip() else "")  # "Bearer <token>"

    def secret_forms(self) -> list[str]:
        """Every form of every credential value (see `mask`), longest first."""
        forms: set[str] = set()
        for value in self.secret_values:
            forms |= _forms(value)
        return sorted((f for f in forms if len(f) >= 6), key=len, reverse=True)

    def mask(self, text: str) -> str:
        """`text` with every credential value added by auth (or a card default under a
        credential name) replaced by ``***``: raw, percent-encoded or JSON-escaped."""
        return _masked(text, self.secret_forms())


def _tls_key(verify: Any, cert: Any) -> tuple[Any, ...]:
    v = verify if isinstance(verify, (bool, str)) else id(verify)
    c = cert if isinstance(cert, (str, tuple)) or cert is None else id(cert)
    return (v, c)


class RestfulApi(Tool):
    """A tool calling the HTTP endpoint its `RestfulApiCard` describes.

    Arguments are placed by each property's `location`; the response becomes
    `{code, data, url, headers, reason, message}`. Errors: timeout 182101, response too big
    182102, HTTP 4xx/5xx 182103 (unless `raise_for_status=False`), transport failure 182104,
    unparsable body 182105, refused by the SSRF guard 182106. Redirects are returned, never
    followed. Per-call options: `timeout`, `max_response_byte_size`, `raise_for_status`.

    `auth` adds credentials to every call: a mapping shaped like a `tool_auth` result
    (`headers`, `query`, `verify`, `cert`) or a callable returning one; query values it adds
    are masked in the reported URL. One connection pool per tool (and per event loop for
    async calls); `aclose()` / `close()` release them. `resolver` replaces DNS resolution
    `(host, port) -> [ip, ...]` (for tests).
    """

    handles_timeout = True  # the deadline is enforced here, so it surfaces as 182101

    def __init__(
        self,
        card: RestfulApiCard,
        *,
        callbacks: CallbackFramework | None = None,
        auth: AuthSpec | None = None,
        resolver: Resolver | None = None,
    ) -> None:
        if not isinstance(card, RestfulApiCard):
            raise ToolCardError(
                "RestfulApi needs a RestfulApiCard",
                code=ErrorCode.RESTFUL_API_CARD_CONFIG_INVALID,
            )
        super().__init__(card, callbacks=callbacks)
        self._api_card = card
        self._resolver = resolver
        self._auth = auth
        self._lock = threading.Lock()
        self._aclients: weakref.WeakKeyDictionary[
            asyncio.AbstractEventLoop, dict[tuple[Any, ...], tuple[httpx2.AsyncClient, Any]]
        ] = weakref.WeakKeyDictionary()
        self._clients: dict[tuple[Any, ...], tuple[httpx2.Client, Any]] = {}

    @property
    def card(self) -> RestfulApiCard:
        """The tool's `RestfulApiCard`."""
        return self._api_card

    # request building -----------------------------------------------------------------------
    def build_request(self, inputs: Mapping[str, Any]) -> PreparedRequest:
        """Place validated arguments into path, query, headers and body."""
        card = self._api_card
        props = card.input_params.get("properties") or {}
        paths = dict(card.paths)
        queries = dict(card.queries)
        headers: dict[str, Any] = dict(card.headers)
        body: dict[str, Any] = {}
        form: dict[str, Any] = {}
        for name, value in inputs.items():
            loc = property_location(props[name]) if name in props else Location.BODY
            if loc is Location.PATH:
                if not _missing(value):
                    paths[name] = value
            elif loc is Location.QUERY:
                if not _missing(value):
                    queries[name] = value
            elif loc is Location.HEADER:
                if not _missing(value):
                    headers[name] = self._header_value(name, value)
            elif loc is Location.FORM:
                if value is not None:
                    form[name] = value
            elif value is not None:
                body[name] = value

        def substitute(match: Any) -> str:
            key = match.group(1)
            if _missing(paths.get(key)):
                raise ToolArgumentsError(
                    f"missing value for path parameter {key!r} of tool {card.name!r}",
                    tool_name=card.name,
                )
            text = _scalar(paths[key])
            if text.strip(".") == "":  # "." and ".." would be normalised away by the client
                return "%2E" * len(text)
            try:
                return quote(text, safe="")
            except UnicodeEncodeError:
                raise self._unencodable(f"path parameter {key!r}") from None

        url = PLACEHOLDER.sub(substitute, card.url)
        req = PreparedRequest(
            method=card.method,
            url=url,
            headers={str(k): _scalar(v) for k, v in headers.items() if v is not None},
        )
        for key, value in queries.items():
            req.params.extend(_pairs(str(key), value))
        for key, value in card.headers.items():
            if value is not None and _CREDENTIAL_NAME.search(str(key)):
                req._secret_header(_scalar(value))
        for key, value in card.queries.items():
            if _CREDENTIAL_NAME.search(str(key)) and key not in inputs:
                req.secret_params.add(str(key))
                for _, v in _pairs(str(key), value):
                    req._secret(v)
        if form:
            req.headers = {k: v for k, v in req.headers.items() if k.lower() != "content-type"}
            merged = {**body, **form}
            req.form = {
                k: [_scalar(x) for x in v] if isinstance(v, (list, tuple)) else _scalar(v)
                for k, v in merged.items()
            }
        elif body:
            if card.method in _BODYLESS:
                for key, value in body.items():
                    req.params.extend(_pairs(key, value))
            else:
                req.json_body = body
        return req

    def _unencodable(self, what: str, why: str = "") -> ToolArgumentsError:
        return ToolArgumentsError(
            f"the {what} of tool {self._api_card.name!r} cannot be put into the HTTP request"
            f"{why or ': it is not valid Unicode text (a lone surrogate)'}. Send plain text.",
            tool_name=self._api_card.name,
        )

    def _header_value(self, name: str, value: Any) -> str:
        text = _scalar(value)
        if _HEADER_TEXT.fullmatch(text) is None:
            raise self._unencodable(
                f"header parameter {name!r}",
                ": header values must be printable ASCII on one line",
            )
        return text

    # auth -----------------------------------------------------------------------------------
    def _auth_kwargs(self, req: PreparedRequest) -> dict[str, Any]:
        return {
            "tool_name": self._api_card.name,
            "tool_id": self._api_card.id,
            "tool_type": "restful_api",
            "card": self._api_card,
            "url": req.url,
            "method": req.method,
        }

    def _static_auth(self, req: PreparedRequest) -> None:
        if self._auth is not None:
            req.apply_auth(self._auth(req) if callable(self._auth) else self._auth)

    async def _authorize(self, req: PreparedRequest) -> None:
        self._static_auth(req)
        cb = self.callbacks
        if cb.has(E.TOOL_AUTH):
            for result in await cb.trigger(E.TOOL_AUTH, **self._auth_kwargs(req)):
                req.apply_auth(result)

    def _authorize_sync(self, req: PreparedRequest) -> None:
        self._static_auth(req)
        cb = self.callbacks
        if cb.has(E.TOOL_AUTH):
            for result in cb.trigger_sync(E.TOOL_AUTH, **self._auth_kwargs(req)):
                req.apply_auth(result)

    # clients --------------------------------------------------------------------------------
    def _async_client(self, req: PreparedRequest) -> httpx2.AsyncClient:
        loop = asyncio.get_running_loop()
        key = _tls_key(req.verify, req.cert)
        with self._lock:
            per_loop = self._aclients.setdefault(loop, {})
            entry = per_loop.get(key)
            if entry is None:
                transport = GuardedAsyncTransport(
                    self._api_card.effective_ssrf_policy(),
                    resolver=self._resolver,
                    verify=req.verify,
                    cert=req.cert,
                )
                client = httpx2.AsyncClient(
                    transport=transport, follow_redirects=False, trust_env=False
                )
                entry = per_loop[key] = (client, (req.verify, req.cert))
            return entry[0]

    def _sync_client(self, req: PreparedRequest) -> httpx2.Client:
        key = _tls_key(req.verify, req.cert)
        with self._lock:
            entry = self._clients.get(key)
            if entry is None:
                transport = GuardedSyncTransport(
                    self._api_card.effective_ssrf_policy(),
                    resolver=self._resolver,
                    verify=req.verify,
                    cert=req.cert,
                )
                client = httpx2.Client(transport=transport, follow_redirects=False, trust_env=False)
                entry = self._clients[key] = (client, (req.verify, req.cert))
            return entry[0]

    async def aclose(self) -> None:
        """Close the connection pools of the running event loop, and the sync ones."""
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        with self._lock:
            per_loop = self._aclients.pop(loop, {}) if loop is not None else {}
        for client, _ in per_loop.values():
            await client.aclose()
        self.close()

    def close(self) -> None:
        """Close the synchronous connection pools."""
        with self._lock:
            clients, self._clients = self._clients, {}
        for client, _ in clients.values():
            client.close()

    async def __aenter__(self) -> RestfulApi:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    # calling --------------------------------------------------------------------------------
    def _options(self, kwargs: dict[str, Any]) -> tuple[float | None, int, bool]:
        timeout = kwargs.get("timeout", self._api_card.timeout)
        limit = kwargs.get("max_response_byte_size") or self._api_card.max_response_byte_size
        raise_for_status = kwargs.get("raise_for_status", True)
        return timeout, int(limit), bool(raise_for_status)

    def _httpx_request(self, client: Any, req: PreparedRequest, timeout: float | None) -> Any:
        try:
            url = httpx2.URL(req.url)
            if req.params:
                url = url.copy_merge_params(tuple(req.params))
            return client.build_request(
                req.method,
                url,
                headers=req.headers,
                json=req.json_body,
                data=req.form,
                timeout=httpx2.Timeout(timeout),
            )
        except UnicodeError:
            raise self._unencodable("arguments") from None
        except httpx2.InvalidURL as e:
            raise self._unencodable("URL built from the arguments", f": {e}") from None
        except RecursionError:
            raise self._unencodable("body", ": it is nested too deeply") from None

    def _shown_url(self, url: httpx2.URL, req: PreparedRequest) -> str:
        if not req.secret_params:
            return str(url)
        params = [
            (k, _REDACTED if k in req.secret_params else v) for k, v in url.params.multi_items()
        ]
        return str(url.copy_with(params=params))

    def _too_big(self, limit: int, size: int | None = None) -> RestfulApiError:
        got = f" (Content-Length {size})" if size is not None else ""
        return RestfulApiError(
            f"the response of tool {self._api_card.name!r} exceeds the size limit of "
            f"{limit} bytes{got}",
            code=ErrorCode.RESTFUL_API_RESPONSE_SIZE_EXCEED_LIMIT,
            tool_name=self._api_card.name,
            details={"limit": limit},
        )

    def _check_length(self, response: httpx2.Response, limit: int) -> None:
        length = response.headers.get("content-length")
        if length is not None and length.strip().isdigit() and int(length) > limit:
            raise self._too_big(limit, int(length))

    def _timeout(self, timeout: float | None) -> RestfulApiTimeoutError:
        return RestfulApiTimeoutError(
            f"the HTTP call of tool {self._api_card.name!r} did not finish within "
            f"{timeout or 0:g} s",
            tool_name=self._api_card.name,
            code=ErrorCode.RESTFUL_API_EXECUTION_TIMEOUT,
            details={"timeout": timeout},
        )

    def _transport_error(self, req: PreparedRequest, error: Exception) -> RestfulApiError:
        if isinstance(error, httpx2.DecodingError):
            code = ErrorCode.RESTFUL_API_RESPONSE_PROCESS_ERROR
        else:
            code = ErrorCode.RESTFUL_API_EXECUTION_ERROR
        return RestfulApiError(
            f"{req.method} request of tool {self._api_card.name!r} failed: "
            f"{type(error).__name__}: {req.mask(str(error))}",
            code=code,
            tool_name=self._api_card.name,
            cause=error,
        )

    def _result(
        self, req: PreparedRequest, response: httpx2.Response, body: bytes, raise_for_status: bool
    ) -> dict[str, Any]:
        status = response.status_code
        forms = req.secret_forms()
        reason = _masked(response.reason_phrase, forms)
        url = _masked(self._shown_url(response.url, req), forms)
        if raise_for_status and status >= 400:
            # Mask before cutting, over enough bytes that a credential starting inside the
            # excerpt (at most 4 bytes a character) is whole: no prefix of it can be left.
            longest = max((len(f.encode()) for f in forms), default=0)
            window = body[: _EXCERPT * 4 + longest]
            text = _masked(window.decode("utf-8", errors="replace"), forms)
            excerpt = text[:_EXCERPT]
            more = "..." if len(text) > _EXCERPT or len(body) > len(window) else ""
            raise RestfulApiResponseError(
                f"HTTP {status} {reason} from {req.method} {url}: {excerpt}{more}",
                status=status,
                reason=reason,
                body=excerpt,
                url=url,
                tool_name=self._api_card.name,
            )
        shortest = len(forms[-1]) if forms else 0

        def mask(text: str) -> str:  # a shorter text holds no form: most JSON strings are
            return text if len(text) < shortest else _masked(text, forms)

        return {
            "code": status,
            # masked for a body echoing the request (an echo endpoint, a page printing it)
            "data": parse_body(
                response.headers.get("content-type"), body, mask=mask if forms else None
            ),
            "url": url,
            "headers": {k: _masked(v, forms) for k, v in response.headers.items()},
            "reason": reason,
            "message": "success" if 200 <= status < 300 else reason,
        }

    async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        timeout, limit, raise_for_status = self._options(kwargs)
        req = self.build_request(inputs)
        await self._authorize(req)
        client = self._async_client(req)
        try:
            with _SECRETS_IN_LOGS.call(req.secret_forms()):
                async with asyncio.timeout(timeout):
                    response, body = await self._asend(client, req, timeout, limit)
        except TimeoutError:
            raise self._timeout(timeout) from None
        except httpx2.TimeoutException as e:
            raise self._timeout(timeout) from e
        except (RestfulApiError, SsrfBlockedError):
            raise
        except httpx2.HTTPError as e:
            raise self._transport_error(req, e) from e
        return self._result(req, response, body, raise_for_status)

    async def _asend(
        self, client: httpx2.AsyncClient, req: PreparedRequest, timeout: float | None, limit: int
    ) -> tuple[httpx2.Response, bytes]:
        request = self._httpx_request(client, req, timeout)
        response = await client.send(request, stream=True)
        try:
            self._check_length(response, limit)
            chunks: list[bytes] = []
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise self._too_big(limit)
                chunks.append(chunk)
        finally:
            await response.aclose()
        return response, b"".join(chunks)

    def invoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        timeout, limit, raise_for_status = self._options(kwargs)
        deadline = None if timeout is None else time.monotonic() + timeout
        req = self.build_request(inputs)
        self._authorize_sync(req)
        client = self._sync_client(req)
        try:
            # httpx has per-phase timeouts only: the transport cuts every DNS lookup, connect,
            # read and write at the total deadline (a trickled head or chunk-size line too)
            with total_deadline(deadline), _SECRETS_IN_LOGS.call(req.secret_forms()):
                request = self._httpx_request(client, req, timeout)
                response = client.send(request, stream=True)
                try:
                    self._check_length(response, limit)
                    chunks: list[bytes] = []
                    size = 0
                    for chunk in response.iter_bytes():
                        size += len(chunk)
                        if size > limit:
                            raise self._too_big(limit)
                        if deadline is not None and time.monotonic() > deadline:
                            raise self._timeout(timeout)
                        chunks.append(chunk)
                finally:
                    response.close()
        except httpx2.TimeoutException as e:
            raise self._timeout(timeout) from e
        except (RestfulApiError, SsrfBlockedError):
            raise
        except httpx2.HTTPError as e:
            raise self._transport_error(req, e) from e
        return self._result(req, response, b"".join(chunks), raise_for_status)
