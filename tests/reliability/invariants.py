"""Loop invariants checked after every fault scenario.

- `assert_history_valid`: every tool call id of every `AiMessage` is answered exactly once,
  right after it, and no id is used by two calls;
- `Counter` / `counting_tool`: how many times each tool body really ran;
- `LeakGuard`: no asyncio task and no thread outlives a scenario. Threads are compared by
  identity with a snapshot taken before; idle pool workers are tolerated — toolweave's own
  (``toolweave-worker_N``, which runs sync tools) and an event loop's default executor's
  (``asyncio_N``, used by `McpClient.close`) stay parked for reuse — they run nothing;
- `SecretScan`: no planted secret in error texts, log records (message, args, exception
  text) or OpenTelemetry spans (names, attributes, events, status).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
import time
import traceback
from collections import Counter as _Counter
from collections.abc import Iterable, Iterator
from typing import Any

from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.util._once import Once

from toolweave import AiMessage, ToolExecutionResultMessage

SECRET = "sk-test-SECRET-123"
"""The API key planted in every provider model of these tests."""
SECRET_HEADER = "Bearer sk-test-SECRET-123"


def assert_history_valid(messages: Iterable[Any]) -> None:
    """Every tool call id is answered exactly once, right after its AI turn; ids are unique."""
    pending: list[str] = []
    seen: set[str] = set()
    for m in messages:
        if isinstance(m, AiMessage):
            assert not pending, f"unanswered tool calls before a new AI turn: {pending}"
            pending = [r.id for r in m.tool_execution_requests]
            assert len(set(pending)) == len(pending), f"duplicate ids in one turn: {pending}"
            assert not (seen & set(pending)), f"tool call id reused: {seen & set(pending)}"
            seen.update(pending)
        elif isinstance(m, ToolExecutionResultMessage):
            assert m.id in pending, f"result for an unknown or already answered call {m.id}"
            pending.remove(m.id)
        else:
            assert not pending, f"unanswered tool calls: {pending}"
    assert not pending, f"unanswered tool calls at the end: {pending}"


def assert_partial_result(error: BaseException) -> Any:
    """An exception that escaped `ToolService` carries a valid `partial_result`."""
    partial = getattr(error, "partial_result", None)
    assert partial is not None, f"{type(error).__name__} escaped without partial_result"
    assert_history_valid(partial.messages)
    return partial


class Counter:
    """Counts tool executions by name (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.counts: _Counter[str] = _Counter()

    def hit(self, name: str) -> None:
        with self._lock:
            self.counts[name] += 1

    def assert_at_most_once(self, names: Iterable[str] | None = None) -> None:
        """No tool ran twice (for the given names, or all)."""
        keys = list(names) if names is not None else list(self.counts)
        twice = {k: self.counts[k] for k in keys if self.counts[k] > 1}
        assert not twice, f"tools executed more than once: {twice}"


# leaks ------------------------------------------------------------------------------------------
def _executor_worker(t: threading.Thread) -> bool:
    return t.name.startswith(("asyncio_", "toolweave-worker"))


class LeakGuard:
    """Snapshot tasks and threads; `check()` waits (bounded) for them to come back."""

    def __init__(self) -> None:
        self.threads = set(threading.enumerate())
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        self.loop = loop
        self.tasks = set(asyncio.all_tasks(loop)) if loop is not None else set()

    def extra_threads(self) -> list[threading.Thread]:
        return [
            t
            for t in threading.enumerate()
            if t not in self.threads and t.is_alive() and not _executor_worker(t)
        ]

    def extra_tasks(self) -> list[asyncio.Task[Any]]:
        if self.loop is None:
            return []
        current = asyncio.current_task(self.loop)
        return [
            t
            for t in asyncio.all_tasks(self.loop)
            if t not in self.tasks and t is not current and not t.done()
        ]

    def check_threads(self, timeout: float = 15.0) -> None:
        deadline = time.monotonic() + timeout
        while self.extra_threads() and time.monotonic() < deadline:
            time.sleep(0.05)
        extra = self.extra_threads()
        assert not extra, f"threads leaked: {[t.name for t in extra]}"

    async def acheck(self, timeout: float = 15.0) -> None:
        """Async check: tasks of this loop and threads (both waited for, bounded)."""
        deadline = time.monotonic() + timeout
        while (self.extra_tasks() or self.extra_threads()) and time.monotonic() < deadline:  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        tasks = self.extra_tasks()
        assert not tasks, f"tasks still running: {[t.get_coro() for t in tasks]}"
        extra = self.extra_threads()
        assert not extra, f"threads leaked: {[t.name for t in extra]}"


# secrets ----------------------------------------------------------------------------------------
class SecretScan:
    """Collects texts (errors, log records, spans) and asserts no secret is in any."""

    def __init__(self, secrets: Iterable[str] = (SECRET,)) -> None:
        self.secrets = tuple(secrets)
        self.texts: list[tuple[str, str]] = []

    def add(self, where: str, text: Any) -> None:
        self.texts.append((where, str(text)))

    def add_error(self, error: BaseException) -> None:
        """The error, its chain, its attributes and its formatted traceback."""
        seen: set[int] = set()
        e: BaseException | None = error
        while e is not None and id(e) not in seen:
            seen.add(id(e))
            self.add(f"error {type(e).__name__}", str(e))
            self.add(f"repr {type(e).__name__}", repr(e))
            for attr in ("message", "body", "details"):
                if hasattr(e, attr):
                    self.add(f"{type(e).__name__}.{attr}", getattr(e, attr))
            e = e.__cause__ or e.__context__
        self.add("traceback", "".join(traceback.format_exception(error)))
        partial = getattr(error, "partial_result", None)
        if partial is not None:
            self.add_messages(partial.messages)

    def add_messages(self, messages: Iterable[Any]) -> None:
        for m in messages:
            self.add(f"message {type(m).__name__}", repr(m))

    def add_records(self, records: Iterable[logging.LogRecord]) -> None:
        for r in records:
            self.add(f"log {r.name}", r.getMessage())
            self.add(f"log args {r.name}", repr(r.args))
            if r.exc_info and r.exc_info[1] is not None:
                self.add(f"log exc {r.name}", "".join(traceback.format_exception(r.exc_info[1])))
            if r.exc_text:
                self.add(f"log exc_text {r.name}", r.exc_text)

    def add_spans(self, exporter: InMemorySpanExporter) -> None:
        for s in exporter.get_finished_spans():
            self.add(f"span {s.name}", s.name)
            self.add(f"span attrs {s.name}", dict(s.attributes or {}))
            self.add(f"span status {s.name}", s.status.description)
            for ev in s.events:
                self.add(f"span event {s.name}", (ev.name, dict(ev.attributes or {})))

    def check(self) -> int:
        """Assert; return how many texts were scanned."""
        for where, text in self.texts:
            for secret in self.secrets:
                assert secret not in text, f"secret found in {where}: {text[:500]}"
        return len(self.texts)


@contextlib.contextmanager
def tracing() -> Iterator[InMemorySpanExporter]:
    """A real SDK tracer provider, installed globally for the block, then removed."""
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


def elapsed_bound(*, attempts: int, per_attempt: float, backoff: float = 0.0) -> float:
    """A generous upper bound for a failing call: every attempt using its whole timeout,
    plus the backoff, times 3, plus 5 s of scheduling slack (2 shared cores)."""
    return 3 * (attempts * per_attempt + backoff) + 5.0


class Timer:
    """`with Timer() as t: ...; t.elapsed`."""

    def __enter__(self) -> Timer:
        self.start = time.monotonic()
        self.elapsed = 0.0
        return self

    def __exit__(self, *exc: object) -> None:
        self.elapsed = time.monotonic() - self.start


def fast_retries(model: Any, scale: float = 0.01) -> list[float]:
    """Keep the retry policy, but sleep `scale` of each delay; return the requested delays."""
    delays: list[float] = []

    def sleep(seconds: float) -> None:
        delays.append(seconds)
        time.sleep(seconds * scale)

    async def asleep(seconds: float) -> None:
        delays.append(seconds)
        await asyncio.sleep(seconds * scale)

    model._http.sleep = sleep
    model._http.asleep = asleep
    return delays
