"""Issue 14, HTTP half: attacks on `RestfulApi` through the raw loopback fault server that
used to hang, leak or raise raw errors. Each case fails on the code before its fix."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from servers.fault_provider_server import Action, Fault, FaultServer, head
from toolweave.errors import ErrorCode
from toolweave.http import RestfulApi, RestfulApiCard, SsrfPolicy
from toolweave.http.errors import RestfulApiTimeoutError

from .invariants import Timer, elapsed_bound

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
