"""`toolweave runs` against a database that accepts the connection and never answers (a real
loopback TCP server that reads nothing and writes nothing): the command ends with a clear
error, within the client's bounded connect timeout, instead of waiting forever."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator

import pytest

from .test_first_hour import run

pytest.importorskip("dbos", reason="the durable extra (dbos) is not installed")


@pytest.fixture
def silent_database() -> Iterator[str]:
    """A URL whose server accepts every connection and never sends a byte."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            held.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    port = server.getsockname()[1]
    try:
        yield f"postgresql://tw:s3cret-pw@127.0.0.1:{port}/toolweave"
    finally:
        stop.set()
        thread.join(timeout=5)
        for conn in held:
            conn.close()
        server.close()


def test_runs_approve_ends_with_a_clear_error_when_the_database_never_answers(
    silent_database: str,
) -> None:
    started = time.monotonic()
    done = run("runs", "approve", "conv", "p1", "--db", silent_database)  # subprocess timeout 120s
    elapsed = time.monotonic() - started
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert done.stdout == ""
    assert "error: cannot open the database" in done.stderr
    assert "connection timeout expired" in done.stderr
    assert "connections are given 10s" in done.stderr
    assert "s3cret-pw" not in done.stderr and "tw:***@127.0.0.1" in done.stderr
    assert elapsed < 60  # generous: the bound is the 10 s connect timeout, not "forever"


def test_the_client_bounds_its_connect_timeout(silent_database: str) -> None:
    from toolweave.durable import ConversationClient, DurableDatabaseError

    started = time.monotonic()
    with pytest.raises(DurableDatabaseError, match="connection timeout expired") as info:
        ConversationClient(silent_database, app_name="twtest", connect_timeout=2)
    assert time.monotonic() - started < 30  # generous; unbounded, DBOS retries for minutes
    assert "s3cret-pw" not in str(info.value) and "s3cret-pw" not in info.value.url
    assert info.value.__cause__ is not None
