"""Provider answers too large to hold (issue #14, item 12): a gzip bomb as a 200 JSON answer,
a declared length over the limit, one endless stream event, a huge error body. Each is a
typed `ProviderError` (183004 for a success answer) after reading at most the limit, and is
not retried. Real loopback server (tests/servers/fault_provider_server.py)."""

from __future__ import annotations

import asyncio
import json
import zlib
from typing import Any

import pytest

from servers.fault_provider_server import Fault, FaultServer, chunks, head, respond, sse_head
from toolweave.chat import ChatRequest, UserMessage
from toolweave.errors import ErrorCode, ProviderError
from toolweave.providers import DEFAULT_MAX_RESPONSE_BYTES

from .conftest import completion, make_model, text_delta
from .invariants import fast_retries

REQUEST = ChatRequest([UserMessage("hi")])
LIMIT = 1024 * 1024


def _gzip_bomb(size: int) -> bytes:
    """A gzip body that inflates to `size` bytes of JSON-looking spaces."""
    squeeze = zlib.compressobj(9, zlib.DEFLATED, 31)
    block = b" " * (1024 * 1024)
    out = [squeeze.compress(b'{"choices": [')]
    for _ in range(size // len(block)):
        out.append(squeeze.compress(block))
    out.append(squeeze.compress(b"]}"))
    out.append(squeeze.flush())
    return b"".join(out)


async def _call(model: Any, face: str) -> Any:
    if face == "async":
        return await model.achat(REQUEST)

    def run() -> Any:
        return model.chat(REQUEST)

    return await asyncio.to_thread(run)


async def _stream(model: Any, face: str) -> list[Any]:
    if face == "async":
        return [e async for e in model.astream(REQUEST)]

    def run() -> list[Any]:
        return list(model.stream(REQUEST))

    return await asyncio.to_thread(run)


BOMB = _gzip_bomb(256 * 1024 * 1024)


@pytest.mark.parametrize("limit", [LIMIT, None], ids=["1MiB", "default"])
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_a_gzip_bomb_answer_stops_at_the_limit(
    fault_server: FaultServer, face: str, limit: int | None
) -> None:
    assert len(BOMB) < LIMIT  # small on the wire, 256 MiB inflated
    fault_server.enqueue(respond(200, BOMB, headers={"content-encoding": "gzip"}, repeat=True))
    options = {} if limit is None else {"max_response_bytes": limit}
    async with make_model(fault_server, **options) as model:
        fast_retries(model)
        with pytest.raises(ProviderError) as info:
            await _call(model, face)
    assert info.value.code == ErrorCode.PROVIDER_RESPONSE_INVALID
    assert f"max_response_bytes ({limit or DEFAULT_MAX_RESPONSE_BYTES} bytes)" in info.value.message
    assert fault_server.attempts == 1


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_a_declared_length_over_the_limit_is_refused(
    fault_server: FaultServer, face: str
) -> None:
    body = json.dumps(completion("x" * (2 * LIMIT)))
    fault_server.enqueue(respond(200, body, repeat=True))
    async with make_model(fault_server, max_response_bytes=LIMIT) as model:
        fast_retries(model)
        with pytest.raises(ProviderError) as info:
            await _call(model, face)
        assert info.value.code == ErrorCode.PROVIDER_RESPONSE_INVALID
        # the same answer is accepted without a limit
        fault_server.reset()
        fault_server.enqueue(respond(200, body))
        model._http.max_response_bytes = None
        response = await _call(model, face)
    assert response.ai_message.text == "x" * (2 * LIMIT)


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_one_endless_stream_event_stops_at_the_limit(
    fault_server: FaultServer, face: str
) -> None:
    piece = b"x" * (256 * 1024)
    fault_server.enqueue(
        Fault(
            [
                sse_head(),
                *chunks(text_delta("ok")),
                ("chunk", b"data: "),
                *[("chunk", piece)] * 8,
                ("end",),
            ]
        )
    )
    seen: list[Any] = []
    async with make_model(fault_server, max_response_bytes=LIMIT) as model:
        with pytest.raises(ProviderError) as info:
            if face == "async":
                async for event in model.astream(REQUEST):
                    seen.append(event)
            else:

                def run() -> None:
                    for event in model.stream(REQUEST):
                        seen.append(event)

                await asyncio.to_thread(run)
    assert info.value.code == ErrorCode.PROVIDER_RESPONSE_INVALID
    assert "a stream event is larger than max_response_bytes" in info.value.message
    assert [getattr(e, "text", None) for e in seen] == ["ok"]


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_a_huge_error_body_is_read_only_in_part(fault_server: FaultServer, face: str) -> None:
    body = '{"error": {"message": "overloaded"}}' + " " * (8 * LIMIT)
    fault_server.enqueue(respond(500, body, repeat=True))
    async with make_model(fault_server, max_response_bytes=LIMIT, max_retries=0) as model:
        with pytest.raises(ProviderError) as info:
            await _call(model, face)
        fault_server.reset()
        fault_server.enqueue(
            Fault(
                [
                    (
                        "write",
                        head(
                            500,
                            {"content-type": "application/json", "transfer-encoding": "chunked"},
                        ),
                    ),
                    ("chunk", body.encode()),
                    ("end",),
                ]
            )
        )
        with pytest.raises(ProviderError) as streamed:
            await _stream(model, face)
    for error in (info.value, streamed.value):
        assert error.status == 500 and error.code == ErrorCode.PROVIDER_ERROR
        assert error.body is not None and len(error.body) <= 2000
