"""Provider faults through a real loopback server (tests/servers/fault_provider_server.py):
status errors, resets, slow-loris, truncated and mistyped bodies, closed connections.

Each case asserts the typed error (class and code), the number of attempts the server saw,
an elapsed bound derived from the configured timeouts (generous: it only proves the call
ends), and that no secret reached the error. Cases run through `ToolService` also check the
history, `partial_result`, executions per tool, leaked tasks/threads, logs and spans.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import httpx2
import pytest

from servers.fault_provider_server import (
    Fault,
    FaultServer,
    chunks,
    head,
    json_error,
    respond,
    sse_head,
)
from toolweave import ToolService, tool
from toolweave.chat import ChatRequest, UserMessage
from toolweave.errors import ErrorCode, ProviderError, RateLimitError, ToolweaveError

from .conftest import CONNECT_TIMEOUT, READ_TIMEOUT, completion, make_model, text_delta
from .conftest import call_delta as call_chunk
from .invariants import (
    SECRET,
    Counter,
    LeakGuard,
    SecretScan,
    Timer,
    assert_history_valid,
    assert_partial_result,
    elapsed_bound,
    fast_retries,
)

REQUEST = ChatRequest([UserMessage("hi")])
PER_ATTEMPT = CONNECT_TIMEOUT + READ_TIMEOUT
OK = respond(200, __import__("json").dumps(completion("fine")))


def _retry_counts(server: FaultServer) -> list[str | None]:
    return [r.headers.get("x-toolweave-retry-count") for r in server.requests]


def _scan(error: BaseException, caplog: pytest.LogCaptureFixture | None = None) -> None:
    scan = SecretScan()
    scan.add_error(error)
    if caplog is not None:
        scan.add_records(caplog.records)
    scan.check()


# status errors ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "cls", "code"),
    [
        (429, RateLimitError, ErrorCode.PROVIDER_RATE_LIMIT),
        (500, ProviderError, ErrorCode.PROVIDER_ERROR),
        (502, ProviderError, ErrorCode.PROVIDER_ERROR),
        (503, ProviderError, ErrorCode.PROVIDER_ERROR),
    ],
)
@pytest.mark.parametrize("max_retries", [0, 2])
async def test_retryable_status_is_retried_then_typed(
    fault_server: FaultServer,
    caplog: pytest.LogCaptureFixture,
    status: int,
    cls: type[ProviderError],
    code: int,
    max_retries: int,
) -> None:
    caplog.set_level(logging.DEBUG)
    fault_server.enqueue(json_error(status, f"echo Authorization: Bearer {SECRET}", repeat=True))
    model = make_model(fault_server, max_retries=max_retries)
    delays = fast_retries(model)
    with Timer() as t, pytest.raises(ProviderError) as info:
        async with model:
            await model.achat(REQUEST)
    assert type(info.value) is cls and info.value.code == code and info.value.status == status
    assert fault_server.attempts == 1 + max_retries
    assert _retry_counts(fault_server) == [None, *(str(n) for n in range(1, max_retries + 1))]
    assert len(delays) == max_retries
    assert t.elapsed < elapsed_bound(attempts=1 + max_retries, per_attempt=PER_ATTEMPT)
    assert "***" in info.value.message  # the echoed key was masked
    _scan(info.value, caplog)


async def test_retry_after_ms_is_honoured_for_real(fault_server: FaultServer) -> None:
    # No patched sleeps: the server asks for 50 ms, twice, then answers.
    fault_server.enqueue(
        json_error(429, headers={"retry-after-ms": "50"}),
        json_error(503, headers={"retry-after-ms": "50"}),
        OK,
    )
    async with make_model(fault_server) as model:
        with Timer() as t:
            response = await model.achat(REQUEST)
    assert response.ai_message.text == "fine"
    assert fault_server.attempts == 3
    assert t.elapsed < elapsed_bound(attempts=3, per_attempt=PER_ATTEMPT, backoff=0.1)


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_non_retryable_status_is_one_attempt(fault_server: FaultServer, status: int) -> None:
    fault_server.enqueue(json_error(status, repeat=True))
    async with make_model(fault_server) as model:
        fast_retries(model)
        with pytest.raises(ProviderError) as info:
            await model.achat(REQUEST)
    assert info.value.status == status and fault_server.attempts == 1


# transport faults before the response -----------------------------------------------------------
@pytest.mark.parametrize(
    "fault",
    [
        pytest.param([("close",)], id="closed-without-answer"),
        pytest.param([("reset",)], id="reset-before-answer"),
        pytest.param([("write", b"HTTP/1.1 200 OK\r\ncontent-le")], id="cut-inside-head"),
        pytest.param([("write", b"NOT HTTP AT ALL\r\n\r\n")], id="garbage-status-line"),
    ],
)
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_connection_faults_are_retried_then_typed(
    fault_server: FaultServer, fault: list[Any], face: str
) -> None:
    from servers.fault_provider_server import Fault

    fault_server.enqueue(Fault(fault, repeat=True))
    model = make_model(fault_server)
    delays = fast_retries(model)
    with Timer() as t, pytest.raises(ProviderError) as info:
        if face == "async":
            async with model:
                await model.achat(REQUEST)
        else:
            with model:
                await asyncio.to_thread(model.chat, REQUEST)
    err = info.value
    assert type(err) is ProviderError and err.code == ErrorCode.PROVIDER_ERROR
    assert err.status is None and "connection error" in err.message
    assert isinstance(err.__cause__, httpx2.TransportError)
    assert fault_server.attempts == 3 and len(delays) == 2
    assert t.elapsed < elapsed_bound(attempts=3, per_attempt=PER_ATTEMPT)
    _scan(err)


async def test_truncated_body_with_longer_content_length_is_retried(
    fault_server: FaultServer,
) -> None:
    body = __import__("json").dumps(completion("fine"))
    fault_server.enqueue(
        respond(200, body[:40], declared_length=len(body)),
        respond(200, body[:40], declared_length=len(body)),
        OK,
    )
    async with make_model(fault_server) as model:
        fast_retries(model)
        response = await model.achat(REQUEST)
    # The body never arrived whole: a transport error, retried like any other.
    assert response.ai_message.text == "fine" and fault_server.attempts == 3


async def test_slow_loris_hits_the_read_timeout_on_every_attempt(
    fault_server: FaultServer,
) -> None:
    from servers.fault_provider_server import Fault

    # Head, then a trickle (gaps under the read timeout), then silence past it.
    trickle: list[Any] = [
        ("write", head(200, {"content-type": "application/json", "content-length": "500"}))
    ]
    for _ in range(3):
        trickle += [("write", b" "), ("sleep", READ_TIMEOUT / 3)]
    trickle += [("sleep", READ_TIMEOUT * 8)]
    fault_server.enqueue(Fault(trickle, repeat=True))
    model = make_model(fault_server)
    fast_retries(model)
    with Timer() as t, pytest.raises(ProviderError) as info:
        async with model:
            await model.achat(REQUEST)
    assert "timed out" in info.value.message and info.value.status is None
    assert isinstance(info.value.__cause__, httpx2.ReadTimeout)
    assert fault_server.attempts == 3
    assert t.elapsed < elapsed_bound(attempts=3, per_attempt=PER_ATTEMPT + READ_TIMEOUT)


async def test_endless_trickle_is_bounded_by_the_callers_deadline(
    fault_server: FaultServer,
) -> None:
    """httpx timeouts are per read: a byte every READ_TIMEOUT/3 never trips them. The
    documented remedy is an outer deadline; it must cancel cleanly."""
    from servers.fault_provider_server import Fault

    trickle: list[Any] = [
        ("write", head(200, {"content-type": "application/json", "content-length": "100000"}))
    ]
    trickle += [("write", b" "), ("sleep", READ_TIMEOUT / 3)] * 400
    fault_server.enqueue(Fault(trickle))
    guard = LeakGuard()
    async with make_model(fault_server) as model:
        with Timer() as t, pytest.raises(TimeoutError):
            async with asyncio.timeout(2 * READ_TIMEOUT):
                await model.achat(REQUEST)
    assert fault_server.attempts == 1
    assert t.elapsed < elapsed_bound(attempts=1, per_attempt=2 * READ_TIMEOUT)
    await guard.acheck()


# bodies that are not what they claim ------------------------------------------------------------
@pytest.mark.parametrize(
    ("status", "content_type", "body"),
    [
        (200, "application/json", '{"id": "x", "choices": [{"index": 0, "mess'),
        (200, "text/html", "<html><body><h1>Welcome to nginx!</h1></body></html>"),
        (200, "application/json", ""),
    ],
    ids=["truncated-json", "html-200", "empty-200"],
)
async def test_invalid_200_bodies_are_response_invalid_and_not_retried(
    fault_server: FaultServer, status: int, content_type: str, body: str
) -> None:
    fault_server.enqueue(respond(status, body, content_type, repeat=True))
    async with make_model(fault_server) as model:
        fast_retries(model)
        with pytest.raises(ProviderError) as info:
            await model.achat(REQUEST)
    assert info.value.code == ErrorCode.PROVIDER_RESPONSE_INVALID
    assert fault_server.attempts == 1


async def test_html_502_from_a_proxy_is_retried_and_summarised(fault_server: FaultServer) -> None:
    page = (
        "<html>\n<head><title>502 Bad Gateway</title></head>\n<body>\n"
        "<center><h1>502 Bad Gateway</h1></center>\n<hr><center>nginx</center>\n"
        "</body>\n</html>\n" + "<!-- padding -->\n" * 300
    )
    fault_server.enqueue(respond(502, page, "text/html", repeat=True))
    async with make_model(fault_server) as model:
        fast_retries(model)
        with pytest.raises(ProviderError) as info:
            await model.achat(REQUEST)
    err = info.value
    assert err.status == 502 and err.code == ErrorCode.PROVIDER_ERROR
    assert "502 Bad Gateway" in err.message and "\n" not in err.message
    assert len(err.message) < 400 and err.body is not None and len(err.body) <= 2000
    assert fault_server.attempts == 3


# streams ----------------------------------------------------------------------------------------
def _stream_fault(*actions: Any, events: tuple[str, ...] = ()) -> Any:
    from servers.fault_provider_server import Fault

    return Fault([sse_head(), *chunks(*events), *actions])


@pytest.mark.parametrize(
    ("tail", "kind"),
    [
        pytest.param([("reset",)], "connection error", id="reset"),
        pytest.param([("close",)], "connection error", id="truncated-chunked"),
        pytest.param([("sleep", READ_TIMEOUT * 8)], "timed out", id="stall"),
    ],
)
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_stream_failure_after_events_is_typed_and_not_retried(
    fault_server: FaultServer, tail: list[Any], kind: str, face: str
) -> None:
    fault_server.enqueue(
        _stream_fault(*tail, events=(text_delta("Hel"), text_delta("lo"))),
        _stream_fault(events=(text_delta("never"),)),
    )
    model = make_model(fault_server)
    fast_retries(model)
    seen: list[Any] = []
    with Timer() as t, pytest.raises(ProviderError) as info:
        if face == "async":
            async with model:
                async for event in model.astream(REQUEST):
                    seen.append(event)
        else:

            def consume() -> None:
                with model:
                    for event in model.stream(REQUEST):
                        seen.append(event)

            await asyncio.to_thread(consume)
    err = info.value
    assert kind in err.message and "during the stream (not retried)" in err.message
    assert isinstance(err.__cause__, httpx2.TransportError)
    assert [getattr(e, "text", None) for e in seen] == ["Hel", "lo"]
    assert fault_server.attempts == 1
    assert t.elapsed < elapsed_bound(attempts=1, per_attempt=PER_ATTEMPT)


@pytest.mark.parametrize(
    ("content_type", "body", "code", "shown"),
    [
        (
            "text/html",
            "<html><body>Service Unavailable</body></html>",
            ErrorCode.PROVIDER_RESPONSE_INVALID,
            "expected an event stream, got text/html",
        ),
        (
            "application/json",
            '{"error": {"message": "stream not allowed", "type": "bad"}}',
            ErrorCode.PROVIDER_ERROR,
            "stream not allowed (bad)",
        ),
    ],
    ids=["html", "json-error"],
)
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_stream_answered_with_a_non_sse_200_shows_the_servers_answer(
    fault_server: FaultServer, content_type: str, body: str, code: int, shown: str, face: str
) -> None:
    fault_server.enqueue(respond(200, body, content_type))
    model = make_model(fault_server)
    with pytest.raises(ProviderError) as info:
        if face == "async":
            async with model:
                async for _ in model.astream(REQUEST):
                    pass
        else:

            def consume() -> None:
                with model:
                    list(model.stream(REQUEST))

            await asyncio.to_thread(consume)
    assert info.value.code == code and shown in info.value.message
    assert fault_server.attempts == 1


# through ToolService ------------------------------------------------------------------------------
def _tools(counter: Counter, delay: float = 0.0) -> list[Any]:
    @tool
    async def weather(city: str) -> str:
        """Weather in a city."""
        counter.hit("weather")
        await asyncio.sleep(delay)
        return f"{city}: sunny"

    @tool
    def clock(city: str) -> str:
        """Time in a city."""
        counter.hit("clock")
        return "12:00"

    return [weather, clock]


ROUND = completion(None, [("c1", "weather", {"city": "Paris"}), ("c2", "clock", {"city": "Paris"})])


@pytest.mark.parametrize("failure", ["500-forever", "reset-forever", "html-200"])
async def test_loop_keeps_history_valid_when_the_second_model_call_fails(
    fault_server: FaultServer,
    caplog: pytest.LogCaptureFixture,
    spans: Any,
    failure: str,
) -> None:
    from servers.fault_provider_server import Fault

    caplog.set_level(logging.DEBUG)
    fault = {
        "500-forever": json_error(500, f"x-api-key: {SECRET}", repeat=True),
        "reset-forever": Fault([("reset",)], repeat=True),
        "html-200": respond(200, "<html>oops</html>", "text/html"),
    }[failure]
    fault_server.enqueue(respond(200, __import__("json").dumps(ROUND)), fault)
    counter = Counter()
    service = ToolService().tools(*_tools(counter))
    guard = LeakGuard()
    async with make_model(fault_server) as model:
        fast_retries(model)
        with pytest.raises(ProviderError) as info:
            await service.achat(model, None, "weather and time in Paris?")
    partial = assert_partial_result(info.value)
    assert [m.id for m in partial.messages if type(m).__name__ == "ToolExecutionResultMessage"] == [
        "c1",
        "c2",
    ]
    assert counter.counts == {"weather": 1, "clock": 1}
    assert fault_server.attempts == (2 if failure == "html-200" else 4)
    await guard.acheck()
    scan = SecretScan()
    scan.add_error(info.value)
    scan.add_records(caplog.records)
    scan.add_spans(spans)
    scan.check()
    assert any(s.name.startswith("chat") for s in spans.get_finished_spans())


@pytest.mark.parametrize("how", ["stream-reset", "consumer-stops"])
async def test_eager_tools_do_not_outlive_a_failed_stream(
    fault_server: FaultServer, how: str
) -> None:
    """The stream completes call c1 (c2 starts), then the connection resets — or the consumer
    stops reading at that point. The eagerly started c1 must not outlive the conversation."""
    events = (
        call_chunk(0, "c1", "weather", {"city": "Paris"}),
        call_chunk(1, "c2", "clock", {"city": "Paris"}),
    )
    tail = [("reset",)] if how == "stream-reset" else [("sleep", 5.0), ("close",)]
    fault_server.enqueue(_stream_fault(*tail, events=events))
    counter = Counter()
    service = ToolService().tools(*_tools(counter, delay=20.0))
    guard = LeakGuard()
    async with make_model(fault_server) as model:
        fast_retries(model)
        stream = service.achat_stream(model, None, "hi", eager=True)
        if how == "stream-reset":
            with pytest.raises(ProviderError) as info:
                async for _ in stream:
                    pass
            assert "during the stream" in info.value.message
            assert_history_valid(assert_partial_result(info.value).messages)
        else:
            completed = False
            async for event in stream:
                if completed:  # the first event after c1's CompleteToolCall: c1 is started
                    break
                completed = type(event).__name__ == "CompleteToolCall"
            await stream.aclose()  # type: ignore[attr-defined]
    await asyncio.sleep(0.2)
    leaked = guard.extra_tasks()
    for task in leaked:  # clean up before asserting, so a failure leaves nothing behind
        task.cancel()
    await asyncio.gather(*leaked, return_exceptions=True)
    assert counter.counts == {"weather": 1}  # c1 started eagerly
    assert not leaked, f"eagerly started tool tasks still running: {len(leaked)}"


@pytest.mark.parametrize("where", ["model-call", "tool-call"])
async def test_cancelling_achat_leaves_no_tasks_threads_or_connections(
    fault_server: FaultServer, where: str
) -> None:
    from servers.fault_provider_server import Fault

    started = asyncio.Event()
    counter = Counter()

    @tool
    async def slow(city: str) -> str:
        """Slow."""
        counter.hit("slow")
        started.set()
        await asyncio.sleep(30)
        return "never"

    if where == "model-call":
        fault_server.enqueue(Fault([("sleep", 30)]))
    else:
        fault_server.enqueue(
            respond(
                200,
                __import__("json").dumps(
                    completion(None, [("s1", "slow", {"city": "a"}), ("s2", "slow", {"city": "b"})])
                ),
            )
        )
    service = ToolService().tools(slow)
    guard = LeakGuard()
    async with make_model(fault_server, timeout=60.0) as model:
        task = asyncio.create_task(service.achat(model, None, "go"))
        if where == "model-call":
            for _ in range(200):
                if fault_server.attempts:
                    break
                await asyncio.sleep(0.02)
        else:
            await asyncio.wait_for(started.wait(), 10)
        with Timer() as t:
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
        assert t.elapsed < 5.0
    assert fault_server.attempts == 1
    assert counter.counts["slow"] == (0 if where == "model-call" else 2)
    await guard.acheck()


async def test_errors_render_without_secrets_even_when_the_server_echoes_headers(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    echo = (
        f'{{"error": {{"message": "bad key {SECRET}", "type": "auth",'
        f' "headers": {{"Authorization": "Bearer {SECRET}", "x-api-key": "{SECRET}"}}}}}}'
    )
    fault_server.enqueue(respond(401, echo))
    async with make_model(fault_server) as model:
        with pytest.raises(ToolweaveError) as info:
            await model.achat(REQUEST)
    assert fault_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    _scan(info.value, caplog)


SLASHED_KEY = "k3y/CANARY+9f8e7d6c5b4a/39281706=="
GATEWAY_TOKEN = "gw-CANARY-0a1b2c3d4e5f"  # a credential given through headers=


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_a_key_echoed_json_escaped_or_in_the_reason_phrase_is_masked(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture, face: str
) -> None:
    # JSON encoders may write "/" as "\/" (PHP, some gateways): the raw key is not in the body.
    escaped = SLASHED_KEY.replace("/", "\\/")
    body = (
        f'{{"error": {{"message": "invalid key {escaped}", "key": "{escaped}",'
        f' "gateway": "{GATEWAY_TOKEN}"}}}}'
    )
    caplog.set_level(logging.DEBUG)
    fault_server.enqueue(
        Fault(
            [
                (
                    "write",
                    head(
                        401,
                        {"content-type": "application/json", "content-length": str(len(body))},
                        reason=f"Unauthorized {SLASHED_KEY} {GATEWAY_TOKEN}",
                    )
                    + body.encode(),
                )
            ]
        )
    )
    model = make_model(fault_server, api_key=SLASHED_KEY, headers={"X-Custom-Auth": GATEWAY_TOKEN})
    with pytest.raises(ToolweaveError) as info:
        if face == "async":
            async with model:
                await model.achat(REQUEST)
        else:
            await asyncio.to_thread(model.chat, REQUEST)
            model.close()
    assert "invalid key ***" in info.value.message
    assert any("Unauthorized *** ***" in r.getMessage() for r in caplog.records)
    assert fault_server.requests[0].headers["x-custom-auth"] == GATEWAY_TOKEN
    scan = SecretScan((SLASHED_KEY, escaped, GATEWAY_TOKEN))
    scan.add_error(info.value)
    scan.add_records(caplog.records)
    scan.check()
