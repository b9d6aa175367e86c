"""The HTTP layer shared by the providers: clients, retries, typed errors, redaction.

Rules (they follow the official OpenAI/Anthropic SDKs; see docs/providers.md):

- one `httpx2.Client` and one `httpx2.AsyncClient` per model object, created on first use,
  reused, closed by `close()` / `aclose()`; the async client is re-created when used from a
  different event loop (a pooled connection cannot outlive its loop);
- timeouts: 600 s per read/write/pool phase, 5 s to connect (`httpx2.Timeout(600, connect=5)`);
- retries: connection errors and timeouts, and HTTP 408, 409, 429 and 5xx, at most
  `max_retries` times (default 2). The server may force or veto a retry with
  `x-should-retry: true|false`. The delay honours `retry-after-ms` / `retry-after` (seconds or
  an HTTP date) when it is in (0, 60] s; a longer server-directed wait is not retried at all
  (the error is raised with `retry_after` set); otherwise exponential backoff
  `min(0.5 * 2**n, 8) * (1 - 0.25 * random())`;
- a stream is retried only until its response status is known; once events are flowing, a
  failure raises `ProviderError` and is never retried;
- errors: 401/403 → `AuthenticationError`, 429 → `RateLimitError`, any other status →
  `ProviderError`, each with `status`, `retry_after` and a redacted body excerpt;
  connection failures → `ProviderError(status=None)` whose message carries the transport
  error's reason (e.g. `Name or service not known`), with that error as `__cause__`;
- `retry_timeouts=False` (set for the local model: a server busy generating would only
  queue the retry behind the same work) makes a timeout final;
- size: a non-streamed answer, and each event of a stream, may be at most
  `max_response_bytes` (default 64 MiB, counted after decompression; None: no limit);
  beyond it `ProviderError` 183004, not retried. Error bodies are read up to 1 MiB;
- secrets (the API key, `Authorization`, `x-api-key`, `x-goog-api-key`, `key=` query
  parameters, bearer tokens) never appear in an error message, body excerpt, repr or log line.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import logging
import math
import random
import re
import threading
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from typing import Any

import httpx2

from .._utils.jsondepth import MAX_JSON_DEPTH, nested_deeper_than
from .._utils.unicode import SURROGATE, has_surrogate_escape, scrub_surrogates
from ..callbacks.otel import secret_forms as _secret_forms
from ..errors import AuthenticationError, ErrorCode, ProviderError, RateLimitError
from ._sse import EventDecoder, SSEDecoder, SSEEvent, SSEEventTooLarge

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "HttpTransport",
    "JsonTooDeepError",
    "decode_json",
    "encode_json",
    "json_failure",
    "parse_retry_after",
    "redact",
]

logger = logging.getLogger("toolweave.providers")

DEFAULT_TIMEOUT = httpx2.Timeout(600.0, connect=5.0)
"""Per-phase timeouts, as in the official SDKs: 5 s to connect, 600 s per read/write/pool."""
DEFAULT_MAX_RETRIES = 2
INITIAL_RETRY_DELAY = 0.5
MAX_RETRY_DELAY = 8.0
MAX_RETRY_AFTER = 60.0
BODY_EXCERPT_CHARS = 2000
MESSAGE_EXCERPT_CHARS = 300
DEFAULT_MAX_RESPONSE_BYTES = 64 * 1024 * 1024
"""The largest non-streamed answer, and the largest single stream event, accepted."""
ERROR_BODY_READ = 1024 * 1024
DEFAULT_LIMITS = httpx2.Limits(max_connections=1000, max_keepalive_connections=100)

_SECRET_PATTERNS = (
    (re.compile(r"(?i)([?&;]key=)[^&\s\"'#]+"), r"\1***"),
    (re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=\\-]+"), r"\1***"),
    (
        re.compile(
            r"(?i)((?:x-api-key|x-goog-api-key|api-key|authorization)[\"']?\s*[:=]\s*[\"']?)[^\s\"',}]+"
        ),
        r"\1***",
    ),
    (re.compile(r"\bsk-[A-Za-z0-9_-]{8,}"), "sk-***"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), "AIza***"),
)

_RETRYABLE_EXCEPTIONS = (httpx2.TransportError,)


class JsonTooDeepError(ValueError):
    """JSON nested deeper than `MAX_JSON_DEPTH` (256) arrays and objects."""


def decode_json(text: str | bytes) -> Any:
    """`json.loads` for provider answers: bytes are read as UTF-8 (invalid sequences become
    U+FFFD), a lone surrogate (`"\\ud800"`) becomes U+FFFD so the history stays encodable,
    and nesting deeper than `MAX_JSON_DEPTH` is a `ValueError` like any other invalid JSON,
    found before any recursive parse."""
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8-sig", "replace")
    if len(text) > MAX_JSON_DEPTH and nested_deeper_than(text):
        raise JsonTooDeepError("JSON nested too deeply")
    try:
        value = json.loads(text)
    except RecursionError:  # only when called with little stack left
        raise JsonTooDeepError("JSON nested too deeply") from None
    if has_surrogate_escape(text):
        value = scrub_surrogates(value)
    return value


def json_failure(error: ValueError) -> str:
    """How `decode_json` failed, for an error message: "nested too deeply" or "not JSON"."""
    return "nested too deeply" if isinstance(error, JsonTooDeepError) else "not JSON"


def encode_json(body: Any) -> bytes:
    """A request body as compact UTF-8 JSON. A lone surrogate that reached the history by
    another way (a tool's result, a caller's message) is sent as U+FFFD rather than making
    every later request of the conversation fail with `UnicodeEncodeError`."""
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        return SURROGATE.sub("\ufffd", text).encode("utf-8")


@functools.lru_cache(maxsize=256)
def redact(text: str, secrets: tuple[str, ...] = ()) -> str:
    """`text` with the given secrets (raw, JSON-escaped or percent-encoded) and anything that
    looks like a credential masked."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            for form in _secret_forms(secret):
                if form in text:
                    text = text.replace(form, "***")
    for pattern, replacement in _SECRET_PATTERNS:
        text = pattern.sub(replacement, text)
    return text


_CREDENTIAL_HEADER = re.compile(r"(?i)auth|key|token|secret|cookie|session|signature|passw")


def _header_secrets(headers: Mapping[str, str]) -> list[str]:
    """The values of credential-like headers (`X-Custom-Auth`, `api-key`, ...) given to a
    model, masked like its key (a scheme such as `Bearer` is stripped)."""
    out: list[str] = []
    for name, value in headers.items():
        if isinstance(value, str) and _CREDENTIAL_HEADER.search(name):
            token = value.split(None, 1)[-1] if " " in value.strip() else value.strip()
            if len(token) >= 8:
                out.append(token)
    return out


class _ProviderSecretsLogFilter(logging.Filter):
    """Masks provider keys in `httpx2`'s own INFO line (`HTTP Request: POST <url> "HTTP/1.1
    401 <reason phrase>"`) and in `httpcore2`'s DEBUG lines (response heads): a server may
    echo the key in its reason phrase or headers. Attached to those loggers when the first
    transport with a key is created."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: tuple[str, ...] = ()
        self._lock = threading.Lock()

    def add(self, secrets: tuple[str, ...]) -> None:
        new = tuple(s for s in secrets if s and len(s) >= 4 and s not in self._secrets)
        if not new:
            return
        with self._lock:
            if not self._secrets:
                for name in ("httpx2", "httpcore2.http11", "httpcore2.http2"):
                    logging.getLogger(name).addFilter(self)
            self._secrets = tuple(dict.fromkeys(self._secrets + new))

    def remove(self, secret: str) -> None:
        with self._lock:
            self._secrets = tuple(s for s in self._secrets if s != secret)

    def filter(self, record: logging.LogRecord) -> bool:
        secrets = self._secrets
        if secrets:
            message = record.getMessage()
            masked = redact(message, secrets)
            if masked != message:
                record.msg, record.args = masked, None
        return True


_PROVIDER_SECRETS_IN_LOGS = _ProviderSecretsLogFilter()


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds the server asks us to wait: `retry-after-ms`, then `retry-after` as seconds,
    then as an HTTP date. None when absent or unusable (zero, negative, nan, inf, garbage)."""
    value: float | None = None
    raw_ms = headers.get("retry-after-ms")
    if raw_ms is not None:
        try:
            value = float(raw_ms) / 1000.0
        except ValueError:
            value = None
    if value is None:
        raw = headers.get("retry-after")
        if raw is not None:
            try:
                value = float(raw)
            except ValueError:
                try:
                    parsed = email.utils.parsedate_tz(raw)
                    if parsed is not None:
                        value = email.utils.mktime_tz(parsed) - (
                            time.time() if now is None else now
                        )
                except (TypeError, ValueError, OverflowError, OSError):
                    value = None
    if value is None or math.isnan(value) or math.isinf(value) or value <= 0:
        return None
    return value


def _backoff(retries_taken: int) -> float:
    n = min(retries_taken, 1000)
    return min(INITIAL_RETRY_DELAY * 2.0**n, MAX_RETRY_DELAY) * (1 - 0.25 * random.random())


def _should_retry_status(response: httpx2.Response) -> bool:
    forced = response.headers.get("x-should-retry")
    if forced == "true":
        return True
    if forced == "false":
        return False
    status = response.status_code
    return status in (408, 409, 429) or status >= 500


class _Retry(Exception):
    """Internal: the attempt failed and may be retried after `delay` seconds."""

    def __init__(self, delay: float, error: ProviderError) -> None:
        super().__init__()
        self.delay = delay
        self.error = error


class HttpTransport:
    """Sends JSON requests for one model object with retries, typed errors and redaction.

    `sleep` / `asleep` are the waiting functions (replaceable in tests). `retry_timeouts`
    false makes a timeout final (other transport errors are still retried).
    """

    def __init__(
        self,
        *,
        provider: str,
        headers: Mapping[str, str],
        secrets: tuple[str, ...],
        timeout: float | httpx2.Timeout | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        http_client: httpx2.Client | None = None,
        async_http_client: httpx2.AsyncClient | None = None,
        error_hook: Callable[[int, str], type[ProviderError] | None] | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if max_response_bytes is not None and (
            not isinstance(max_response_bytes, int) or max_response_bytes <= 0
        ):
            raise TypeError(
                f"max_response_bytes must be a positive int or None, got {max_response_bytes!r}"
            )
        if max_retries is None or not isinstance(max_retries, int) or max_retries < 0:
            raise TypeError(
                f"max_retries must be a non-negative int (0 disables retries), got {max_retries!r}"
            )
        self.provider = provider
        self._headers = dict(headers)
        self._secrets = tuple(dict.fromkeys([*secrets, *_header_secrets(self._headers)]))
        self._secrets = tuple(s for s in self._secrets if s)
        _PROVIDER_SECRETS_IN_LOGS.add(self._secrets)
        if timeout is None:
            self.timeout = DEFAULT_TIMEOUT
        elif isinstance(timeout, httpx2.Timeout):
            self.timeout = timeout
        else:
            self.timeout = httpx2.Timeout(timeout)
        self.max_retries = max_retries
        self.max_response_bytes = max_response_bytes
        self._client = http_client
        self._owns_client = http_client is None
        self._aclient = async_http_client
        self._owns_aclient = async_http_client is None
        self._aclient_loop: weakref.ref[asyncio.AbstractEventLoop] | None = None
        self._error_hook = error_hook
        self.retry_timeouts = True
        self.signer: Callable[[httpx2.Request], None] | None = None
        """Signs each request (every attempt) in place, e.g. AWS SigV4."""
        self.sleep: Callable[[float], None] = time.sleep
        self.asleep: Callable[[float], Awaitable[None]] = asyncio.sleep

    def __repr__(self) -> str:
        return f"HttpTransport(provider={self.provider!r}, max_retries={self.max_retries})"

    # clients ------------------------------------------------------------------------------
    @property
    def client(self) -> httpx2.Client:
        """The sync client (created on first use)."""
        if self._client is None:
            self._client = httpx2.Client(
                timeout=self.timeout, limits=DEFAULT_LIMITS, follow_redirects=False
            )
        return self._client

    @property
    def aclient(self) -> httpx2.AsyncClient:
        """The async client for the running event loop (created on first use)."""
        if self._aclient is not None and self._owns_aclient:
            try:
                loop = asyncio.get_running_loop()
            except RuntimeError:
                loop = None
            bound = self._aclient_loop() if self._aclient_loop is not None else None
            if loop is not None and bound is not loop:
                # Created on another (maybe closed) loop: its pooled connections are unusable.
                self._aclient = None
        if self._aclient is None:
            self._aclient = httpx2.AsyncClient(
                timeout=self.timeout, limits=DEFAULT_LIMITS, follow_redirects=False
            )
            try:
                self._aclient_loop = weakref.ref(asyncio.get_running_loop())
            except RuntimeError:
                self._aclient_loop = None
        return self._aclient

    def close(self) -> None:
        """Close the sync client (if we created it)."""
        if self._client is not None and self._owns_client:
            self._client.close()
            self._client = None

    async def aclose(self) -> None:
        """Close both clients (those we created)."""
        if self._aclient is not None and self._owns_aclient:
            client, self._aclient = self._aclient, None
            bound = self._aclient_loop() if self._aclient_loop is not None else None
            if bound is asyncio.get_running_loop():
                await client.aclose()
        self.close()

    def add_secret(self, secret: str) -> None:
        """Mask `secret` too (a credential sent in a header of the model's own)."""
        if secret and secret not in self._secrets:
            self._secrets = (*self._secrets, secret)
            _PROVIDER_SECRETS_IN_LOGS.add((secret,))

    @property
    def secrets(self) -> tuple[str, ...]:
        """What this transport masks: the key, credential-like header values, and the
        latest tokens and credentials added since (`add_secret`)."""
        return self._secrets

    def remove_secret(self, secret: str) -> None:
        """Stop masking `secret` (a short-lived token replaced by newer ones: the list of
        secrets must not grow with every token)."""
        if secret in self._secrets:
            self._secrets = tuple(s for s in self._secrets if s != secret)
            _PROVIDER_SECRETS_IN_LOGS.remove(secret)

    # errors -------------------------------------------------------------------------------
    def redact(self, text: str) -> str:
        """`text` with this transport's secrets masked."""
        return redact(text, self._secrets)

    def status_error(
        self, status: int, body: bytes | str, headers: Mapping[str, str]
    ) -> ProviderError:
        """The typed error for an HTTP error response (body redacted and cut)."""
        text = body.decode("utf-8", "replace") if isinstance(body, bytes) else body
        excerpt = self.redact(text[: BODY_EXCERPT_CHARS * 2])[:BODY_EXCERPT_CHARS]
        detail = _error_message(text)
        detail = self.redact(detail)[:MESSAGE_EXCERPT_CHARS] if detail else ""
        retry_after = parse_retry_after(headers)
        cls: type[ProviderError] | None = None
        if self._error_hook is not None:
            cls = self._error_hook(status, text)
        if cls is None:
            if status in (401, 403):
                cls = AuthenticationError
            elif status == 429:
                cls = RateLimitError
            else:
                cls = ProviderError
        message = f"{self.provider} API error: HTTP {status}"
        if detail:
            message += f": {detail}"
        return cls(
            message, provider=self.provider, status=status, body=excerpt, retry_after=retry_after
        )

    def stream_error(self, payload: Any, status: int | None = 200) -> ProviderError:
        """The error for an `error` event received inside a successful stream."""
        text = json.dumps(payload, ensure_ascii=False) if not isinstance(payload, str) else payload
        detail = self.redact(_error_message(text) or text)[:MESSAGE_EXCERPT_CHARS]
        return ProviderError(
            f"{self.provider} stream error: {detail}",
            provider=self.provider,
            status=status,
            body=self.redact(text)[:BODY_EXCERPT_CHARS],
        )

    def protocol_error(self, message: str) -> ProviderError:
        """An invalid or truncated response."""
        return ProviderError(
            f"{self.provider}: {self.redact(message)}",
            provider=self.provider,
            code=ErrorCode.PROVIDER_RESPONSE_INVALID,
        )

    def too_large(self, what: str = "the response") -> ProviderError:
        """The error for an answer or stream event over `max_response_bytes`."""
        return self.protocol_error(
            f"{what} is larger than max_response_bytes ({self.max_response_bytes} bytes)"
        )

    def _limit(self, response: httpx2.Response) -> tuple[int | None, bool]:
        """How much of `response` to read, and whether more is an error (a success) or
        just cut off (an error status: only its excerpt and message are needed)."""
        limit = self.max_response_bytes
        if response.status_code >= 300:
            return min(limit or ERROR_BODY_READ, ERROR_BODY_READ), False
        if limit is not None:
            declared = response.headers.get("content-length", "")
            if declared.isdigit() and int(declared) > limit:
                raise self.too_large()
        return limit, True

    def _read(self, response: httpx2.Response) -> bytes:
        limit, strict = self._limit(response)
        if limit is None:
            return response.read()
        out = bytearray()
        for chunk in response.iter_bytes():
            out += chunk
            if len(out) > limit:
                if strict:
                    raise self.too_large()
                break
        return bytes(out[:limit])

    async def _aread(self, response: httpx2.Response) -> bytes:
        limit, strict = self._limit(response)
        if limit is None:
            return await response.aread()
        out = bytearray()
        async for chunk in response.aiter_bytes():
            out += chunk
            if len(out) > limit:
                if strict:
                    raise self.too_large()
                break
        return bytes(out[:limit])

    def _decoder(self) -> SSEDecoder:
        return SSEDecoder(self.max_response_bytes)

    def not_a_stream(self, content_type: str, body: bytes) -> ProviderError:
        """The error for a 2xx answer to a stream request that is not an event stream (a JSON
        error object, an HTML page): the server's own message, not "the stream ended"."""
        text = body.decode("utf-8", "replace")
        try:
            data = decode_json(text)
        except ValueError:
            data = None
        if isinstance(data, dict) and data.get("error"):
            return self.stream_error(data["error"])
        excerpt = " ".join(text.split())[:MESSAGE_EXCERPT_CHARS]
        return self.protocol_error(
            f"expected an event stream, got {content_type or 'no content type'}: {excerpt!r}"
        )

    def _connection_error(
        self, exc: BaseException, during_stream: bool = False, note: str = ""
    ) -> ProviderError:
        kind = "timed out" if isinstance(exc, httpx2.TimeoutException) else "connection error"
        where = " during the stream (not retried)" if during_stream else ""
        reason = self.redact(" ".join(str(exc).split()))[:MESSAGE_EXCERPT_CHARS]
        detail = f"{type(exc).__name__}: {reason}" if reason else type(exc).__name__
        return ProviderError(
            f"{self.provider} API {kind}{where}: {detail}{note}", provider=self.provider
        )

    # request building ---------------------------------------------------------------------
    def _request(
        self,
        client: httpx2.Client | httpx2.AsyncClient,
        url: str,
        body: Any,
        extra: Mapping[str, str] | None,
        attempt: int,
    ) -> httpx2.Request:
        content = encode_json(body)
        headers = {**self._headers, "content-type": "application/json"}
        if extra:
            headers.update(extra)
        if attempt:
            headers["x-toolweave-retry-count"] = str(attempt)
        request = client.build_request("POST", url, content=content, headers=headers)
        if self.signer is not None:
            self.signer(request)  # after every header is set: it signs what is sent
        return request

    def _check(self, response: httpx2.Response, body: bytes, attempt: int) -> None:
        """Raise `_Retry` or the typed error for a non-2xx response."""
        status = response.status_code
        if status < 400 and not (300 <= status < 400):
            return
        error = self.status_error(status, body, response.headers)
        logger.debug("%s request failed: status=%s attempt=%d", self.provider, status, attempt + 1)
        if attempt < self.max_retries and _should_retry_status(response):
            retry_after = error.retry_after
            if retry_after is not None and retry_after > MAX_RETRY_AFTER:
                raise error
            raise _Retry(retry_after if retry_after is not None else _backoff(attempt), error)
        raise error

    def _transport_failure(self, exc: Exception, attempt: int) -> _Retry:
        final = not self.retry_timeouts and isinstance(exc, httpx2.TimeoutException)
        note = " (not retried: raise the timeout)" if final else ""
        error = self._connection_error(exc, note=note)
        error.__cause__ = exc
        logger.debug(
            "%s request failed: error=%s attempt=%d", self.provider, type(exc).__name__, attempt + 1
        )
        if attempt < self.max_retries and not final:
            return _Retry(_backoff(attempt), error)
        raise error from exc

    # sync ---------------------------------------------------------------------------------
    def post_json(self, url: str, body: Any, headers: Mapping[str, str] | None = None) -> Any:
        """POST `body` as JSON and return the decoded JSON answer (with retries)."""
        attempt = 0
        while True:
            try:
                try:
                    response = self.client.send(
                        self._request(self.client, url, body, headers, attempt), stream=True
                    )
                    try:
                        content = self._read(response)
                    finally:
                        response.close()
                except _RETRYABLE_EXCEPTIONS as e:
                    raise self._transport_failure(e, attempt) from e
                self._check(response, content, attempt)
            except _Retry as r:
                self.sleep(r.delay)
                attempt += 1
                continue
            logger.debug(
                "%s request ok: status=%s attempts=%d",
                self.provider,
                response.status_code,
                attempt + 1,
            )
            return self._decode(content)

    def stream_events(
        self,
        url: str,
        body: Any,
        headers: Mapping[str, str] | None = None,
        decoder_factory: Callable[[], EventDecoder] | None = None,
    ) -> Iterator[list[SSEEvent]]:
        """POST `body` and yield the SSE events of the answer, one list per network read
        (retried only before the first event)."""
        attempt = 0
        while True:
            try:
                try:
                    response = self.client.send(
                        self._request(self.client, url, body, headers, attempt), stream=True
                    )
                except _RETRYABLE_EXCEPTIONS as e:
                    raise self._transport_failure(e, attempt) from e
                if response.status_code >= 300:
                    try:
                        content = self._read(response)
                    except _RETRYABLE_EXCEPTIONS:
                        content = b""
                    finally:
                        response.close()
                    self._check(response, content, attempt)
                elif _not_sse(response):
                    try:
                        content = _read_some(response.iter_bytes())
                    except _RETRYABLE_EXCEPTIONS:
                        content = b""
                    finally:
                        response.close()
                    raise self.not_a_stream(response.headers.get("content-type", ""), content)
            except _Retry as r:
                self.sleep(r.delay)
                attempt += 1
                continue
            break
        try:
            decoder: EventDecoder = (
                self._decoder() if decoder_factory is None else decoder_factory()
            )
            try:
                for chunk in response.iter_bytes():
                    batch = decoder.feed(chunk)
                    if batch:
                        yield batch
                tail = decoder.flush()
                if tail:
                    yield tail
            except _RETRYABLE_EXCEPTIONS as e:
                raise self._connection_error(e, during_stream=True) from e
            except SSEEventTooLarge:
                raise self.too_large("a stream event") from None
        finally:
            response.close()

    # async --------------------------------------------------------------------------------
    async def apost_json(
        self, url: str, body: Any, headers: Mapping[str, str] | None = None
    ) -> Any:
        """Async `post_json`."""
        attempt = 0
        while True:
            try:
                client = self.aclient
                try:
                    response = await client.send(
                        self._request(client, url, body, headers, attempt), stream=True
                    )
                    try:
                        content = await self._aread(response)
                    finally:
                        await response.aclose()
                except _RETRYABLE_EXCEPTIONS as e:
                    raise self._transport_failure(e, attempt) from e
                self._check(response, content, attempt)
            except _Retry as r:
                await self.asleep(r.delay)
                attempt += 1
                continue
            logger.debug(
                "%s request ok: status=%s attempts=%d",
                self.provider,
                response.status_code,
                attempt + 1,
            )
            return self._decode(content)

    async def astream_events(
        self,
        url: str,
        body: Any,
        headers: Mapping[str, str] | None = None,
        decoder_factory: Callable[[], EventDecoder] | None = None,
    ) -> AsyncIterator[list[SSEEvent]]:
        """Async `stream_events`."""
        attempt = 0
        while True:
            try:
                client = self.aclient
                try:
                    response = await client.send(
                        self._request(client, url, body, headers, attempt), stream=True
                    )
                except _RETRYABLE_EXCEPTIONS as e:
                    raise self._transport_failure(e, attempt) from e
                if response.status_code >= 300:
                    try:
                        content = await self._aread(response)
                    except _RETRYABLE_EXCEPTIONS:
                        content = b""
                    finally:
                        await response.aclose()
                    self._check(response, content, attempt)
                elif _not_sse(response):
                    try:
                        content = await _aread_some(response.aiter_bytes())
                    except _RETRYABLE_EXCEPTIONS:
                        content = b""
                    finally:
                        await response.aclose()
                    raise self.not_a_stream(response.headers.get("content-type", ""), content)
            except _Retry as r:
                await self.asleep(r.delay)
                attempt += 1
                continue
            break
        try:
            decoder: EventDecoder = (
                self._decoder() if decoder_factory is None else decoder_factory()
            )
            try:
                async for chunk in response.aiter_bytes():
                    batch = decoder.feed(chunk)
                    if batch:
                        yield batch
                tail = decoder.flush()
                if tail:
                    yield tail
            except _RETRYABLE_EXCEPTIONS as e:
                raise self._connection_error(e, during_stream=True) from e
            except SSEEventTooLarge:
                raise self.too_large("a stream event") from None
        finally:
            await response.aclose()

    def _decode(self, content: bytes) -> Any:
        try:
            return decode_json(content)
        except ValueError as e:
            raise self.protocol_error(
                f"the response is {json_failure(e)}: {content[:200].decode('utf-8', 'replace')!r}"
            ) from None


_NOT_A_STREAM_READ = 64 * 1024


def _not_sse(response: httpx2.Response) -> bool:
    """A 2xx answer to a stream request that is clearly not an event stream: JSON or HTML.
    (Other or missing content types are parsed as SSE; some servers mislabel their streams.)"""
    ctype = response.headers.get("content-type", "").lower()
    return "json" in ctype or "html" in ctype


def _read_some(chunks: Iterator[bytes]) -> bytes:
    out = bytearray()
    for chunk in chunks:
        out += chunk
        if len(out) >= _NOT_A_STREAM_READ:
            break
    return bytes(out[:_NOT_A_STREAM_READ])


async def _aread_some(chunks: AsyncIterator[bytes]) -> bytes:
    out = bytearray()
    async for chunk in chunks:
        out += chunk
        if len(out) >= _NOT_A_STREAM_READ:
            break
    return bytes(out[:_NOT_A_STREAM_READ])


def _error_message(text: str) -> str:
    """The human message inside a JSON error body (`error.message`, `message`), else the
    start of the text."""
    try:
        data = decode_json(text)
    except ValueError:
        return " ".join(text.split())[:MESSAGE_EXCERPT_CHARS]
    if isinstance(data, list) and data:
        data = data[0]
    if isinstance(data, dict):
        err = data.get("error", data)
        if isinstance(err, dict):
            msg = err.get("message")
            if isinstance(msg, str) and msg:
                kind = err.get("type") or err.get("status") or err.get("code")
                return f"{msg} ({kind})" if isinstance(kind, str) and kind else msg
        elif isinstance(err, str):
            return err
    return " ".join(text.split())[:MESSAGE_EXCERPT_CHARS]
