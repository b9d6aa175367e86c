"""Where a served MCP server keeps what its worker processes must share.

A server run by several worker processes (``toolweave mcp serve --workers N``, or
``uvicorn app:app --workers N``) answers each request in whichever worker the connection
reached, so per-process memory is not enough for rate-limit counters or cached results.
`RateLimitMiddleware` and `CachingMiddleware` take a ``store=``: any `McpStore`.

- `MemoryStore`: this process only (what the middleware uses without a store);
- `SqliteStore`: a SQLite file every worker on one host opens (WAL mode; each update is
  one ``BEGIN IMMEDIATE`` transaction, so concurrent workers never lose a count).

A store of your own (Redis, PostgreSQL) implements the three methods of `McpStore`.
"""

from __future__ import annotations

import asyncio
import math
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from pathlib import Path
from typing import Protocol, runtime_checkable

__all__ = ["McpStore", "MemoryStore", "SqliteStore", "open_store"]


@runtime_checkable
class McpStore(Protocol):
    """Shared state of one deployment: token buckets and values with an expiry."""

    async def take(self, key: str, *, rate: float, per: float, burst: float) -> float:
        """Take one token from the bucket `key` (refilled at `rate` per `per` seconds, at
        most `burst`): 0.0 when taken, else the seconds until one is there (none taken)."""
        ...

    async def get(self, key: str) -> str | None:
        """The value stored under `key`, unless missing or expired."""
        ...

    async def put(self, key: str, value: str, ttl: float) -> None:
        """Store `value` under `key` for `ttl` seconds."""
        ...


def _refill(
    tokens: float, last: float, now: float, rate: float, per: float, burst: float
) -> tuple[float, float]:
    """The bucket after the refill to `now`, and the wait (0.0: a token was taken)."""
    tokens = min(burst, tokens + max(0.0, now - last) * rate / per)
    if tokens < 1:
        return tokens, (1 - tokens) * per / rate
    return tokens - 1, 0.0


class MemoryStore:
    """An `McpStore` in this process's memory (at most `max_keys` of each kind)."""

    def __init__(self, *, max_keys: int = 10_000, clock: Callable[[], float] = time.monotonic):
        self.max_keys = max_keys
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._values: OrderedDict[str, tuple[float, str]] = OrderedDict()

    async def take(self, key: str, *, rate: float, per: float, burst: float) -> float:
        """See `McpStore.take`."""
        now = self.clock()
        tokens, last = self._buckets.pop(key, (burst, now))
        tokens, wait = _refill(tokens, last, now, rate, per, burst)
        self._buckets[key] = (tokens, now)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)  # the longest idle client starts afresh
        return wait

    async def get(self, key: str) -> str | None:
        """See `McpStore.get`."""
        found = self._values.get(key)
        if found is None or found[0] <= self.clock():
            return None
        self._values.move_to_end(key)
        return found[1]

    async def put(self, key: str, value: str, ttl: float) -> None:
        """See `McpStore.put`."""
        self._values[key] = (self.clock() + ttl, value)
        self._values.move_to_end(key)
        while len(self._values) > self.max_keys:
            self._values.popitem(last=False)


_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS toolweave_buckets"
    " (key TEXT PRIMARY KEY, tokens REAL NOT NULL, last REAL NOT NULL)",
    "CREATE TABLE IF NOT EXISTS toolweave_values"
    " (key TEXT PRIMARY KEY, expires REAL NOT NULL, value TEXT NOT NULL)",
)


class SqliteStore:
    """An `McpStore` in a SQLite file shared by every worker process on one host.

    Times are wall-clock (``time.time``: the same in every process). Each operation runs
    in a worker thread as one ``BEGIN IMMEDIATE`` transaction; expired values are swept
    now and then. Not for a network file system: SQLite's locks need a local disk.
    """

    def __init__(self, path: str | Path, *, timeout: float = 30.0) -> None:
        self.path = Path(path)
        self.timeout = timeout
        self._local = threading.local()
        self._puts = 0
        with self._transaction() as db:
            for statement in _SCHEMA:
                db.execute(statement)

    def _db(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self.path, timeout=self.timeout, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            self._local.db = db
        return db

    class _Tx:
        def __init__(self, db: sqlite3.Connection) -> None:
            self.db = db

        def __enter__(self) -> sqlite3.Connection:
            self.db.execute("BEGIN IMMEDIATE")
            return self.db

        def __exit__(self, kind: object, *rest: object) -> None:
            self.db.execute("COMMIT" if kind is None else "ROLLBACK")

    def _transaction(self) -> SqliteStore._Tx:
        return SqliteStore._Tx(self._db())

    def _take(self, key: str, rate: float, per: float, burst: float) -> float:
        now = time.time()
        with self._transaction() as db:
            row = db.execute(
                "SELECT tokens, last FROM toolweave_buckets WHERE key = ?", (key,)
            ).fetchone()
            tokens, last = (float(row[0]), float(row[1])) if row else (burst, now)
            tokens, wait = _refill(tokens, last, now, rate, per, burst)
            db.execute(
                "INSERT OR REPLACE INTO toolweave_buckets (key, tokens, last) VALUES (?, ?, ?)",
                (key, tokens, now),
            )
        return wait

    def _get(self, key: str) -> str | None:
        row = (
            self._db()
            .execute(
                "SELECT value FROM toolweave_values WHERE key = ? AND expires > ?",
                (key, time.time()),
            )
            .fetchone()
        )
        return None if row is None else str(row[0])

    def _put(self, key: str, value: str, ttl: float) -> None:
        now = time.time()
        self._puts += 1
        with self._transaction() as db:
            db.execute(
                "INSERT OR REPLACE INTO toolweave_values (key, expires, value) VALUES (?, ?, ?)",
                (key, now + ttl if math.isfinite(ttl) else 1e308, value),
            )
            if self._puts % 256 == 1:
                db.execute("DELETE FROM toolweave_values WHERE expires <= ?", (now,))

    async def take(self, key: str, *, rate: float, per: float, burst: float) -> float:
        """See `McpStore.take`."""
        return await asyncio.to_thread(self._take, key, rate, per, burst)

    async def get(self, key: str) -> str | None:
        """See `McpStore.get`."""
        return await asyncio.to_thread(self._get, key)

    async def put(self, key: str, value: str, ttl: float) -> None:
        """See `McpStore.put`."""
        await asyncio.to_thread(self._put, key, value, ttl)


def open_store(spec: str) -> McpStore:
    """The store a command-line spec names: ``memory``, ``sqlite:PATH`` or a ``.db`` /
    ``.sqlite`` file path."""
    if spec == "memory":
        return MemoryStore()
    if spec.startswith("sqlite:"):
        return SqliteStore(spec.removeprefix("sqlite:").removeprefix("//"))
    if spec.endswith((".db", ".sqlite", ".sqlite3")):
        return SqliteStore(spec)
    raise ValueError(f"a store is memory, sqlite:PATH or a .db file, not {spec!r}")
