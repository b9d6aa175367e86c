"""REST tool faults through the raw loopback fault server: redirects to private and metadata
addresses, oversized bodies (declared and streamed), endpoints that never answer or trickle,
closed and reset connections, error pages, bodies that are not what they claim; then several
of them at once in one `ToolService` round.

Each case asserts the typed error (class and code), how many requests the server saw (tools
are never retried), an elapsed bound from the card's timeout, and, through the loop, the
history and that no planted credential reaches the model, the logs or the spans.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from typing import Any

import pytest

from servers.fault_provider_server import Fault, FaultServer, head, json_error, respond
from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, ToolService
from toolweave.errors import ErrorCode, RestfulApiError, ToolTimeoutError
from toolweave.http import RestfulApi, RestfulApiCard, SsrfPolicy
from toolweave.http.errors import RestfulApiResponseError, RestfulApiTimeoutError, SsrfBlockedError

from .invariants import (
    SECRET,
    LeakGuard,
    SecretScan,
    Timer,
    assert_history_valid,
    elapsed_bound,
)

TIMEOUT = 1.0
LIMIT = 64 * 1024
LOOPBACK = SsrfPolicy(allowed_networks=("127.0.0.1/32",))


def _api(server: FaultServer, path: str = "/api", **card: Any) -> RestfulApi:
    card.setdefault("name", "api")
    card.setdefault("timeout", TIMEOUT)
    card.setdefault("max_response_byte_size", LIMIT)
    card.setdefault("ssrf_policy", LOOPBACK)
    return RestfulApi(
        RestfulApiCard(
            url=server.url + path,
            method="GET",
            input_params={"type": "object", "properties": {}},
            **card,
        ),
        auth={"headers": {"Authorization": f"Bearer {SECRET}"}, "query": {"token": SECRET}},
    )


async def _invoke(api: RestfulApi, face: str) -> Any:
    if face == "async":
        return await api.ainvoke({})
    return await asyncio.to_thread(api.invoke, {})


def _scan(error: BaseException) -> None:
    scan = SecretScan()
    scan.add_error(error)
    scan.check()


# redirects and the SSRF guard ---------------------------------------------------------------------
@pytest.mark.parametrize(
    "target",
    [
        "http://169.254.169.254/latest/meta-data/iam/security-credentials/",
        "http://127.0.0.1:{port}/canary",
        "http://[::ffff:127.0.0.1]:{port}/canary",
        "http://10.0.0.1/admin",
    ],
)
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_redirect_to_a_private_address_is_returned_not_followed(
    fault_server: FaultServer, target: str, face: str
) -> None:
    location = target.format(port=fault_server.port)
    fault_server.enqueue(respond(302, "", "text/plain", {"location": location}))
    async with _api(fault_server) as api:
        result = await _invoke(api, face)
    assert result["code"] == 302 and result["headers"]["location"] == location
    assert [r.path.split("?")[0] for r in fault_server.requests] == ["/api"]  # canary untouched
    assert SECRET not in result["url"]  # the auth query value is masked in what the model sees


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_private_target_without_permission_is_blocked_before_sending(
    fault_server: FaultServer, face: str
) -> None:
    async with _api(fault_server, ssrf_policy=SsrfPolicy()) as api:
        with pytest.raises(SsrfBlockedError) as info:
            await _invoke(api, face)
    assert info.value.code == ErrorCode.RESTFUL_API_SSRF_BLOCKED
    assert fault_server.attempts == 0
    _scan(info.value)


# sizes --------------------------------------------------------------------------------------------
def _streamed(total: int, piece: int = 8192) -> Fault:
    actions: list[Any] = [
        ("write", head(200, {"content-type": "text/plain", "transfer-encoding": "chunked"}))
    ]
    actions += [("chunk", b"a" * piece)] * (total // piece)
    actions.append(("end",))
    return Fault(actions)


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(lambda: respond(200, b"b" * (LIMIT + 1), "text/plain"), id="declared"),
        pytest.param(lambda: _streamed(LIMIT * 16), id="chunked-16x"),
        pytest.param(
            lambda: respond(200, b"c" * 10, "text/plain", declared_length=LIMIT * 1000),
            id="lying-length",
        ),
    ],
)
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_oversized_bodies_stop_at_the_limit(
    fault_server: FaultServer, fault: Any, face: str
) -> None:
    fault_server.enqueue(fault())
    async with _api(fault_server) as api:
        with Timer() as t, pytest.raises(RestfulApiError) as info:
            await _invoke(api, face)
    assert info.value.code == ErrorCode.RESTFUL_API_RESPONSE_SIZE_EXCEED_LIMIT
    assert fault_server.attempts == 1
    assert t.elapsed < elapsed_bound(attempts=1, per_attempt=TIMEOUT)


# endpoints that never answer -----------------------------------------------------------------------
@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(Fault([("sleep", 30)]), id="never-answers"),
        pytest.param(
            Fault([("write", head(200, {"content-length": "10"})), ("sleep", 30)]), id="head-only"
        ),
        pytest.param(
            Fault(
                [("write", head(200, {"content-type": "text/plain", "content-length": "1000"}))]
                + [("write", b"x"), ("sleep", TIMEOUT / 5)] * 200
            ),
            id="endless-trickle",
        ),
    ],
)
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_silent_or_trickling_endpoint_hits_the_total_deadline(
    fault_server: FaultServer, fault: Fault, face: str
) -> None:
    fault_server.enqueue(fault)
    async with _api(fault_server) as api:
        with Timer() as t, pytest.raises(RestfulApiTimeoutError) as info:
            await _invoke(api, face)
    err = info.value
    assert isinstance(err, ToolTimeoutError)
    assert err.code == ErrorCode.RESTFUL_API_EXECUTION_TIMEOUT
    assert fault_server.attempts == 1
    # sync invoke checks the deadline between chunks: it may overshoot by one read timeout
    assert t.elapsed < elapsed_bound(attempts=1, per_attempt=2 * TIMEOUT)
    _scan(err)


# broken connections and bodies -------------------------------------------------------------------
@pytest.mark.parametrize(
    ("fault", "code"),
    [
        pytest.param(Fault([("close",)]), ErrorCode.RESTFUL_API_EXECUTION_ERROR, id="closed"),
        pytest.param(Fault([("reset",)]), ErrorCode.RESTFUL_API_EXECUTION_ERROR, id="reset"),
        pytest.param(
            Fault([("write", head(200, {"content-length": "50"}) + b"short"), ("reset",)]),
            ErrorCode.RESTFUL_API_EXECUTION_ERROR,
            id="reset-mid-body",
        ),
        pytest.param(
            respond(200, "<html>not json</html>", "application/json"),
            ErrorCode.RESTFUL_API_RESPONSE_PROCESS_ERROR,
            id="html-labelled-json",
        ),
        pytest.param(
            respond(200, b"\x1f\x8b\x08garbage", "text/plain", {"content-encoding": "gzip"}),
            ErrorCode.RESTFUL_API_RESPONSE_PROCESS_ERROR,
            id="broken-gzip",
        ),
    ],
)
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_broken_connections_and_bodies_are_typed(
    fault_server: FaultServer, fault: Fault, code: int, face: str
) -> None:
    fault_server.enqueue(fault)
    async with _api(fault_server) as api:
        with Timer() as t, pytest.raises(RestfulApiError) as info:
            await _invoke(api, face)
    assert info.value.code == code
    assert fault_server.attempts == 1  # a tool call is never re-sent
    assert t.elapsed < elapsed_bound(attempts=1, per_attempt=TIMEOUT)
    _scan(info.value)


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_error_page_that_echoes_the_credentials_is_masked(
    fault_server: FaultServer, face: str
) -> None:
    echo = f"<html>500: request had Authorization: Bearer {SECRET} and token={SECRET}</html>"
    fault_server.enqueue(respond(500, echo, "text/html"))
    async with _api(fault_server) as api:
        with pytest.raises(RestfulApiResponseError) as info:
            await _invoke(api, face)
    err = info.value
    assert err.code == ErrorCode.RESTFUL_API_RESPONSE_ERROR and err.status == 500
    assert fault_server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    _scan(err)


# several faults in one round ------------------------------------------------------------------------
async def test_one_round_of_failing_http_tools_keeps_the_history_valid(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture, spans: Any
) -> None:
    caplog.set_level(logging.DEBUG)
    paths = {
        "ok": (respond(200, json.dumps({"fine": True})), "/ok"),
        "hang": (Fault([("sleep", 30)]), "/hang"),
        "big": (_streamed(LIMIT * 4), "/big"),
        "gone": (Fault([("reset",)]), "/gone"),
        "err": (json_error(503, "down"), "/err"),
    }
    # only "hang" is meant to hit its deadline; the others get room to answer on a loaded
    # machine (five calls at once on two shared cores), well inside the round's bound
    tools = [
        _api(fault_server, path, name=name, timeout=TIMEOUT if name == "hang" else 5 * TIMEOUT)
        for name, (_, path) in paths.items()
    ]
    calls = [ToolExecutionRequest(id=f"id_{n}", name=n, arguments="{}") for n in paths]
    model = ScriptedChatModel([AiMessage(tool_execution_requests=calls), AiMessage("done")])
    service = ToolService().tools(*tools)

    # The raw server pops faults in arrival order, which is not fixed for a parallel round:
    # route by path instead, with one queue per path.
    by_path = {path: fault for fault, path in paths.values()}
    original = fault_server._serve

    async def routed(reader: Any, writer: Any) -> None:
        raw = await reader.readuntil(b"\r\n\r\n")
        path = raw.split(b" ", 2)[1].decode().split("?")[0]
        with fault_server.lock:
            fault_server.queue.appendleft(by_path[path])
        proxy = asyncio.StreamReader()
        proxy.feed_data(raw)
        proxy.feed_eof()
        await original(proxy, writer)

    fault_server._serve = routed  # type: ignore[method-assign]
    guard = LeakGuard()
    try:
        with Timer() as t:
            result = await service.achat(model, None, "go")
    finally:
        fault_server._serve = original  # type: ignore[method-assign]
        for api in tools:
            await api.aclose()
    assert_history_valid(result.messages)
    outcome = {e.request.name: e.result for e in result.tool_executions}
    assert not outcome["ok"].is_error
    codes = {n: getattr(r.error, "code", None) for n, r in outcome.items() if r.is_error}
    assert codes == {
        "hang": ErrorCode.RESTFUL_API_EXECUTION_TIMEOUT,
        "big": ErrorCode.RESTFUL_API_RESPONSE_SIZE_EXCEED_LIMIT,
        "gone": ErrorCode.RESTFUL_API_EXECUTION_ERROR,
        "err": ErrorCode.RESTFUL_API_RESPONSE_ERROR,
    }
    seen = sorted(r.path.split("?")[0] for r in fault_server.requests)
    assert seen == sorted(path for _, path in paths.values())  # each tool ran exactly once
    assert t.elapsed < elapsed_bound(attempts=1, per_attempt=TIMEOUT)
    await guard.acheck()
    scan = SecretScan()
    scan.add_messages(result.messages)
    for r in outcome.values():
        if r.error is not None:
            scan.add_error(r.error)
    # httpx2's own INFO line ("HTTP Request: GET <url>") prints the URL as sent: the auth
    # query value in it is masked, whole ("***") or, where a provider's log filter saw it
    # first, as an sk- key ("sk-***"). (httpcore2's DEBUG lines print raw response headers,
    # which this fault server echoes credentials into; they are out of our hands.)
    logged = [r for r in caplog.records if r.name == "httpx2"]
    assert logged and all(re.search(r"token=(sk-)?\*\*\*", r.getMessage()) for r in logged)
    scan.add_records(r for r in caplog.records if not r.name.startswith("httpcore2"))
    scan.add_spans(spans)
    assert scan.check() > 0
