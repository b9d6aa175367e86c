"""OpenTelemetry spans following the GenAI semantic conventions (when `opentelemetry-api` is
installed and a tracer provider is configured; otherwise nothing happens and nothing costs).

Content (messages, tool arguments and results) is recorded only when opted in, as the
conventions ask: `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true` (or `SPAN_ONLY`,
`SPAN_AND_EVENT`), or `set_content_capture(True)`. Captured content is masked first
(`mask_secrets`): values under credential-like keys and credential-shaped text become `***`,
and so do the credentials of every live model (`mask_credentials_of`: each model exposes
what it holds as `secrets`, read at each recording, so tokens fetched later count too).
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import re
import threading
import weakref
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, quote_plus

try:  # the `otel` extra
    from opentelemetry import trace as _trace
    from opentelemetry.trace import ProxyTracerProvider, SpanKind, Status, StatusCode

    try:
        from opentelemetry.trace import NoOpTracerProvider
    except ImportError:  # pragma: no cover - very old API
        NoOpTracerProvider = ProxyTracerProvider  # type: ignore[misc,assignment]
except ImportError:  # pragma: no cover - exercised when the extra is absent
    _trace = None  # type: ignore[assignment]

__all__ = [
    "CAPTURE_CONTENT_ENV",
    "content_capture_enabled",
    "content_json",
    "current",
    "mask_credentials_of",
    "mask_secrets",
    "record_error",
    "record_tool_content",
    "set_content_capture",
    "span",
    "tracer",
    "tracing_enabled",
]

CAPTURE_CONTENT_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_capture: bool | None = None

_INSTRUMENTATION = "toolweave"


def tracing_enabled() -> bool:
    """True when opentelemetry-api is importable and a real tracer provider is set."""
    if _trace is None:
        return False
    # The global provider, read without get_tracer_provider(), which consults os.environ on
    # every call while none is set (too slow for the per-call hot path).
    provider = getattr(_trace, "_TRACER_PROVIDER", None)
    if provider is None:
        return False
    return not isinstance(provider, (ProxyTracerProvider, NoOpTracerProvider))


def tracer() -> Any:
    """toolweave's tracer (call only when `tracing_enabled()`)."""
    return _trace.get_tracer(_INSTRUMENTATION)


def record_error(s: Any, error: BaseException) -> None:
    """Mark span `s` failed with `error`: `error.type` is the exception's class name."""
    s.set_attribute("error.type", type(error).__qualname__)
    s.set_status(Status(StatusCode.ERROR, type(error).__qualname__))


@contextlib.contextmanager
def span(name: str, attributes: dict[str, Any], *, client: bool = False) -> Iterator[Any]:
    """Open a span (or nothing), current while the block runs, and record an exception's
    type on it as `error.type`; `client=True` makes it a CLIENT span."""
    if not tracing_enabled():
        yield None
        return
    with tracer().start_as_current_span(
        name,
        kind=SpanKind.CLIENT if client else SpanKind.INTERNAL,
        attributes={k: v for k, v in attributes.items() if v is not None},
        record_exception=False,
        set_status_on_exception=False,
    ) as s:
        try:
            yield s
        except BaseException as e:
            record_error(s, e)
            raise


_NO_SPAN = contextlib.nullcontext()
"""Stateless, so one serves every block (`current(None)` is entered once per tool call)."""


def current(s: Any | None) -> contextlib.AbstractContextManager[Any]:
    """Make span `s` the current one for a block (nothing when `s` is None); it is not
    ended on exit."""
    if s is None:
        return _NO_SPAN
    return _trace.use_span(  # type: ignore[no-any-return]
        s, end_on_exit=False, record_exception=False, set_status_on_exception=False
    )


# content capture -----------------------------------------------------------------------------
def set_content_capture(enabled: bool | None) -> None:
    """Record message contents and tool arguments/results on spans (`True`), never
    (`False`), or as `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` says (`None`, the
    default)."""
    global _capture
    _capture = enabled


def content_capture_enabled() -> bool:
    """Whether content is recorded on spans (see `set_content_capture`)."""
    if _capture is not None:
        return _capture
    value = os.environ.get(CAPTURE_CONTENT_ENV, "").strip().lower()
    return value in ("true", "1", "yes", "span_only", "span_and_event")


_SECRET_WORDS = (
    "password",
    "passwd",
    "secret",
    "apikey",
    "authorization",
    "cookie",
    "credential",
    "privatekey",
    "signature",
)
_SECRET_TEXT = (
    (re.compile(r"(?i)\b(bearer|basic)(\s+)[A-Za-z0-9._~+/=-]{6,}"), r"\1\2***"),
    (
        re.compile(
            r"(?i)\b(api[-_]?key|password|passwd|secret|token|access[-_]?key)(\s*[=:]\s*)[^\s&,;]+"
        ),
        r"\1\2***",
    ),
    (re.compile(r"\b(sk|pk|rk|ghp|gho|ghs|xox[abpr])([-_])[A-Za-z0-9_-]{10,}"), r"\1\2***"),
    (re.compile(r"\b(AKIA|ASIA)[0-9A-Z]{16}\b"), r"\1***"),
)

_SOURCES: weakref.WeakSet[Any] = weakref.WeakSet()
_SOURCES_LOCK = threading.Lock()


def mask_credentials_of(source: Any) -> None:
    """Mask what `source` holds (its `secrets`: an iterable of str, read each time content
    is recorded) in all captured content, tool spans included, for as long as `source`
    lives. Every HTTP chat model registers itself: its key, credential-like headers, the
    latest token of a token provider, AWS credentials from the chain and their refreshes."""
    with _SOURCES_LOCK:
        _SOURCES.add(source)


def _held_secrets() -> tuple[str, ...]:
    with _SOURCES_LOCK:
        sources = list(_SOURCES)
    out: list[str] = []
    for source in sources:
        try:
            held = tuple(source.secrets)
        except Exception:  # (a source that cannot tell is skipped, not a failed span)
            continue
        out.extend(h for h in held if isinstance(h, str))
    return tuple(out)


@functools.lru_cache(maxsize=256)
def secret_forms(secret: str) -> tuple[str, ...]:
    """The ways `secret` may show up in text: as is, JSON-escaped (also with `\\/` for
    `/`), percent-encoded; longest first, so no form leaves a piece of a longer one. Forms
    shorter than 4 characters are left out (they would mask common words)."""
    escaped = json.dumps(secret)[1:-1]
    forms = {
        secret,
        escaped,
        escaped.replace("/", "\\/"),
        json.dumps(secret, ensure_ascii=False)[1:-1],
        quote(secret, safe=""),
        quote_plus(secret),
    }
    return tuple(sorted((f for f in forms if len(f) >= 4), key=len, reverse=True))


def _secret_key(key: Any) -> bool:
    name = re.sub(r"[^a-z]", "", str(key).lower())
    return (
        name in ("auth", "pwd", "key")
        or name.endswith("token")
        or any(word in name for word in _SECRET_WORDS)
    )


def mask_secrets(value: Any, secrets: Iterable[str] = ()) -> Any:
    """A copy of `value` (JSON-like data or text) fit for telemetry: values under
    credential-like keys (`password`, `api_key`, `token`, `Authorization`, ...), bearer
    tokens, `key=value` credentials, `sk-...` style keys, the given `secrets` and those of
    every live model (`mask_credentials_of`), raw, JSON-escaped or percent-encoded, become
    `***`."""
    known = dict.fromkeys(
        form
        for secret in (*secrets, *_held_secrets())
        if isinstance(secret, str) and secret
        for form in secret_forms(secret)
    )
    return _mask(value, tuple(sorted(known, key=len, reverse=True)), 0)


def _mask(value: Any, forms: tuple[str, ...], depth: int) -> Any:
    if depth > 32:
        return "***"
    if isinstance(value, str):
        for form in forms:
            if form in value:
                value = value.replace(form, "***")
        for pattern, replacement in _SECRET_TEXT:
            value = pattern.sub(replacement, value)
        return value
    if isinstance(value, Mapping):
        return {
            str(k): "***" if _secret_key(k) else _mask(v, forms, depth + 1)
            for k, v in value.items()
        }
    if isinstance(value, (list, tuple)):
        return [_mask(v, forms, depth + 1) for v in value]
    return value


def content_json(value: Any, secrets: Iterable[str] = ()) -> str:
    """`value` masked (`mask_secrets`) and as JSON text, the form content attributes take."""
    return json.dumps(mask_secrets(value, tuple(secrets)), ensure_ascii=False, default=str)


def record_tool_content(s: Any, arguments: Any, result: Any = None, *, done: bool = True) -> None:
    """On an `execute_tool` span, when content capture is on: `gen_ai.tool.call.arguments`
    and (when `done`) `gen_ai.tool.call.result`, masked."""
    if s is None or not content_capture_enabled():
        return
    s.set_attribute("gen_ai.tool.call.arguments", content_json(arguments))
    if done:
        s.set_attribute("gen_ai.tool.call.result", content_json(_jsonable(result)))


def _jsonable(value: Any) -> Any:
    if isinstance(value, (str, int, float, bool, type(None), list, tuple, Mapping)):
        return value
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        try:
            return dump(mode="json")
        except Exception:  # a result that cannot be dumped is recorded as its text
            return str(value)
    return str(value)


def tool_span_attributes(
    tool_name: str, call_id: str | None, description: str | None
) -> dict[str, Any]:
    """Attributes of an `execute_tool` span (GenAI semantic conventions)."""
    return {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": tool_name,
        "gen_ai.tool.call.id": call_id,
        "gen_ai.tool.type": "function",
        "gen_ai.tool.description": description,
    }
