"""Fixtures for the provider tests: the scripted loopback server, models pointed at it, and
helpers that check bodies and responses against the official SDKs' types."""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

_TESTS = str(Path(__file__).resolve().parent.parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

from servers.provider_server import ProviderServer, RunningServer  # noqa: E402
from toolweave.chat import ChatResponse  # noqa: E402
from toolweave.providers import AnthropicChatModel, GeminiChatModel, OpenAIChatModel  # noqa: E402

SECRET = "sk-CANARY-9f8e7d6c5b4a39281706"


@pytest.fixture(scope="session")
def _running_server() -> Iterator[RunningServer]:
    running = RunningServer()
    running.start()
    yield running
    running.stop()


@pytest.fixture
def server(_running_server: RunningServer) -> Iterator[ProviderServer]:
    """The scripted server, emptied before and after each test."""
    state = _running_server.state
    state.reset()
    yield state
    state.reset()


def no_sleep(model: Any) -> list[float]:
    """Replace the model's retry sleeps with recorders; return the recorded delays."""
    delays: list[float] = []

    def sleep(seconds: float) -> None:
        delays.append(seconds)

    async def asleep(seconds: float) -> None:
        delays.append(seconds)

    model._http.sleep = sleep
    model._http.asleep = asleep
    return delays


@pytest.fixture
def openai_model(server: ProviderServer) -> Iterator[OpenAIChatModel]:
    model = OpenAIChatModel(
        "gpt-4o-mini", api_key=SECRET, base_url=f"{server.url}/v1", timeout=10.0
    )
    no_sleep(model)
    with model:
        yield model


@pytest.fixture
def anthropic_model(server: ProviderServer) -> Iterator[AnthropicChatModel]:
    model = AnthropicChatModel(
        "claude-sonnet-4-5", api_key=SECRET, base_url=server.url, timeout=10.0
    )
    no_sleep(model)
    with model:
        yield model


@pytest.fixture
def gemini_model(server: ProviderServer) -> Iterator[GeminiChatModel]:
    model = GeminiChatModel("gemini-2.5-flash", api_key=SECRET, base_url=server.url, timeout=10.0)
    no_sleep(model)
    with model:
        yield model


def calls_of(response: ChatResponse) -> list[list[Any]]:
    """`[[id, name, arguments], ...]` of a response's tool calls."""
    return [[c.id, c.name, c.arguments] for c in response.ai_message.tool_execution_requests]


# SDK type checks ----------------------------------------------------------------------------
def _consume(value: Any) -> Any:
    """Force pydantic's lazy iterable validation, recursively."""
    if isinstance(value, dict):
        return {k: _consume(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_consume(v) for v in value]
    if type(value).__name__ == "ValidatorIterator":
        return [_consume(v) for v in value]
    return value


def _unknown_keys(given: Any, validated: Any, path: str = "") -> list[str]:
    out: list[str] = []
    if isinstance(given, dict) and isinstance(validated, dict):
        for key, value in given.items():
            if key not in validated:
                out.append(f"{path}.{key}")
            else:
                out.extend(_unknown_keys(value, validated[key], f"{path}.{key}"))
    elif isinstance(given, list) and isinstance(validated, list):
        for i, (a, b) in enumerate(zip(given, validated, strict=False)):
            out.extend(_unknown_keys(a, b, f"{path}[{i}]"))
    return out


def check_typed_dict(adapter: Any, body: Any, allow: tuple[str, ...] = ()) -> None:
    """Validate `body` against an SDK TypedDict adapter, including nested iterables, and
    fail on keys the SDK type does not know (except those listed in `allow`)."""
    validated = _consume(adapter.validate_python(body))
    unknown = [k for k in _unknown_keys(body, validated) if not k.endswith(allow or ("\0",))]
    assert not unknown, f"keys unknown to the SDK type: {unknown}"


@functools.cache
def _adapter(kind: Any) -> Any:
    from pydantic import TypeAdapter

    return TypeAdapter(kind)


def check_openai_request(body: dict[str, Any], allow: tuple[str, ...] = ()) -> None:
    from openai.types.chat import completion_create_params as p

    kind = (
        p.CompletionCreateParamsStreaming
        if body.get("stream")
        else p.CompletionCreateParamsNonStreaming
    )
    check_typed_dict(_adapter(kind), body, allow)


def check_anthropic_request(body: dict[str, Any], allow: tuple[str, ...] = ()) -> None:
    from anthropic.types import message_create_params as p

    kind = (
        p.MessageCreateParamsStreaming if body.get("stream") else p.MessageCreateParamsNonStreaming
    )
    check_typed_dict(_adapter(kind), body, allow)


def check_gemini_request(body: dict[str, Any]) -> None:
    from google.genai import types

    known = {"contents", "systemInstruction", "tools", "toolConfig", "generationConfig"}
    assert set(body) <= known, f"unknown top-level keys: {set(body) - known}"
    for content in body["contents"]:
        types.Content.model_validate(content)
    if "systemInstruction" in body:
        types.Content.model_validate(body["systemInstruction"])
    for t in body.get("tools", ()):
        types.Tool.model_validate(t)
    if "toolConfig" in body:
        types.ToolConfig.model_validate(body["toolConfig"])
    if "generationConfig" in body:
        types.GenerationConfig.model_validate(body["generationConfig"])
