"""SSRF guard for HTTP tools: an address policy enforced where the socket is opened.

Design (see docs/http-tools.md):

- The check runs inside the connection layer: `RestfulApi` clients use a custom httpcore
  network backend (`GuardedAsyncBackend` / `GuardedSyncBackend`). When a new connection is
  needed, the backend resolves the host **once**, checks **every** resolved address against
  the policy (one bad record refuses the host), then opens the TCP connection to the vetted
  IP literal itself, so the OS never resolves the name a second time: the DNS answer that
  was checked is the one that is used (DNS pinning, no rebinding window). After connecting
  it verifies the socket's peer address is one of the vetted addresses. TLS still uses the
  original host name for SNI and certificate checks, because httpcore passes the URL host to
  `start_tls`.
- Literal hosts are checked after resolution too, so `2130706433`, `0x7f.1` or `127.1` cannot
  slip past a string check.
- Clients are built with `trust_env=False` (a proxy from the environment would bypass the
  check) and never follow redirects.
- IPv6 transition forms (IPv4-mapped, IPv4-compatible, 6to4, Teredo, NAT64, ISATAP) are
  decoded and their embedded IPv4 address is checked as well.
- Cloud metadata addresses stay blocked even with `allow_private_network=True`; only an
  explicit entry in `allowed_networks` (or `enabled=False`) lets them through.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any

import anyio.to_thread
import httpcore2
import httpx2
from pydantic import BaseModel, ConfigDict, PrivateAttr, field_validator

from .errors import SsrfBlockedError

__all__ = [
    "METADATA_ADDRESSES",
    "GuardedAsyncBackend",
    "GuardedSyncBackend",
    "Resolver",
    "SsrfPolicy",
    "check_address",
    "get_default_ssrf_policy",
    "set_default_ssrf_policy",
    "total_deadline",
]

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
Resolver = Callable[[str, int], Sequence[str]]
"""Maps (host, port) to IP address strings; the default uses `socket.getaddrinfo`."""

_BLOCKED_NETWORKS: tuple[IPNetwork, ...] = tuple(
    ipaddress.ip_network(n)
    for n in (
        "0.0.0.0/8",
        "10.0.0.0/8",
        "100.64.0.0/10",
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "192.0.0.0/24",
        "192.0.2.0/24",
        "198.18.0.0/15",
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",
        "240.0.0.0/4",
        "::/128",
        "::1/128",
        "fe80::/10",
        "fec0::/10",
        "fc00::/7",
        "100::/64",
        "2001::/32",
        "2001:db8::/32",
        "64:ff9b:1::/48",
        "ff00::/8",
    )
)

METADATA_ADDRESSES: frozenset[IPAddress] = frozenset(
    ipaddress.ip_address(a)
    for a in (
        "169.254.169.254",
        "169.254.170.2",
        "169.254.170.23",
        "168.63.129.16",
        "100.100.100.200",
        "192.0.0.192",
        "169.254.42.42",
        "fd00:ec2::254",
        "fd00:ec2::23",
        "fd20:ce::254",
        "fd00:42::42",
    )
)
"""Cloud metadata endpoints: refused even when private networks are allowed."""

_NAT64 = ipaddress.ip_network("64:ff9b::/96")
_IPV4_TRANSLATED = ipaddress.ip_network("::ffff:0:0:0/96")


class SsrfPolicy(BaseModel):
    """Which addresses an HTTP tool may connect to.

    - `enabled=False` turns the guard off completely (metadata addresses included).
    - `allow_private_network=True` allows private, loopback, link-local and other
      non-public addresses, but not cloud metadata endpoints.
    - `allowed_networks` (CIDRs or addresses) are allowed, metadata included: the explicit
      way to reach one internal service. Each address is judged alone: an IPv6 transition
      address (Teredo, 6to4, IPv4-mapped ...) is cleared only when it is listed itself or
      every IPv4 address it embeds is; an embedded address that is not listed is checked.
    - `allowed_hosts` are host names (exact, or `.example.com` for a domain and its
      subdomains) whose addresses may be private (metadata endpoints stay refused).
    - `blocked_networks` are refused in any case, even inside `allowed_networks` or
      embedded in an IPv6 address (only `enabled=False` turns them off).
    """

    model_config = ConfigDict(frozen=True)

    enabled: bool = True
    allow_private_network: bool = False
    allowed_networks: tuple[str, ...] = ()
    allowed_hosts: tuple[str, ...] = ()
    blocked_networks: tuple[str, ...] = ()

    _nets: dict[str, tuple[IPNetwork, ...]] = PrivateAttr(default_factory=dict)

    @field_validator("allowed_networks", "blocked_networks")
    @classmethod
    def _networks(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(str(ipaddress.ip_network(n, strict=False)) for n in v)

    @field_validator("allowed_hosts")
    @classmethod
    def _hosts(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        return tuple(h.lower().rstrip(".") for h in v)

    def host_allowed(self, host: str) -> bool:
        """Whether `host` is listed in `allowed_hosts`."""
        host = host.lower().rstrip(".")
        for entry in self.allowed_hosts:
            if entry.startswith("."):
                if host == entry[1:] or host.endswith(entry):
                    return True
            elif host == entry:
                return True
        return False

    def _parsed(self, name: str) -> tuple[IPNetwork, ...]:
        cache = self._nets
        if name not in cache:
            cache[name] = tuple(ipaddress.ip_network(n) for n in getattr(self, name))
        return cache[name]


_default_policy = SsrfPolicy()


def get_default_ssrf_policy() -> SsrfPolicy:
    """The process-wide policy used by cards that set none."""
    return _default_policy


def set_default_ssrf_policy(policy: SsrfPolicy) -> SsrfPolicy:
    """Replace the process-wide policy; returns the previous one (to restore it later)."""
    global _default_policy
    previous, _default_policy = _default_policy, policy
    return previous


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    found: list[ipaddress.IPv4Address] = []
    value = int(ip)
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if value >> 32 == 0 and value > 1:  # deprecated IPv4-compatible ::a.b.c.d
        found.append(ipaddress.IPv4Address(value))
    if ip in _IPV4_TRANSLATED or ip in _NAT64:
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    if (value >> 32) & 0xFDFFFFFF == 0x00005EFE:  # ISATAP interface identifier
        found.append(ipaddress.IPv4Address(value & 0xFFFFFFFF))
    return found


def _in(ip: IPAddress, networks: Iterable[IPNetwork]) -> bool:
    return any(ip.version == n.version and ip in n for n in networks)


def _private(ip: IPAddress) -> bool:
    return (
        _in(ip, _BLOCKED_NETWORKS)
        or not ip.is_global
        or ip.is_multicast
        or ip.is_reserved
        or ip.is_unspecified
        or ip.is_link_local
        or ip.is_loopback
        or ip.is_private
    )


def check_address(
    address: str | IPAddress, policy: SsrfPolicy | None = None, *, host_allowed: bool = False
) -> str | None:
    """Return why `policy` refuses `address`, or None when it may be contacted.

    `host_allowed` says the host name is listed in `policy.allowed_hosts`.
    """
    policy = policy or get_default_ssrf_policy()
    if not policy.enabled:
        return None
    if isinstance(address, str):
        try:
            ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])
        except ValueError:
            return f"{address!r} is not an IP address"
    else:
        ip = address
    embedded: list[IPAddress] = []
    if isinstance(ip, ipaddress.IPv6Address):
        embedded.extend(_embedded_ipv4(ip))
    candidates: list[IPAddress] = [ip, *embedded]
    blocked = policy._parsed("blocked_networks")
    for c in candidates:  # blocked wins over everything, allowed_networks included
        if _in(c, blocked):
            return f"{ip} is in a blocked network"
    allowed = policy._parsed("allowed_networks")
    # Each address is judged on its own: an allowed entry clears only the addresses it
    # covers. A transition address (Teredo, 6to4, mapped ...) is covered when it is listed
    # itself or when every IPv4 address it embeds is.
    cleared = {c for c in embedded if _in(c, allowed)}
    if _in(ip, allowed) or (embedded and len(cleared) == len(embedded)):
        cleared.add(ip)
    judged = [c for c in candidates if c not in cleared]
    for c in judged:
        if c in METADATA_ADDRESSES:
            shown = f"{ip} (embedding {c})" if c is not ip else str(ip)
            return f"{shown} is a cloud metadata address"
    if policy.allow_private_network or host_allowed:
        return None
    for c in judged:
        if _private(c):
            kind = (
                "loopback"
                if c.is_loopback
                else "link-local"
                if c.is_link_local
                else "multicast"
                if c.is_multicast
                else "unspecified"
                if c.is_unspecified
                else "private or reserved"
            )
            shown = f"{ip} (embedding {c})" if c is not ip else str(ip)
            return f"{shown} is a {kind} address"
    return None


def default_resolver(host: str, port: int) -> list[str]:
    """Resolve `host` with `socket.getaddrinfo` (A and AAAA records)."""
    infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    out: list[str] = []
    for info in infos:
        addr = str(info[4][0])
        if addr not in out:
            out.append(addr)
    return out


def _blocked(host: str, address: str, reason: str) -> SsrfBlockedError:
    return SsrfBlockedError(
        f"refused to connect to {host!r}: {reason}. The SSRF guard blocks private, loopback, "
        "link-local and metadata addresses; allow them explicitly with "
        "allow_private_network=True or an SsrfPolicy (allowed_networks / allowed_hosts).",
        host=host,
        address=address,
    )


def vet(host: str, addresses: Sequence[str], policy: SsrfPolicy) -> list[str]:
    """Check every resolved address of `host`; returns them or raises `SsrfBlockedError`."""
    if not addresses:
        raise httpcore2.ConnectError(f"could not resolve {host!r}")
    host_ok = policy.host_allowed(host)
    for addr in addresses:
        reason = check_address(addr, policy, host_allowed=host_ok)
        if reason is not None:
            raise _blocked(host, addr, reason)
    return list(addresses)


def _literal(host: str) -> str | None:
    try:
        return str(ipaddress.ip_address(host.strip("[]").split("%", 1)[0]))
    except ValueError:
        return None


def _resolve_sync(resolver: Resolver, host: str, port: int) -> list[str]:
    literal = _literal(host)
    if literal is not None:
        return [literal]
    try:
        return list(resolver(host, port))
    except OSError as e:
        raise httpcore2.ConnectError(f"could not resolve {host!r}: {e}") from e


def _check_peer(stream: Any, host: str, vetted: Sequence[str], policy: SsrfPolicy) -> None:
    peer = stream.get_extra_info("server_addr")
    if not peer:
        return
    peer_ip = _literal(str(peer[0]))
    if peer_ip is None or peer_ip not in {_literal(v) for v in vetted}:
        raise _blocked(host, str(peer[0]), "the connected peer is not the vetted address")
    reason = check_address(peer_ip, policy, host_allowed=policy.host_allowed(host))
    if reason is not None:
        raise _blocked(host, peer_ip, reason)


class GuardedAsyncBackend(httpcore2.AsyncNetworkBackend):
    """An httpcore network backend that connects only to addresses the policy allows."""

    def __init__(self, policy: SsrfPolicy, resolver: Resolver | None = None) -> None:
        self.policy = policy
        self.resolver: Resolver = resolver or default_resolver
        self._inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        """Resolve once, vet every address, connect to a vetted IP and verify the peer."""
        if not self.policy.enabled:
            return await self._inner.connect_tcp(host, port, timeout, local_address, socket_options)
        if _literal(host) is not None:
            addresses = [str(_literal(host))]
        else:
            addresses = await anyio.to_thread.run_sync(_resolve_sync, self.resolver, host, port)
        vetted = vet(host, addresses, self.policy)
        error: Exception | None = None
        for addr in vetted:
            try:
                stream = await self._inner.connect_tcp(
                    addr, port, timeout, local_address, socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as e:
                error = e
                continue
            try:
                _check_peer(stream, host, vetted, self.policy)
            except BaseException:
                await stream.aclose()
                raise
            return stream
        assert error is not None
        raise error

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.AsyncNetworkStream:
        """Unix sockets are local by definition: refused while the guard is on."""
        if self.policy.enabled:
            raise _blocked(path, "", "unix sockets are not allowed")
        return await self._inner.connect_unix_socket(path, timeout, socket_options)

    async def sleep(self, seconds: float) -> None:
        """Delegate to the anyio backend."""
        await self._inner.sleep(seconds)


_DEADLINE: ContextVar[float | None] = ContextVar("toolweave_http_deadline", default=None)


@contextlib.contextmanager
def total_deadline(deadline: float | None) -> Iterator[None]:
    """Within the block, every synchronous `GuardedSyncBackend` operation of this thread
    (DNS, connect, each read and write) ends by `deadline` (a `time.monotonic()` value):
    httpx has per-phase timeouts only, so a server trickling its status line, headers or
    chunk sizes would otherwise never be cut off."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _remaining(timeout: float | None, expired: type[Exception]) -> float | None:
    """`timeout` shortened to what is left of the deadline; `expired` once it has passed."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise expired("the total deadline of the HTTP call has passed")
    return left if timeout is None else min(timeout, left)


def _resolve_bounded(resolver: Resolver, host: str, port: int) -> list[str]:
    """`_resolve_sync`, given up on (ConnectTimeout) when the deadline passes first. The
    resolver cannot be interrupted: it finishes on a daemon thread and its answer is
    dropped."""
    if _DEADLINE.get() is None or _literal(host) is not None:
        return _resolve_sync(resolver, host, port)
    wait = _remaining(None, httpcore2.ConnectTimeout)
    done = threading.Event()
    outcome: list[Any] = []

    def run() -> None:
        try:
            outcome.append(_resolve_sync(resolver, host, port))
        except BaseException as e:  # handed to the waiting thread
            outcome.append(e)
        done.set()

    threading.Thread(target=run, name="toolweave-dns", daemon=True).start()
    if not done.wait(wait):
        raise httpcore2.ConnectTimeout(f"resolving {host!r} did not finish before the deadline")
    if isinstance(outcome[0], BaseException):
        raise outcome[0]
    result: list[str] = outcome[0]
    return result


class _DeadlineStream(httpcore2.NetworkStream):
    """A sync stream whose reads and writes end by the thread's `total_deadline`."""

    def __init__(self, inner: httpcore2.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _remaining(timeout, httpcore2.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _remaining(timeout, httpcore2.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore2.NetworkStream:
        left = _remaining(timeout, httpcore2.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class GuardedSyncBackend(httpcore2.NetworkBackend):
    """The synchronous twin of `GuardedAsyncBackend`; it also honours `total_deadline`."""

    def __init__(self, policy: SsrfPolicy, resolver: Resolver | None = None) -> None:
        self.policy = policy
        self.resolver: Resolver = resolver or default_resolver
        self._inner = httpcore2.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.NetworkStream:
        """Resolve once, vet every address, connect to a vetted IP and verify the peer."""
        addresses = _resolve_bounded(self.resolver, host, port)
        if self.policy.enabled:
            addresses = vet(host, addresses, self.policy)
        elif not addresses:
            raise httpcore2.ConnectError(f"could not resolve {host!r}")
        error: Exception | None = None
        for addr in addresses:
            try:
                left = _remaining(timeout, httpcore2.ConnectTimeout)
                stream = self._inner.connect_tcp(addr, port, left, local_address, socket_options)
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as e:
                error = e
                continue
            if self.policy.enabled:
                try:
                    _check_peer(stream, host, addresses, self.policy)
                except BaseException:
                    stream.close()
                    raise
            return _DeadlineStream(stream)
        assert error is not None
        raise error

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore2.NetworkStream:
        """Unix sockets are local by definition: refused while the guard is on."""
        if self.policy.enabled:
            raise _blocked(path, "", "unix sockets are not allowed")
        return self._inner.connect_unix_socket(path, timeout, socket_options)

    def sleep(self, seconds: float) -> None:
        """Delegate to the sync backend."""
        self._inner.sleep(seconds)


_LIMITS = httpx2.Limits(max_connections=100, max_keepalive_connections=20, keepalive_expiry=5.0)


class GuardedAsyncTransport(httpx2.AsyncHTTPTransport):
    """`httpx2.AsyncHTTPTransport` whose connection pool uses `GuardedAsyncBackend`."""

    def __init__(
        self,
        policy: SsrfPolicy,
        *,
        resolver: Resolver | None = None,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
    ) -> None:
        super().__init__(verify=verify, cert=cert, trust_env=False, limits=_LIMITS)
        # httpx2 does not expose httpcore's network_backend, so the pool is rebuilt with it.
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(verify=verify, cert=cert, trust_env=False),
            max_connections=_LIMITS.max_connections,
            max_keepalive_connections=_LIMITS.max_keepalive_connections,
            keepalive_expiry=_LIMITS.keepalive_expiry,
            network_backend=GuardedAsyncBackend(policy, resolver),
        )


class GuardedSyncTransport(httpx2.HTTPTransport):
    """`httpx2.HTTPTransport` whose connection pool uses `GuardedSyncBackend`."""

    def __init__(
        self,
        policy: SsrfPolicy,
        *,
        resolver: Resolver | None = None,
        verify: ssl.SSLContext | str | bool = True,
        cert: Any = None,
    ) -> None:
        super().__init__(verify=verify, cert=cert, trust_env=False, limits=_LIMITS)
        self._pool = httpcore2.ConnectionPool(
            ssl_context=httpx2.create_ssl_context(verify=verify, cert=cert, trust_env=False),
            max_connections=_LIMITS.max_connections,
            max_keepalive_connections=_LIMITS.max_keepalive_connections,
            keepalive_expiry=_LIMITS.keepalive_expiry,
            network_backend=GuardedSyncBackend(policy, resolver),
        )
