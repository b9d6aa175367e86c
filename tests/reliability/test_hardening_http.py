"""Issue 14, HTTP half: attacks on `RestfulApi` through the raw loopback fault server that
used to hang, leak or raise raw errors. Each case fails on the code before its fix."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from typing import Any
from urllib.parse import quote

import pytest

from servers.fault_provider_server import Action, Fault, FaultServer, head, respond
from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, ToolService
from toolweave.errors import ErrorCode
from toolweave.http import RestfulApi, RestfulApiCard, SsrfPolicy
from toolweave.http.errors import RestfulApiResponseError, RestfulApiTimeoutError

from .invariants import SECRET, SecretScan, Timer, elapsed_bound

TIMEOUT = 1.0
LOOPBACK = SsrfPolicy(allowed_networks=("127.0.0.1/32",))
TRICKLE_STEPS = 60  # x 0.2 s: 12 s, beyond the hang guard below
STEP = 0.2


def _api(server: FaultServer, **kw: Any) -> RestfulApi:
    return RestfulApi(
        RestfulApiCard(
            name="api",
            url=server.url + "/api",
            method="GET",
            input_params={"type": "object", "properties": {}},
            timeout=TIMEOUT,
            ssrf_policy=LOOPBACK,
        ),
        **kw,
    )


async def _invoke(api: RestfulApi, face: str) -> Any:
    if face == "async":
        return await api.ainvoke({})
    return await asyncio.to_thread(api.invoke, {})


def _trickle(data: bytes, first: bytes = b"") -> Fault:
    """`first` at once, then `data` a byte at a time, one every STEP seconds (padded to
    TRICKLE_STEPS steps)."""
    actions: list[Action] = [("write", first)]
    for i in range(TRICKLE_STEPS):
        actions += [("write", data[i : i + 1] if i < len(data) else b""), ("sleep", STEP)]
    return Fault(actions)


_CHUNKED = head(200, {"content-type": "text/plain", "transfer-encoding": "chunked"})
# a gzip header with FCOMMENT set whose comment never ends: the decoder yields nothing
_GZIP_HEAD = b"\x1f\x8b\x08\x10\x00\x00\x00\x00\x00\xff" + b"c" * TRICKLE_STEPS


@pytest.mark.parametrize(
    "fault",
    [
        pytest.param(_trickle(b"HTTP/1.1 200 OK" + b" " * 100), id="status-line"),
        pytest.param(
            _trickle(b"x-slow: " + b"a" * TRICKLE_STEPS, b"HTTP/1.1 200 OK\r\n"), id="headers"
        ),
        pytest.param(_trickle(b"0" * TRICKLE_STEPS, _CHUNKED), id="chunk-size-line"),
        pytest.param(
            _trickle(_GZIP_HEAD, head(200, {"content-encoding": "gzip", "content-length": "1000"})),
            id="gzip-header",
        ),
    ],
)
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_trickled_head_or_framing_hits_the_total_deadline(
    fault_server: FaultServer, fault: Fault, face: str
) -> None:
    fault_server.enqueue(fault)
    async with _api(fault_server) as api:
        with Timer() as t, pytest.raises(RestfulApiTimeoutError) as info:
            await _invoke(api, face)
    assert info.value.code == ErrorCode.RESTFUL_API_EXECUTION_TIMEOUT
    assert fault_server.attempts == 1
    assert t.elapsed < elapsed_bound(attempts=1, per_attempt=TIMEOUT)


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_slow_dns_hits_the_total_deadline(fault_server: FaultServer, face: str) -> None:
    def slow_resolver(host: str, port: int) -> list[str]:
        time.sleep(TRICKLE_STEPS * STEP)
        return ["127.0.0.1"]

    api = RestfulApi(
        RestfulApiCard(
            name="api",
            url=f"http://slow-dns.test:{fault_server.port}/api",
            method="GET",
            input_params={"type": "object", "properties": {}},
            timeout=TIMEOUT,
            ssrf_policy=LOOPBACK,
        ),
        resolver=slow_resolver,
    )
    async with api:
        with Timer() as t, pytest.raises(RestfulApiTimeoutError) as info:
            await _invoke(api, face)
    assert info.value.code == ErrorCode.RESTFUL_API_EXECUTION_TIMEOUT
    assert fault_server.attempts == 0
    assert t.elapsed < elapsed_bound(attempts=1, per_attempt=TIMEOUT)


# items 4, 5, 15, 16: credentials echoed back never reach the model ------------------------------
CUSTOM = "k3y/custom-AUTH/42"
"""A credential passed as a card `headers=` default under a credential-like name."""


def _secured(server: FaultServer) -> RestfulApi:
    return RestfulApi(
        RestfulApiCard(
            name="api",
            url=server.url + "/api",
            method="GET",
            input_params={"type": "object", "properties": {}},
            headers={"X-Custom-Auth": CUSTOM},
            timeout=TIMEOUT,
            ssrf_policy=LOOPBACK,
        ),
        auth={"headers": {"Authorization": f"Bearer {SECRET}"}, "query": {"token": SECRET}},
    )


_ECHOES = {
    "location-and-headers": respond(
        301,
        "",
        "text/plain",
        {
            "location": f"https://example.com/api?token={SECRET}&x={quote(CUSTOM, safe='')}",
            "x-echo-authorization": f"Bearer {SECRET}",
            "x-echo-custom": CUSTOM,
        },
    ),
    "reason-of-an-error": Fault(
        [("write", head(401, {"content-length": "0"}, reason=f"Bad key {SECRET} {CUSTOM}"))]
    ),
    "reason-of-a-success": Fault(
        [("write", head(200, {"content-length": "2"}, reason=f"OK {SECRET}") + b"{}")]
    ),
    "json-escaped-body": respond(
        403,
        json.dumps({"error": f"bad {CUSTOM} / {SECRET}"}).replace("/", "\\/"),
        "application/json",
    ),
}


@pytest.mark.parametrize("echo", list(_ECHOES))
async def test_echoed_credentials_are_masked_for_the_model_logs_and_spans(
    fault_server: FaultServer, caplog: pytest.LogCaptureFixture, spans: Any, echo: str
) -> None:
    caplog.set_level(logging.DEBUG)
    fault_server.enqueue(_ECHOES[echo])
    call = ToolExecutionRequest(id="c1", name="api", arguments="{}")
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[call]), AiMessage("done")])
    async with _secured(fault_server) as api:
        result = await ToolService().tools(api).achat(model, None, "go")
    sent = fault_server.requests[0]
    assert sent.headers["x-custom-auth"] == CUSTOM  # the credential was really sent
    assert sent.headers["authorization"] == f"Bearer {SECRET}"
    scan = SecretScan(secrets=(SECRET, CUSTOM, quote(CUSTOM, safe=""), json.dumps(CUSTOM)[1:-1]))
    scan.add_messages(result.messages)
    for execution in result.tool_executions:
        scan.add("result", repr(execution.result))
        if execution.result.error is not None:
            scan.add_error(execution.result.error)
            scan.add("to_dict", execution.result.error.to_dict())
    logged = [r for r in caplog.records if r.name == "httpx2"]
    assert logged  # httpx2's INFO line, with the reason phrase as received
    assert any(r.name.startswith("httpcore2") for r in caplog.records)  # heads, at DEBUG
    scan.add_records(caplog.records)
    scan.add_spans(spans)
    assert scan.check() > 0


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_result_headers_and_reason_are_masked(fault_server: FaultServer, face: str) -> None:
    fault_server.enqueue(_ECHOES["location-and-headers"])
    async with _secured(fault_server) as api:
        result = await _invoke(api, face)
    assert result["code"] == 301
    assert result["headers"]["location"] == "https://example.com/api?token=***&x=***"
    assert result["headers"]["x-echo-authorization"] == "***"
    assert result["headers"]["x-echo-custom"] == "***"
    fault_server.enqueue(_ECHOES["reason-of-a-success"])
    async with _secured(fault_server) as api:
        result = await _invoke(api, face)
    assert result["reason"] == "OK ***"


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_a_credential_straddling_the_excerpt_window_leaves_no_prefix(
    fault_server: FaultServer, face: str
) -> None:
    # 330 three-byte characters end at byte 990: the credential crosses byte 1,000
    lead = "€" * 330
    fault_server.enqueue(respond(500, lead + SECRET + " tail", "text/plain; charset=utf-8"))
    async with _secured(fault_server) as api:
        with pytest.raises(RestfulApiResponseError) as info:
            await _invoke(api, face)
    assert info.value.body == lead + "*** tail"
    assert SECRET[:6] not in str(info.value)
