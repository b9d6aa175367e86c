"""The shared HTTP layer: retries, Retry-After, typed errors, secrets, client lifecycle."""

from __future__ import annotations

import asyncio
import logging
import socket
from typing import Any

import pytest

from servers.provider_server import ProviderServer
from toolweave.chat import ChatRequest, ResponseCompleted, UserMessage
from toolweave.errors import AuthenticationError, ProviderError, RateLimitError
from toolweave.providers import AnthropicChatModel, GeminiChatModel, OpenAIChatModel
from toolweave.providers._http import parse_retry_after, redact

from .conftest import SECRET, no_sleep

OK = {
    "json": {
        "id": "ok",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "fine"},
                "finish_reason": "stop",
            }
        ],
    }
}
REQUEST = ChatRequest([UserMessage("hi")])


def _error(status: int, headers: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {
        "status": status,
        "headers": headers or {},
        "json": {"error": {"message": f"status {status}", "type": "x"}},
        **extra,
    }


def test_401_is_authentication_error_without_retry(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    server.enqueue(_error(401))
    with pytest.raises(AuthenticationError) as info:
        openai_model.chat(REQUEST)
    assert info.value.status == 401 and info.value.provider == "openai"
    assert "status 401" in str(info.value)
    assert len(server.requests) == 1


def test_403_and_400_are_not_retried(server: ProviderServer, openai_model: OpenAIChatModel) -> None:
    server.enqueue(_error(403), _error(400))
    with pytest.raises(AuthenticationError):
        openai_model.chat(REQUEST)
    with pytest.raises(ProviderError) as info:
        openai_model.chat(REQUEST)
    assert type(info.value) is ProviderError and info.value.status == 400
    assert len(server.requests) == 2


def test_429_with_retry_after_then_success(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    delays = no_sleep(openai_model)
    server.enqueue(_error(429, {"retry-after": "2"}), OK)
    assert openai_model.chat(REQUEST).ai_message.text == "fine"
    assert len(server.requests) == 2
    assert delays == [2.0]  # honoured exactly
    assert "x-toolweave-retry-count" not in server.requests[0].headers
    assert server.requests[1].headers["x-toolweave-retry-count"] == "1"


def test_retry_after_ms(server: ProviderServer, openai_model: OpenAIChatModel) -> None:
    delays = no_sleep(openai_model)
    server.enqueue(_error(503, {"retry-after-ms": "1500", "retry-after": "9"}), OK)
    openai_model.chat(REQUEST)
    assert delays == [1.5]


def test_500_then_success_with_backoff(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    delays = no_sleep(openai_model)
    server.enqueue(_error(500), _error(502), OK)
    assert openai_model.chat(REQUEST).ai_message.text == "fine"
    assert len(server.requests) == 3
    assert 0.375 <= delays[0] <= 0.5 and 0.75 <= delays[1] <= 1.0


async def test_500_then_success_async(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    delays = no_sleep(openai_model)
    server.enqueue(_error(500), OK)
    response = await openai_model.achat(REQUEST)
    assert response.ai_message.text == "fine" and len(delays) == 1


def test_429_forever_is_rate_limit_error_after_max_retries(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    delays = no_sleep(openai_model)
    server.enqueue(_error(429, {"retry-after": "1"}, repeat=True))
    with pytest.raises(RateLimitError) as info:
        openai_model.chat(REQUEST)
    assert len(server.requests) == 3  # 1 + max_retries
    assert delays == [1.0, 1.0]
    assert info.value.retry_after == 1.0 and info.value.status == 429


@pytest.mark.parametrize("max_retries", [0, 5])
def test_max_retries_bounds_attempts(server: ProviderServer, max_retries: int) -> None:
    model = OpenAIChatModel("m", api_key="k", base_url=f"{server.url}/v1", max_retries=max_retries)
    delays = no_sleep(model)
    server.enqueue(_error(503, repeat=True))
    with model, pytest.raises(ProviderError):
        model.chat(REQUEST)
    assert len(server.requests) == max_retries + 1
    caps = [0.5, 1.0, 2.0, 4.0, 8.0]
    for delay, cap in zip(delays, caps, strict=False):
        assert 0.75 * cap <= delay <= cap


def test_max_retries_none_rejected() -> None:
    with pytest.raises(TypeError, match="max_retries"):
        OpenAIChatModel("m", api_key="k", max_retries=None)  # type: ignore[arg-type]


def test_server_can_force_or_veto_a_retry(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    no_sleep(openai_model)
    server.enqueue(_error(400, {"x-should-retry": "true"}), OK)
    assert openai_model.chat(REQUEST).ai_message.text == "fine"
    server.reset()
    server.enqueue(_error(503, {"x-should-retry": "false"}))
    with pytest.raises(ProviderError):
        openai_model.chat(REQUEST)
    assert len(server.requests) == 1


def test_long_retry_after_is_not_waited_for(
    server: ProviderServer, openai_model: OpenAIChatModel
) -> None:
    delays = no_sleep(openai_model)
    server.enqueue(_error(429, {"retry-after": "3600"}))
    with pytest.raises(RateLimitError) as info:
        openai_model.chat(REQUEST)
    assert delays == [] and info.value.retry_after == 3600.0
    assert len(server.requests) == 1


def test_stream_status_errors_are_retried_before_the_first_event(
    server: ProviderServer, anthropic_model: AnthropicChatModel
) -> None:
    server.enqueue(
        _error(529),
        {
            "status": 200,
            "sse": [
                'event: message_start\ndata: {"type":"message_start","message":{"id":"m","model":"c","usage":{"input_tokens":1}}}\n\n',
                'event: message_stop\ndata: {"type":"message_stop"}\n\n',
            ],
        },
    )
    events = list(anthropic_model.stream(REQUEST))
    assert isinstance(events[-1], ResponseCompleted)
    assert len(server.requests) == 2


def test_connection_errors_are_retried_then_raised() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    model = OpenAIChatModel(
        "m", api_key=SECRET, base_url=f"http://127.0.0.1:{port}/v1", timeout=5.0
    )
    delays = no_sleep(model)
    with model, pytest.raises(ProviderError) as info:
        model.chat(REQUEST)
    assert info.value.status is None and "connection error" in info.value.message
    assert info.value.__cause__ is not None
    assert len(delays) == 2
    assert SECRET not in str(info.value)


# secrets ------------------------------------------------------------------------------------
def test_secrets_never_in_errors_reprs_or_logs(
    server: ProviderServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = f"Incorrect API key provided: {SECRET}. Authorization: Bearer {SECRET} x-api-key: {SECRET} url ?key={SECRET}"
    models = [
        OpenAIChatModel("m", api_key=SECRET, base_url=f"{server.url}/v1"),
        AnthropicChatModel("c", api_key=SECRET, base_url=server.url),
        GeminiChatModel("g", api_key=SECRET, base_url=server.url),
    ]
    for model in models:
        no_sleep(model)
        server.enqueue(
            {"status": 401, "json": {"error": {"message": echo}}},
            {"status": 500, "body": echo, "repeat": True},
        )
        errors: list[ProviderError] = []
        for _ in range(2):
            with pytest.raises(ProviderError) as info:
                model.chat(REQUEST)
            errors.append(info.value)
        server.reset()
        for error in errors:
            for text in (
                str(error),
                repr(error),
                error.body or "",
                error.message,
                str(error.to_dict()),
            ):
                assert SECRET not in text
                assert "CANARY" not in text
        assert SECRET not in repr(model) and SECRET not in repr(model._http)
        model.close()
    for record in caplog.records:
        assert SECRET not in record.getMessage() and SECRET not in repr(record.args)
    assert caplog.records  # the retries were logged (metadata only)


def test_redact_patterns() -> None:
    text = redact(
        "key=AIzaSyA-1234567890abcdefghijklmnop&x=1 Bearer abc.def sk-proj-ABCDEFGHIJKLMN x-goog-api-key: zzz",
        ("zzz",),
    )
    assert (
        "AIzaSy" not in text
        and "abc.def" not in text
        and "ABCDEFGH" not in text
        and "zzz" not in text
    )
    assert "x=1" in text


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"retry-after-ms": "250"}, 0.25),
        ({"retry-after": "2"}, 2.0),
        ({"retry-after": "1.5"}, 1.5),
        ({"retry-after": "Thu, 01 Jan 1970 00:00:20 GMT"}, 10.0),
        ({"retry-after": "0"}, None),
        ({"retry-after": "-3"}, None),
        ({"retry-after": "nan"}, None),
        ({"retry-after": "inf"}, None),
        ({"retry-after": "soon"}, None),
        ({"retry-after": "Fri, 29 Sep 100000 16:26:57 GMT"}, None),
        ({}, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str], expected: float | None) -> None:
    assert parse_retry_after(headers, now=10.0) == expected


# lifecycle ----------------------------------------------------------------------------------
def test_clients_are_reused_and_closed(server: ProviderServer) -> None:
    model = OpenAIChatModel("m", api_key="k", base_url=f"{server.url}/v1")
    server.enqueue(OK, OK)
    with model:
        model.chat(REQUEST)
        client = model._http.client
        model.chat(REQUEST)
        assert model._http.client is client
    assert model._http._client is None


def test_async_client_follows_the_event_loop(server: ProviderServer) -> None:
    model = OpenAIChatModel("m", api_key="k", base_url=f"{server.url}/v1")
    server.enqueue(OK, OK, OK, OK)

    async def twice() -> Any:
        await model.achat(REQUEST)
        first = model._http.aclient
        await model.achat(REQUEST)
        assert model._http.aclient is first
        return first

    first = asyncio.run(twice())
    second = asyncio.run(twice())  # a new loop: a new client, no "event loop is closed"
    assert first is not second
    asyncio.run(model.aclose())


async def test_async_context_manager(server: ProviderServer) -> None:
    server.enqueue(OK)
    async with AnthropicChatModel("c", api_key="k", base_url=server.url) as model:
        server.reset()
        server.enqueue(
            {
                "json": {
                    "id": "m",
                    "type": "message",
                    "role": "assistant",
                    "model": "c",
                    "content": [{"type": "text", "text": "yo"}],
                    "stop_reason": "end_turn",
                    "usage": {"input_tokens": 1, "output_tokens": 1},
                }
            }
        )
        assert (await model.achat(REQUEST)).ai_message.text == "yo"
    assert model._http._aclient is None
