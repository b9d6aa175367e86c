"""Fixtures for the fault-injection and load tests: the raw fault server, models pointed at
it with a planted secret, and helpers that build OpenAI-shaped answers."""

from __future__ import annotations

import faulthandler
import json
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from servers.fault_provider_server import FaultServer
from toolweave.providers import OpenAIChatModel

from .invariants import SECRET, tracing

READ_TIMEOUT = 0.5
"""The read timeout of the fault tests' models: small, so timeouts are cheap to reach."""
CONNECT_TIMEOUT = 2.0
HANG_GUARD = 240.0


@pytest.fixture(autouse=True)
def _hang_guard() -> Iterator[None]:
    """Last resort: dump every thread and exit if a test hangs."""
    faulthandler.dump_traceback_later(HANG_GUARD, exit=True)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


@pytest.fixture(scope="session")
def _fault_server() -> Iterator[FaultServer]:
    server = FaultServer().start()
    yield server
    server.stop()


@pytest.fixture
def fault_server(_fault_server: FaultServer) -> Iterator[FaultServer]:
    """The raw fault server, emptied before and after each test."""
    _fault_server.reset()
    yield _fault_server
    _fault_server.reset()


def make_model(server: FaultServer, **kw: Any) -> OpenAIChatModel:
    """An OpenAI model with the planted secret, pointed at `server`."""
    kw.setdefault("timeout", httpx2.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT))
    kw.setdefault("api_key", SECRET)
    return OpenAIChatModel("gpt-test", base_url=f"{server.url}/v1", **kw)


@pytest.fixture
def spans() -> Iterator[Any]:
    with tracing() as exporter:
        yield exporter


# OpenAI-shaped answers ---------------------------------------------------------------------------
def completion(
    text: str | None = None, calls: list[tuple[str, str, dict[str, Any]]] | None = None
) -> dict[str, Any]:
    """A Chat Completions answer with text or tool calls `(id, name, arguments)`."""
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
            for i, n, a in calls
        ]
    return {
        "id": "chatcmpl-x",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-test",
        "choices": [
            {
                "index": 0,
                "message": message,
                "finish_reason": "tool_calls" if calls else "stop",
            }
        ],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
    }


def sse_chunk(delta: dict[str, Any], finish: str | None = None) -> str:
    """One `data:` event of a Chat Completions stream."""
    chunk = {
        "id": "chatcmpl-x",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": "gpt-test",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    return f"data: {json.dumps(chunk)}\n\n"


def text_delta(text: str) -> str:
    return sse_chunk({"content": text})


def call_delta(index: int, call_id: str, name: str, arguments: dict[str, Any]) -> str:
    return sse_chunk(
        {
            "tool_calls": [
                {
                    "index": index,
                    "id": call_id,
                    "type": "function",
                    "function": {"name": name, "arguments": json.dumps(arguments)},
                }
            ]
        }
    )
