"""OpenTelemetry spans following the GenAI semantic conventions (when `opentelemetry-api` is
installed and a tracer provider is configured; otherwise nothing happens and nothing costs).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

try:  # the `otel` extra
    from opentelemetry import trace as _trace
    from opentelemetry.trace import ProxyTracerProvider, Status, StatusCode

    try:
        from opentelemetry.trace import NoOpTracerProvider
    except ImportError:  # pragma: no cover - very old API
        NoOpTracerProvider = ProxyTracerProvider  # type: ignore[misc,assignment]
except ImportError:  # pragma: no cover - exercised when the extra is absent
    _trace = None  # type: ignore[assignment]

__all__ = ["span", "tracing_enabled"]

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


@contextlib.contextmanager
def span(name: str, attributes: dict[str, Any]) -> Iterator[Any]:
    """Open a span (or nothing) and record an exception's type on it as `error.type`."""
    if not tracing_enabled():
        yield None
        return
    tracer = _trace.get_tracer(_INSTRUMENTATION)
    with tracer.start_as_current_span(
        name,
        attributes={k: v for k, v in attributes.items() if v is not None},
        record_exception=False,
        set_status_on_exception=False,
    ) as s:
        try:
            yield s
        except BaseException as e:
            s.set_attribute("error.type", type(e).__qualname__)
            s.set_status(Status(StatusCode.ERROR, type(e).__qualname__))
            raise


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
