"""Shared fixtures for the core tool-layer tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from core_support import Recorder
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from toolweave.callbacks import CallbackFramework


@pytest.fixture
def fw() -> CallbackFramework:
    return CallbackFramework()


@pytest.fixture
def recorder(fw: CallbackFramework) -> Recorder:
    return Recorder(fw)


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """A real SDK tracer provider installed globally for one test, then removed."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    old_provider = trace._TRACER_PROVIDER
    old_once = trace._TRACER_PROVIDER_SET_ONCE
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    trace.set_tracer_provider(provider)
    try:
        yield exporter
    finally:
        provider.shutdown()
        trace._TRACER_PROVIDER = old_provider
        trace._TRACER_PROVIDER_SET_ONCE = old_once
