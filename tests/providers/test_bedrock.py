"""BedrockChatModel against the scripted loopback server.

Every request's SigV4 signature is recomputed in the test with botocore's own signer from
the fixed test credentials; request bodies are validated against botocore's service model
for `bedrock-runtime` (Converse / ConverseStream), and the event-stream frames the server
sends are decoded with botocore's own event-stream parser first."""

from __future__ import annotations

import asyncio
import functools
import json
import threading
import zlib
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import BaseModel

from servers.provider_server import ProviderServer, RecordedRequest
from toolweave.chat import (
    ChatRequest,
    ChatRequestParameters,
    CompleteToolCall,
    FinishReason,
    PartialToolCall,
    ReasoningDelta,
    ResponseCompleted,
    SystemMessage,
    TextDelta,
    ToolChoice,
    UserMessage,
)
from toolweave.errors import ProviderError, RateLimitError
from toolweave.execution import FileContent, ImageContent
from toolweave.providers import BedrockChatModel
from toolweave.service import ChatCompleted, ToolService

from .conftest import calls_of, no_sleep
from .test_openai import WEATHER

AKID = "AKIDEXAMPLE"
SECRET_KEY = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
REGION = "us-east-1"
MODEL = "anthropic.claude-3-5-sonnet-20241022-v2:0"
Q = "杭州今天天气怎么样？"
PARAMS = ChatRequestParameters(tools=[WEATHER], tool_choice=ToolChoice.AUTO)


@pytest.fixture
def model(server: ProviderServer) -> Iterator[BedrockChatModel]:
    m = BedrockChatModel(
        MODEL,
        region=REGION,
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET_KEY,
        base_url=server.url,
        max_tokens=512,
        timeout=10.0,
    )
    no_sleep(m)
    with m:
        yield m


# botocore references ------------------------------------------------------------------------
@functools.cache
def _service() -> Any:
    from botocore.session import get_session

    return get_session().get_service_model("bedrock-runtime")


def check_body(body: dict[str, Any], stream: bool) -> None:
    from botocore.validate import ParamValidator

    operation = _service().operation_model("ConverseStream" if stream else "Converse")
    report = ParamValidator().validate({**body, "modelId": MODEL}, operation.input_shape)
    assert not report.has_errors(), report.generate_report()


def check_signature(request: RecordedRequest, secret: str = SECRET_KEY) -> None:
    """Recompute the request's SigV4 signature with botocore from the fixed credentials."""
    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    auth = request.headers["authorization"]
    assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={AKID}/")
    fields = dict(part.strip().split("=", 1) for part in auth.split(" ", 1)[1].split(","))
    assert fields["Credential"].endswith(f"/{REGION}/bedrock/aws4_request")
    signed = fields["SignedHeaders"].split(";")
    assert {"host", "x-amz-date", "content-type"} <= set(signed)
    aws = AWSRequest(
        method=request.method,
        url=f"http://{request.headers['host']}{request.raw_path}",
        data=request.raw,
        headers={name: request.headers[name] for name in signed},
    )
    aws.context["timestamp"] = request.headers["x-amz-date"]
    signer = SigV4Auth(Credentials(AKID, secret), "bedrock", REGION)
    expected = signer.signature(signer.string_to_sign(aws, signer.canonical_request(aws)), aws)
    assert fields["Signature"] == expected, "the SigV4 signature does not verify"


# event-stream frames ------------------------------------------------------------------------
def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One AWS event-stream frame (string headers, both CRCs)."""
    head = b"".join(
        len(k).to_bytes(1, "big") + k.encode() + b"\x07" + len(v).to_bytes(2, "big") + v.encode()
        for k, v in headers.items()
    )
    total = 12 + len(head) + len(payload) + 4
    prelude = total.to_bytes(4, "big") + len(head).to_bytes(4, "big")
    message = prelude + zlib.crc32(prelude).to_bytes(4, "big") + head + payload
    return message + zlib.crc32(message).to_bytes(4, "big")


def event(kind: str, payload: dict[str, Any]) -> bytes:
    data = frame(
        {":event-type": kind, ":content-type": "application/json", ":message-type": "event"},
        json.dumps(payload, ensure_ascii=False).encode(),
    )
    _check_frame(data, kind)
    return data


def exception(kind: str, message: str) -> bytes:
    return frame(
        {
            ":exception-type": kind,
            ":content-type": "application/json",
            ":message-type": "exception",
        },
        json.dumps({"message": message}).encode(),
    )


def _check_frame(data: bytes, kind: str) -> None:
    """botocore decodes the frame as an event of ConverseStream's output."""
    from botocore.eventstream import EventStreamBuffer
    from botocore.parsers import EventStreamJSONParser

    buffer = EventStreamBuffer()
    buffer.add_data(data)
    (message,) = list(buffer)
    shape = _service().operation_model("ConverseStream").output_shape.members["stream"]
    parsed = EventStreamJSONParser().parse(message.to_response_dict(), shape)
    assert kind in parsed, parsed


def tool_stream(call_id: str, name: str, args: str, text: str = "") -> list[bytes]:
    frames = [event("messageStart", {"role": "assistant"})]
    block = 0
    if text:
        frames.append(event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text}}))
        frames.append(event("contentBlockStop", {"contentBlockIndex": 0}))
        block = 1
    frames.append(
        event(
            "contentBlockStart",
            {
                "contentBlockIndex": block,
                "start": {"toolUse": {"toolUseId": call_id, "name": name}},
            },
        )
    )
    for start in range(0, len(args), 4):
        frames.append(
            event(
                "contentBlockDelta",
                {
                    "contentBlockIndex": block,
                    "delta": {"toolUse": {"input": args[start : start + 4]}},
                },
            )
        )
    frames.append(event("contentBlockStop", {"contentBlockIndex": block}))
    frames.append(event("messageStop", {"stopReason": "tool_use"}))
    frames.append(
        event(
            "metadata",
            {
                "usage": {"inputTokens": 50, "outputTokens": 20, "totalTokens": 70},
                "metrics": {"latencyMs": 300},
            },
        )
    )
    return frames


def text_stream(text: str) -> list[bytes]:
    return [
        event("messageStart", {"role": "assistant"}),
        *(
            event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": text[i : i + 5]}})
            for i in range(0, len(text), 5)
        ),
        event("contentBlockStop", {"contentBlockIndex": 0}),
        event("messageStop", {"stopReason": "end_turn"}),
        event(
            "metadata",
            {
                "usage": {"inputTokens": 80, "outputTokens": 9, "totalTokens": 89},
                "metrics": {"latencyMs": 1},
            },
        ),
    ]


def converse(
    content: list[dict[str, Any]], stop: str, usage: tuple[int, int] = (50, 20)
) -> dict[str, Any]:
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": stop,
        "usage": {"inputTokens": usage[0], "outputTokens": usage[1], "totalTokens": sum(usage)},
        "metrics": {"latencyMs": 412},
    }


# the seed's weather exchange -------------------------------------------------------------
def test_weather_exchange_signed_and_mapped(
    server: ProviderServer, model: BedrockChatModel
) -> None:
    server.enqueue(
        {
            "json": converse(
                [
                    {"text": "Let me check."},
                    {
                        "toolUse": {
                            "toolUseId": "tooluse_1",
                            "name": "get_weather",
                            "input": {"city": "杭州"},
                        }
                    },
                ],
                "tool_use",
            )
        },
        {"json": converse([{"text": "杭州今天 22℃，天气晴。"}], "end_turn")},
    )
    first = model.chat(ChatRequest([SystemMessage("Be brief."), UserMessage(Q)], PARAMS))
    assert calls_of(first) == [["tooluse_1", "get_weather", '{"city": "杭州"}']]
    assert first.finish_reason is FinishReason.TOOL_EXECUTION
    assert first.usage is not None and first.usage.total_tokens == 70
    from toolweave.chat import ToolExecutionResultMessage

    final = model.chat(
        ChatRequest(
            [
                SystemMessage("Be brief."),
                UserMessage(Q),
                first.ai_message,
                ToolExecutionResultMessage(id="tooluse_1", tool_name="get_weather", text="22℃，晴"),
            ],
            PARAMS,
        )
    )
    assert final.ai_message.text == "杭州今天 22℃，天气晴。"
    assert final.finish_reason is FinishReason.STOP
    one, two = server.bodies
    assert one == {
        "messages": [{"role": "user", "content": [{"text": Q}]}],
        "system": [{"text": "Be brief."}],
        "inferenceConfig": {"maxTokens": 512},
        "toolConfig": {
            "tools": [
                {
                    "toolSpec": {
                        "name": "get_weather",
                        "description": WEATHER.description,
                        "inputSchema": {"json": WEATHER.input_params},
                    }
                }
            ],
            "toolChoice": {"auto": {}},
        },
    }
    assert two["messages"][1:] == [
        {
            "role": "assistant",
            "content": [
                {"text": "Let me check."},
                {
                    "toolUse": {
                        "toolUseId": "tooluse_1",
                        "name": "get_weather",
                        "input": {"city": "杭州"},
                    }
                },
            ],
        },
        {
            "role": "user",
            "content": [
                {"toolResult": {"toolUseId": "tooluse_1", "content": [{"text": "22℃，晴"}]}}
            ],
        },
    ]
    for request in server.requests:
        assert request.raw_path == "/model/anthropic.claude-3-5-sonnet-20241022-v2%3A0/converse"
        check_signature(request)
    for body in server.bodies:
        check_body(body, stream=False)


def test_a_tampered_request_fails_the_signature_check(
    server: ProviderServer, model: BedrockChatModel
) -> None:
    server.enqueue({"json": converse([{"text": "hi"}], "end_turn")})
    model.chat(ChatRequest([UserMessage("hello")]))
    request = server.requests[0]
    check_signature(request)
    tampered = RecordedRequest(
        method=request.method,
        path=request.path,
        query=request.query,
        headers=request.headers,
        raw=request.raw.replace(b"hello", b"HELLO"),
        raw_path=request.raw_path,
    )
    with pytest.raises(AssertionError, match="does not verify"):
        check_signature(tampered)
    with pytest.raises(AssertionError, match="does not verify"):
        check_signature(request, secret="another-secret")


@pytest.mark.parametrize("face", ["sync", "async"])
def test_streamed_exchange(server: ProviderServer, model: BedrockChatModel, face: str) -> None:
    server.enqueue(
        {"frames": tool_stream("tooluse_9", "get_weather", '{"city":"杭州"}', text="Checking.")}
    )

    def run(request: ChatRequest) -> list[Any]:
        if face == "sync":
            return list(model.stream(request))

        async def collect() -> list[Any]:
            return [e async for e in model.astream(request)]

        return asyncio.run(collect())

    events = run(ChatRequest([UserMessage(Q)], PARAMS))
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Checking."
    partials = [e for e in events if isinstance(e, PartialToolCall)]
    assert (partials[0].id, partials[0].name) == ("tooluse_9", "get_weather")
    assert "".join(p.arguments_delta for p in partials) == '{"city":"杭州"}'
    completes = [e for e in events if isinstance(e, CompleteToolCall)]
    assert [(c.index, c.request.arguments) for c in completes] == [(0, '{"city":"杭州"}')]
    done = events[-1]
    assert isinstance(done, ResponseCompleted)
    assert done.response.finish_reason is FinishReason.TOOL_EXECUTION
    assert done.response.usage is not None and done.response.usage.total_tokens == 70
    request = server.requests[0]
    assert request.raw_path.endswith("/converse-stream")
    check_signature(request)
    check_body(server.bodies[0], stream=True)


# the loop: parallel calls, an error result, media results -----------------------------------
def get_weather(city: str) -> str:
    """Current weather in a city."""
    if city == "Atlantis":
        raise ValueError("no such city")
    return f"{city}: sunny"


@pytest.mark.parametrize("mode", ["sync", "stream"])
def test_parallel_calls_and_an_error_result_through_the_loop(
    server: ProviderServer, model: BedrockChatModel, mode: str
) -> None:
    calls = [
        {"toolUse": {"toolUseId": "t1", "name": "get_weather", "input": {"city": "Paris"}}},
        {"toolUse": {"toolUseId": "t2", "name": "get_weather", "input": {"city": "Atlantis"}}},
    ]
    answer = "Paris is sunny; Atlantis does not exist."
    if mode == "sync":
        server.enqueue(
            {"json": converse(calls, "tool_use")},
            {"json": converse([{"text": answer}], "end_turn")},
        )
        result = ToolService().tools(get_weather).chat(model, None, "Paris and Atlantis?")
    else:
        frames = [event("messageStart", {"role": "assistant"})]
        for block, call in enumerate(calls):
            use = call["toolUse"]
            frames += [
                event(
                    "contentBlockStart",
                    {
                        "contentBlockIndex": block,
                        "start": {"toolUse": {"toolUseId": use["toolUseId"], "name": use["name"]}},
                    },
                ),
                event(
                    "contentBlockDelta",
                    {
                        "contentBlockIndex": block,
                        "delta": {"toolUse": {"input": json.dumps(use["input"])}},
                    },
                ),
                event("contentBlockStop", {"contentBlockIndex": block}),
            ]
        frames.append(event("messageStop", {"stopReason": "tool_use"}))
        server.enqueue({"frames": frames}, {"frames": text_stream(answer)})
        last = list(
            ToolService().tools(get_weather).chat_stream(model, None, "Paris and Atlantis?")
        )[-1]
        assert isinstance(last, ChatCompleted)
        result = last.result
    assert result.text == answer
    assert [(e.request.id, e.result.is_error) for e in result.tool_executions] == [
        ("t1", False),
        ("t2", True),
    ]
    results = server.bodies[1]["messages"][-1]
    assert results["role"] == "user"
    (ok,), (bad,) = [b["toolResult"]["content"] for b in results["content"]]
    assert ok == {"text": "Paris: sunny"}
    assert "no such city" in bad["text"]
    assert results["content"][1]["toolResult"]["status"] == "error"
    for request, body in zip(server.requests, server.bodies, strict=True):
        check_signature(request)
        check_body(body, stream=mode == "stream")


def test_media_in_user_turns_and_tool_results(model: BedrockChatModel) -> None:
    from toolweave.chat import AiMessage, ToolExecutionResultMessage
    from toolweave.execution import ToolExecutionRequest

    call = ToolExecutionRequest(id="t1", name="get_weather", arguments="{}")
    body = model.build_request_body(
        ChatRequest(
            [
                UserMessage("see", contents=(ImageContent(data="aGk=", mime_type="image/jpeg"),)),
                AiMessage(tool_execution_requests=[call]),
                ToolExecutionResultMessage(
                    id="t1",
                    tool_name="get_weather",
                    text="map and report",
                    contents=(
                        ImageContent(url="https://example.com/map.png"),
                        FileContent(
                            data="JVBERi0=", mime_type="application/pdf", name="report.v2.pdf"
                        ),
                        FileContent(data="AAEC", mime_type="application/zip", name="x.zip"),
                    ),
                ),
            ],
            PARAMS,
        )
    )
    assert body["messages"][0]["content"][1] == {
        "image": {"format": "jpeg", "source": {"bytes": "aGk="}}
    }
    content = body["messages"][2]["content"][0]["toolResult"]["content"]
    assert content[0] == {"text": "map and report"}
    assert content[1]["text"].startswith("[image (image/png) at https://example.com/map.png")
    assert content[2] == {
        "document": {"format": "pdf", "name": "report-v2", "source": {"bytes": "JVBERi0="}}
    }
    assert "'x.zip' (application/zip, 3 bytes)" in content[3]["text"]
    check_body(body, stream=False)


class Forecast(BaseModel):
    city: str
    degrees: int


def test_structured_output_through_the_answer_tool(
    server: ProviderServer, model: BedrockChatModel
) -> None:
    server.enqueue(
        {
            "json": converse(
                [
                    {
                        "toolUse": {
                            "toolUseId": "a1",
                            "name": "final_answer",
                            "input": {"city": "Paris", "degrees": 22},
                        }
                    }
                ],
                "tool_use",
            )
        }
    )
    result = ToolService().chat(model, None, "Forecast for Paris", output_type=Forecast)
    assert result.output == Forecast(city="Paris", degrees=22)
    body = server.bodies[0]
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "final_answer"}}
    assert body["toolConfig"]["tools"][0]["toolSpec"]["name"] == "final_answer"
    check_body(body, stream=False)


def test_reasoning_round_trip(server: ProviderServer, model: BedrockChatModel) -> None:
    reasoning = {"reasoningContent": {"reasoningText": {"text": "Think.", "signature": "sig=="}}}
    server.enqueue(
        {
            "frames": [
                event("messageStart", {"role": "assistant"}),
                event(
                    "contentBlockDelta",
                    {"contentBlockIndex": 0, "delta": {"reasoningContent": {"text": "Think."}}},
                ),
                event(
                    "contentBlockDelta",
                    {"contentBlockIndex": 0, "delta": {"reasoningContent": {"signature": "sig=="}}},
                ),
                event("contentBlockStop", {"contentBlockIndex": 0}),
                *tool_stream("t1", "get_weather", '{"city":"Oslo"}')[1:],
            ]
        },
        {"frames": text_stream("Oslo: sunny")},
    )
    result = ToolService().tools(get_weather).chat_stream(model, PARAMS, "Oslo?")
    events = list(result)
    assert "".join(e.text for e in events if isinstance(e, ReasoningDelta)) == "Think."
    second = server.bodies[1]["messages"][1]
    assert second["role"] == "assistant"
    assert second["content"][0] == reasoning  # sent back verbatim, signature included
    check_body(server.bodies[1], stream=True)


# event-stream framing and exceptions -------------------------------------------------------
def test_fragmented_frames_decode_the_same(server: ProviderServer, model: BedrockChatModel) -> None:
    whole = b"".join(tool_stream("t1", "get_weather", '{"city":"Oslo"}'))
    pieces = [whole[i : i + 7] for i in range(0, len(whole), 7)]
    server.enqueue({"frames": pieces})
    last = list(model.stream(ChatRequest([UserMessage(Q)], PARAMS)))[-1]
    assert isinstance(last, ResponseCompleted)
    assert calls_of(last.response) == [["t1", "get_weather", '{"city":"Oslo"}']]


def test_a_crc_mismatch_is_a_protocol_error(
    server: ProviderServer, model: BedrockChatModel
) -> None:
    frames = tool_stream("t1", "get_weather", '{"city":"Oslo"}')
    broken = bytearray(frames[2])
    broken[-6] ^= 0xFF  # a payload byte: the message CRC no longer matches
    frames[2] = bytes(broken)
    server.enqueue({"frames": frames})
    with pytest.raises(ProviderError) as info:
        list(model.stream(ChatRequest([UserMessage(Q)], PARAMS)))
    assert info.value.code == 183004 and "corrupt" in str(info.value)


def test_a_stream_cut_inside_a_frame(server: ProviderServer, model: BedrockChatModel) -> None:
    frames = tool_stream("t1", "get_weather", '{"city":"Oslo"}')
    server.enqueue({"frames": [*frames[:3], frames[3][:10]]})
    with pytest.raises(ProviderError, match="inside a frame"):
        list(model.stream(ChatRequest([UserMessage(Q)], PARAMS)))


def test_throttling_before_output_is_retried(
    server: ProviderServer, model: BedrockChatModel
) -> None:
    server.enqueue(
        {"frames": [exception("throttlingException", "Too many requests")]},
        {"frames": text_stream("Hello there")},
    )
    last = list(model.stream(ChatRequest([UserMessage("hi")])))[-1]
    assert isinstance(last, ResponseCompleted)
    assert last.response.ai_message.text == "Hello there"
    assert len(server.requests) == 2
    for request in server.requests:
        check_signature(request)  # re-signed for the retry


def test_throttling_after_output_is_not_retried(
    server: ProviderServer, model: BedrockChatModel
) -> None:
    frames = text_stream("Hello there")
    server.enqueue({"frames": [*frames[:2], exception("throttlingException", "Too many requests")]})
    events: list[Any] = []
    with pytest.raises(RateLimitError, match="throttlingException: Too many requests"):
        for e in model.stream(ChatRequest([UserMessage("hi")])):
            events.append(e)
    assert [e.text for e in events] == ["Hello"]
    assert len(server.requests) == 1


def test_http_throttling_is_retried_then_typed(
    server: ProviderServer, model: BedrockChatModel
) -> None:
    throttled = {
        "status": 429,
        "headers": {"x-amzn-ErrorType": "ThrottlingException"},
        "json": {"message": "Too many requests, please wait before trying again."},
    }
    server.enqueue(throttled, throttled, throttled)
    with pytest.raises(RateLimitError, match="Too many requests"):
        model.chat(ChatRequest([UserMessage("hi")]))
    assert len(server.requests) == 3  # the first try and two retries
    for request in server.requests:
        check_signature(request)


def test_credentials_never_leak_and_missing_ones_are_reported(
    server: ProviderServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = BedrockChatModel(
        MODEL,
        region=REGION,
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET_KEY,
        base_url=server.url,
        max_retries=0,
    )
    server.enqueue({"status": 403, "json": {"message": f"signature for {SECRET_KEY} is wrong"}})
    with pytest.raises(ProviderError) as info:
        model.chat(ChatRequest([UserMessage("hi")]))
    assert SECRET_KEY not in str(info.value) and SECRET_KEY not in repr(info.value.body)
    assert SECRET_KEY not in repr(model)
    model.close()
    from toolweave.errors import MissingApiKeyError

    for var in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    bare = BedrockChatModel(MODEL, region=REGION, base_url=server.url)
    with pytest.raises(MissingApiKeyError, match="AWS_ACCESS_KEY_ID"):
        bare.chat(ChatRequest([UserMessage("hi")]))
    assert len(server.requests) == 1  # nothing more was sent


def test_bedrock_api_key_is_a_bearer_token(server: ProviderServer) -> None:
    model = BedrockChatModel(MODEL, region=REGION, api_key="ABSK-test-key", base_url=server.url)
    server.enqueue({"json": converse([{"text": "hi"}], "end_turn")})
    model.chat(ChatRequest([UserMessage("hello")]))
    assert server.requests[0].headers["authorization"] == "Bearer ABSK-test-key"
    assert "x-amz-date" not in server.requests[0].headers
    model.close()


def test_a_frame_over_max_response_bytes_is_refused_at_its_prelude(server: ProviderServer) -> None:
    """An event-stream frame is held to max_response_bytes like an SSE event: refused from
    its 12-byte prelude, before its body is buffered."""
    model = BedrockChatModel(
        MODEL,
        region=REGION,
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET_KEY,
        base_url=server.url,
        max_response_bytes=64 * 1024,
        max_retries=0,
    )
    big = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "x" * 100_000}})
    head = text_stream("Hi")[:1]
    server.enqueue({"frames": [*head, big[:12]]})  # the prelude alone is enough
    with pytest.raises(ProviderError) as info:
        list(model.stream(ChatRequest([UserMessage("hi")])))
    assert info.value.code == 183004 and "max_response_bytes" in str(info.value)
    model.close()


def test_a_large_frame_in_small_reads_decodes_in_linear_time() -> None:
    """A 16 MiB frame arriving in 1 KiB reads is buffered once, not copied per read
    (botocore's own buffer re-copies all it holds on every append: 66 s here, now under a
    second). A hang guard, generous."""
    import time

    from toolweave.providers._eventstream import AwsEventStreamDecoder

    big = event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "y" * 2**24}})
    start = time.monotonic()
    decoder = AwsEventStreamDecoder(ValueError)
    events = [e for i in range(0, len(big), 1024) for e in decoder.feed(big[i : i + 1024])]
    assert len(events) == 1 and len(events[0].data) > 2**24 and decoder.flush() == []
    assert time.monotonic() - start < 30


def test_an_exception_frame_nested_too_deeply_keeps_its_type() -> None:
    from toolweave.providers._base import feed_batch
    from toolweave.providers._http import HttpTransport
    from toolweave.providers._sse import SSEEvent
    from toolweave.providers.bedrock import BedrockStreamParser

    transport = HttpTransport(provider="aws.bedrock", headers={}, secrets=())
    deep = SSEEvent(data="[" * 100_000 + "]" * 100_000, event="exception:throttlingException")
    with pytest.raises(RateLimitError, match="throttlingException"):
        feed_batch(BedrockStreamParser(transport), [deep], transport.protocol_error)


def test_credentials_from_the_chain_are_masked_too(
    server: ProviderServer, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    session_token = "IQoJb3JpZ2luX2VjEXAMPLE-session-token-from-the-environment"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", AKID)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", SECRET_KEY)
    monkeypatch.setenv("AWS_SESSION_TOKEN", session_token)
    monkeypatch.delenv("AWS_BEARER_TOKEN_BEDROCK", raising=False)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    model = BedrockChatModel(MODEL, region=REGION, base_url=server.url, max_retries=0)
    echo = {"status": 403, "json": {"message": f"bad {SECRET_KEY} / {session_token}"}}
    server.enqueue(echo)
    with caplog.at_level("DEBUG"), pytest.raises(ProviderError) as info:
        model.chat(ChatRequest([UserMessage("hi")]))
    assert "x-amz-security-token" in caplog.text  # botocore's signer logged its request
    for secret in (SECRET_KEY, session_token):
        assert secret not in str(info.value) and secret not in str(info.value.body)
        assert secret not in caplog.text
    model.close()


@pytest.mark.parametrize(
    "body",
    [
        [],
        {"output": "x"},
        {"output": {"message": {"content": "abc"}}},
        {"output": {"message": {"content": [{"toolUse": {"name": "f"}}]}}},
        {"output": {"message": {"content": [{"text": "hi"}]}}, "usage": {"inputTokens": "x"}},
    ],
)
def test_wrong_shaped_200_json_is_response_invalid(
    server: ProviderServer, model: BedrockChatModel, body: Any
) -> None:
    server.enqueue({"json": body}, {"json": body})
    with pytest.raises(ProviderError) as sync_error:
        model.chat(ChatRequest([UserMessage("hi")]))
    with pytest.raises(ProviderError) as async_error:
        asyncio.run(model.achat(ChatRequest([UserMessage("hi")])))
    for error in (sync_error.value, async_error.value):
        assert error.code == 183004, error


def test_deep_nesting_and_lone_surrogates(server: ProviderServer, model: BedrockChatModel) -> None:
    deep = "[" * 100_000 + "]" * 100_000
    server.enqueue({"body": deep, "headers": {"content-type": "application/json"}})
    with pytest.raises(ProviderError, match="nested too deeply"):
        model.chat(ChatRequest([UserMessage("hi")]))
    frames = [
        event("messageStart", {"role": "assistant"}),
        frame(
            {":event-type": "contentBlockDelta", ":message-type": "event"},
            b'{"contentBlockIndex":0,"delta":{"text":"a\\ud800b"}}',
        ),
        frame({":event-type": "metadata", ":message-type": "event"}, deep.encode()),
    ]
    server.enqueue({"frames": frames})
    with pytest.raises(ProviderError, match=r"unexpected shape|nested too deeply"):
        list(model.stream(ChatRequest([UserMessage("hi")])))
    server.enqueue({"frames": [*frames[:2], *text_stream("")[-2:]]})
    last = list(model.stream(ChatRequest([UserMessage("hi")])))[-1]
    assert isinstance(last, ResponseCompleted)
    assert last.response.ai_message.text == "a\ufffdb"
    last.response.ai_message.model_dump_json().encode()  # encodable history


def test_rotating_credentials_do_not_grow_the_masked_secrets(server: ProviderServer) -> None:
    """Temporary credentials are refreshed by botocore; the signer masks the latest ones and
    lets the old ones go, so the secrets every message is scanned for stay few."""
    from datetime import UTC, datetime, timedelta

    from botocore.credentials import RefreshableCredentials

    count = iter(range(10_000))

    def refresh() -> dict[str, str]:
        n = next(count)
        return {
            "access_key": AKID,
            "secret_key": f"rotated-secret-key-{n:06d}",
            "token": f"rotated-session-token-{n:06d}",
            # inside botocore's advisory refresh window: refreshed on every use
            "expiry_time": (datetime.now(UTC) + timedelta(minutes=12)).isoformat(),
        }

    credentials = RefreshableCredentials.create_from_metadata(refresh(), refresh, "test")
    model = BedrockChatModel(MODEL, region=REGION, base_url=server.url)
    assert model._signer is not None
    model._signer._given = credentials
    for _ in range(20):
        server.enqueue({"json": converse([{"text": "hi"}], "end_turn")})
        model.chat(ChatRequest([UserMessage("hi")]))
    assert len(model._http._secrets) <= 10
    last = server.requests[-1].headers["x-amz-security-token"]
    assert last in model._http._secrets
    model.close()


def test_a_structured_answer_is_given_once_even_if_its_block_stops_twice_or_never() -> None:
    from toolweave.providers._answer import Answer
    from toolweave.providers._base import feed_batch, finish_stream
    from toolweave.providers._http import HttpTransport
    from toolweave.providers._sse import SSEEvent
    from toolweave.providers.bedrock import ANSWER_TOOL, BedrockStreamParser

    transport = HttpTransport(provider="aws.bedrock", headers={}, secrets=())

    def run(stops: int) -> tuple[list[str], str | None]:
        parser = BedrockStreamParser(transport, Answer(ANSWER_TOOL, False))
        start = {"toolUse": {"toolUseId": "a", "name": ANSWER_TOOL}}
        late = ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "x"}}})
        events = [
            ("contentBlockStart", {"contentBlockIndex": 0, "start": start}),
            (
                "contentBlockDelta",
                {"contentBlockIndex": 0, "delta": {"toolUse": {"input": '{"n":'}}},
            ),
            ("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"toolUse": {"input": "1}"}}}),
            *[("contentBlockStop", {"contentBlockIndex": 0})] * stops,
            *[late] * min(stops, 1),  # after the stop: the given answer never changes
            ("messageStop", {"stopReason": "tool_use"}),
        ]
        out = feed_batch(
            parser, [SSEEvent(json.dumps(p), event=k) for k, p in events], transport.protocol_error
        )
        out += finish_stream(parser, transport.protocol_error)
        final = out[-1]
        assert isinstance(final, ResponseCompleted)
        return [e.text for e in out if isinstance(e, TextDelta)], final.response.ai_message.text

    for stops in (0, 1, 2):
        assert run(stops) == (['{"n":1}'], '{"n":1}'), stops


def test_temporary_credentials_are_refreshed_off_the_event_loop(server: ProviderServer) -> None:
    """botocore refreshes temporary credentials (STS, SSO, an instance role: network I/O)
    when they are due; an async request does that in a worker thread, never on the loop,
    and signs with what it got."""
    from datetime import UTC, datetime, timedelta

    from botocore.credentials import RefreshableCredentials

    threads: list[int] = []
    count = iter(range(10_000))

    def refresh() -> dict[str, str]:
        threads.append(threading.get_ident())
        n = next(count)
        return {
            "access_key": AKID,
            "secret_key": f"refreshed-secret-key-{n:06d}",
            "token": f"refreshed-session-token-{n:06d}",
            # inside botocore's advisory refresh window: refreshed on every use
            "expiry_time": (datetime.now(UTC) + timedelta(minutes=12)).isoformat(),
        }

    credentials = RefreshableCredentials.create_from_metadata(refresh(), refresh, "test")
    model = BedrockChatModel(MODEL, region=REGION, base_url=server.url)
    assert model._signer is not None
    model._signer._given = credentials

    async def run() -> int:
        loop_thread = threading.get_ident()
        threads.clear()
        server.enqueue({"json": converse([{"text": "hi"}], "end_turn")})
        await model.achat(ChatRequest([UserMessage("hi")]))
        server.enqueue({"frames": text_stream("hi")})
        [e async for e in model.astream(ChatRequest([UserMessage("hi")]))]
        return loop_thread

    async def sync_inside_a_loop() -> None:  # a notebook: sync calls on a loop's thread
        server.enqueue({"json": converse([{"text": "hi"}], "end_turn")})
        model.chat(ChatRequest([UserMessage("hi")]))

    loop_thread = asyncio.run(run())
    assert threads and loop_thread not in threads
    for request in server.requests[-2:]:  # signed with credentials from the refresh
        assert request.headers["x-amz-security-token"].startswith("refreshed-session-token-")
    asyncio.run(sync_inside_a_loop())
    tokens = [r.headers["x-amz-security-token"] for r in server.requests[-2:]]
    assert tokens[1] != tokens[0]  # refreshed for this request, not the async one's
    check_signature = server.requests[-1].headers["authorization"]
    assert check_signature.startswith("AWS4-HMAC-SHA256 Credential=" + AKID)
    model.close()
