"""The SSRF guard: the address classifier, and end to end against loopback servers only.

No test sends traffic to a non-loopback address: refusals happen before any socket opens,
and "public" servers are modelled by allowing 127.0.0.2 explicitly.
"""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from servers.http_app import make_app, serve
from toolweave.errors import ErrorCode, RestfulApiError
from toolweave.http import (
    RestfulApi,
    RestfulApiCard,
    SsrfBlockedError,
    SsrfPolicy,
    check_address,
    get_default_ssrf_policy,
    set_default_ssrf_policy,
)

MakeTool = Callable[..., RestfulApi]

BLOCKED = [
    "127.0.0.1",
    "127.255.0.9",
    "0.0.0.0",
    "0.1.2.3",
    "10.0.0.1",
    "172.16.5.4",
    "172.31.255.255",
    "192.168.1.1",
    "100.64.0.1",
    "169.254.169.254",
    "169.254.1.1",
    "224.0.0.1",
    "239.255.255.250",
    "240.0.0.1",
    "255.255.255.255",
    "192.0.2.10",
    "198.18.0.1",
    "::",
    "::1",
    "fe80::1",
    "fe80::1%lo",
    "fc00::1",
    "fd12:3456::1",
    "ff02::1",
    "::ffff:127.0.0.1",
    "::ffff:7f00:1",
    "::ffff:10.1.2.3",
    "::ffff:169.254.169.254",
    "::127.0.0.1",
    "64:ff9b::a9fe:a9fe",
    "64:ff9b::7f00:1",
    "2002:a9fe:a9fe::1",
    "2002:7f00:1::",
    "2001:0:4136:e378:8000:63bf:3fff:fdd2",
    "fe80::5efe:a00:1",
    "2001:db8::1",
]
METADATA = [
    "169.254.169.254",
    "169.254.170.2",
    "168.63.129.16",
    "100.100.100.200",
    "fd00:ec2::254",
    "fd20:ce::254",
    "::ffff:169.254.169.254",
    "64:ff9b::a9fe:a9fe",
    "2002:a9fe:a9fe::1",
]
PUBLIC = ["93.184.216.34", "8.8.8.8", "1.1.1.1", "2606:4700:4700::1111", "2a00:1450::1"]


# classifier -------------------------------------------------------------------------------
@pytest.mark.parametrize("address", BLOCKED)
def test_blocked_by_default(address: str) -> None:
    assert check_address(address, SsrfPolicy()) is not None


@pytest.mark.parametrize("address", PUBLIC)
def test_public_allowed(address: str) -> None:
    assert check_address(address, SsrfPolicy()) is None


@pytest.mark.parametrize("address", METADATA)
def test_metadata_blocked_even_with_private_allowed(address: str) -> None:
    reason = check_address(address, SsrfPolicy(allow_private_network=True))
    assert reason is not None and "metadata" in reason


@pytest.mark.parametrize("address", ["127.0.0.1", "10.0.0.1", "::1", "::ffff:127.0.0.1"])
def test_private_allowed_on_request(address: str) -> None:
    assert check_address(address, SsrfPolicy(allow_private_network=True)) is None


def test_metadata_allowed_only_explicitly() -> None:
    assert (
        check_address("169.254.169.254", SsrfPolicy(allowed_networks=("169.254.169.254",))) is None
    )
    assert check_address("169.254.169.254", SsrfPolicy(enabled=False)) is None
    # allowing one address does not allow its neighbours
    assert check_address("169.254.169.253", SsrfPolicy(allowed_networks=("169.254.169.254",)))


def test_blocked_networks_beat_private_allow() -> None:
    policy = SsrfPolicy(allow_private_network=True, blocked_networks=("10.0.0.0/8",))
    assert check_address("10.1.1.1", policy) is not None
    assert check_address("192.168.0.1", policy) is None


def test_allowed_hosts() -> None:
    policy = SsrfPolicy(allowed_hosts=("intranet.local", ".corp.example"))
    assert policy.host_allowed("intranet.local")
    assert policy.host_allowed("INTRANET.local.")
    assert policy.host_allowed("corp.example")
    assert policy.host_allowed("api.corp.example")
    assert not policy.host_allowed("evilcorp.example")
    assert not policy.host_allowed("other.local")
    assert check_address("10.0.0.1", policy, host_allowed=True) is None
    assert check_address("169.254.169.254", policy, host_allowed=True) is not None


def test_not_an_address() -> None:
    assert check_address("example.com", SsrfPolicy()) is not None


# end to end: refused without any traffic ------------------------------------------------
@pytest.fixture
def guarded(make_tool: MakeTool) -> Any:
    """A tool factory with the guard in its default state (no loopback opt-in)."""

    def factory(url: str, **kwargs: Any) -> RestfulApi:
        return make_tool(url, method="GET", allow_private_network=False, **kwargs)

    return factory


async def test_loopback_refused_by_default(guarded: Any, base: str, server_log: list[Any]) -> None:
    with pytest.raises(SsrfBlockedError) as info:
        await guarded(base + "/echo/x").ainvoke({})
    assert info.value.code == ErrorCode.RESTFUL_API_SSRF_BLOCKED
    assert info.value.address == "127.0.0.1"
    assert server_log == []


def test_loopback_refused_sync(guarded: Any, base: str, server_log: list[Any]) -> None:
    tool = guarded(base + "/echo/x")
    try:
        with pytest.raises(SsrfBlockedError):
            tool.invoke({})
    finally:
        tool.close()
    assert server_log == []


@pytest.mark.parametrize(
    "host",
    [
        "10.0.0.1",
        "10.255.255.254:8080",
        "172.16.0.1",
        "192.168.0.1",
        "169.254.169.254",
        "169.254.169.254.",
        "100.100.100.200",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "[::ffff:169.254.169.254]",
        "[fd00:ec2::254]",
        "[fe80::1]",
        "0.0.0.0",
    ],
)
async def test_private_targets_refused_before_connecting(guarded: Any, host: str) -> None:
    resolved: list[str] = []

    def resolver(name: str, port: int) -> list[str]:
        resolved.append(name)
        return ["127.0.0.1"]

    with pytest.raises(SsrfBlockedError):
        await guarded(f"http://{host}/latest/meta-data/", resolver=resolver).ainvoke({})


@pytest.mark.parametrize("host", ["2130706433", "0x7f.1", "127.1", "017700000001"])
async def test_encoded_loopback_refused(
    guarded: Any, base: str, server_log: list[Any], host: str
) -> None:
    port = base.rsplit(":", 1)[1]
    with pytest.raises(RestfulApiError) as info:
        await guarded(f"http://{host}:{port}/echo/x").ainvoke({})
    # either refused by the guard, or the name does not resolve at all: never sent
    assert info.value.code in (
        ErrorCode.RESTFUL_API_SSRF_BLOCKED,
        ErrorCode.RESTFUL_API_EXECUTION_ERROR,
    )
    assert server_log == []


async def test_hostname_resolving_to_loopback_refused(
    guarded: Any, base: str, server_log: list[Any]
) -> None:
    port = base.rsplit(":", 1)[1]
    tool = guarded(f"http://internal.test:{port}/echo/x", resolver=lambda h, p: ["127.0.0.1"])
    with pytest.raises(SsrfBlockedError) as info:
        await tool.ainvoke({})
    assert info.value.host == "internal.test"
    assert server_log == []


async def test_every_resolved_address_must_pass(
    guarded: Any, base: str, server_log: list[Any]
) -> None:
    # one public and one loopback record: refused as a whole, before connecting anywhere
    port = base.rsplit(":", 1)[1]
    tool = guarded(
        f"http://mixed.test:{port}/echo/x", resolver=lambda h, p: ["93.184.216.34", "127.0.0.1"]
    )
    with pytest.raises(SsrfBlockedError):
        await tool.ainvoke({})
    assert server_log == []


async def test_localhost_name_refused(guarded: Any, base: str, server_log: list[Any]) -> None:
    port = base.rsplit(":", 1)[1]
    with pytest.raises(SsrfBlockedError):
        await guarded(f"http://localhost:{port}/echo/x").ainvoke({})
    assert server_log == []


# explicit opt-ins ----------------------------------------------------------------------
async def test_card_policy_allows_one_network(make_tool: MakeTool, base: str) -> None:
    tool = make_tool(
        "/echo/x",
        method="GET",
        allow_private_network=False,
        ssrf_policy=SsrfPolicy(allowed_networks=("127.0.0.1/32",)),
    )
    assert (await tool.ainvoke({}))["code"] == 200


async def test_allowed_host(make_tool: MakeTool, base: str) -> None:
    port = base.rsplit(":", 1)[1]
    tool = make_tool(
        f"http://svc.internal:{port}/echo/x",
        method="GET",
        allow_private_network=False,
        ssrf_policy=SsrfPolicy(allowed_hosts=(".internal",)),
        resolver=lambda h, p: ["127.0.0.1"],
    )
    assert (await tool.ainvoke({}))["data"]["headers"]["host"] == f"svc.internal:{port}"


@pytest.fixture
def global_policy() -> Iterator[None]:
    previous = set_default_ssrf_policy(SsrfPolicy(allow_private_network=True))
    try:
        yield
    finally:
        set_default_ssrf_policy(previous)


async def test_global_policy(global_policy: None, make_tool: MakeTool) -> None:
    assert get_default_ssrf_policy().allow_private_network
    tool = make_tool("/echo/x", method="GET", allow_private_network=False)
    assert (await tool.ainvoke({}))["code"] == 200


async def test_proxy_environment_is_ignored(
    make_tool: MakeTool, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a proxy from the environment would bypass the address check: it is never used
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("ALL_PROXY", "http://127.0.0.1:9")
    assert (await make_tool("/echo/x", method="GET").ainvoke({}))["code"] == 200


# DNS rebinding ------------------------------------------------------------------------
@pytest.fixture
def public_and_canary() -> Iterator[tuple[int, Any, Any]]:
    """A "public" server on 127.0.0.2 and a canary on 127.0.0.1, on the same port."""
    for _ in range(20):
        probe = socket.socket()
        probe.bind(("127.0.0.2", 0))
        port = probe.getsockname()[1]
        probe.close()
        public, canary = make_app(), make_app()
        try:
            with serve(public, "127.0.0.2", port), serve(canary, "127.0.0.1", port):
                yield port, public, canary
                return
        except OSError:
            continue
    pytest.skip("could not bind 127.0.0.1 and 127.0.0.2 on the same port")


async def test_dns_rebinding_is_pinned(public_and_canary: tuple[int, Any, Any]) -> None:
    port, public, canary = public_and_canary
    answers = [["127.0.0.2"], ["127.0.0.1"], ["127.0.0.1"]]
    calls: list[str] = []

    def rebinding(host: str, p: int) -> list[str]:
        calls.append(host)
        return answers[min(len(calls) - 1, len(answers) - 1)]

    card = RestfulApiCard(
        name="rebind",
        url=f"http://rebind.test:{port}/echo/x",
        method="GET",
        ssrf_policy=SsrfPolicy(allowed_networks=("127.0.0.2/32",)),
    )
    tool = RestfulApi(card, resolver=rebinding)
    try:
        first = await tool.ainvoke({})
        assert first["code"] == 200
        # exactly one lookup for the connection: the checked answer is the one used
        assert calls == ["rebind.test"]
        assert public.state.log == [("GET", "/echo/x")]
        # the keep-alive connection is reused: still the vetted peer, no new lookup
        await tool.ainvoke({})
        assert calls == ["rebind.test"]
        assert len(public.state.log) == 2
    finally:
        await tool.aclose()
    # a new connection resolves again; the rebound answer is refused before connecting
    tool = RestfulApi(card, resolver=rebinding)
    try:
        with pytest.raises(SsrfBlockedError):
            await tool.ainvoke({})
    finally:
        await tool.aclose()
    assert canary.state.log == []


# issue 14 item 18: blocked wins; every embedded address is checked -----------------------------
@pytest.mark.parametrize(
    "address",
    [
        # Teredo: server 127.0.0.1, client (obfuscated) 169.254.169.254
        "2001:0:7f00:1:0:0:5601:5601",
        # 6to4 of 127.0.0.1 with an ISATAP interface id embedding 169.254.169.254
        "2002:7f00:1:0:0:5efe:a9fe:a9fe",
    ],
)
def test_an_allowed_embedded_address_does_not_clear_a_metadata_one(address: str) -> None:
    policy = SsrfPolicy(allowed_networks=("127.0.0.1/32",), allow_private_network=True)
    reason = check_address(address, policy)
    assert reason is not None and "metadata" in reason and "169.254.169.254" in reason
    # listing the IPv6 address (or its whole range) clears it, not what it embeds
    assert check_address(address, SsrfPolicy(allowed_networks=(address,))) is not None
    assert check_address(address, SsrfPolicy(allowed_networks=("2000::/3",))) is not None
    # listing every embedded address is an explicit allow
    both = SsrfPolicy(allowed_networks=("127.0.0.1/32", "169.254.169.254/32"))
    assert check_address(address, both) is None


def test_blocked_networks_beat_allowed_networks() -> None:
    policy = SsrfPolicy(allowed_networks=("10.0.0.0/8",), blocked_networks=("10.9.0.0/16",))
    assert check_address("10.1.1.1", policy) is None
    assert check_address("10.9.1.1", policy) is not None
    assert check_address("::ffff:10.9.1.1", policy) is not None  # embedded too


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_blocked_network_inside_an_allowed_one_is_refused_before_sending(
    base: str, server_log: list[tuple[str, str]], face: str
) -> None:
    card = RestfulApiCard(
        name="api",
        url=base + "/echo/x",
        input_params={"type": "object", "properties": {}},
        ssrf_policy=SsrfPolicy(
            allowed_networks=("127.0.0.0/8",), blocked_networks=("127.0.0.1/32",)
        ),
    )
    async with RestfulApi(card) as tool:
        with pytest.raises(SsrfBlockedError, match="blocked network"):
            if face == "async":
                await tool.ainvoke({})
            else:
                await asyncio.to_thread(tool.invoke, {})
    assert server_log == []


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_teredo_answer_with_an_embedded_metadata_address_is_refused(
    base: str, server_log: list[tuple[str, str]], face: str
) -> None:
    port = base.rsplit(":", 1)[1]
    card = RestfulApiCard(
        name="api",
        url=f"http://teredo.test:{port}/echo/x",
        input_params={"type": "object", "properties": {}},
        ssrf_policy=SsrfPolicy(allowed_networks=("127.0.0.1/32",)),
    )
    tool = RestfulApi(card, resolver=lambda h, p: ["2001:0:7f00:1:0:0:5601:5601"])
    async with tool:
        with pytest.raises(SsrfBlockedError, match="metadata"):
            if face == "async":
                await tool.ainvoke({})
            else:
                await asyncio.to_thread(tool.invoke, {})
    assert server_log == []
