"""Fixtures for the durable tests: one real PostgreSQL server per session (a database per
test), and real worker subprocesses (tests/durable/worker.py), always stopped."""

from __future__ import annotations

import hashlib
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

pytest.importorskip("dbos", reason="the durable extra (dbos) is not installed")

from .pg import LocalPostgres, PostgresUnavailable, postgres_bindir

WORKER = Path(__file__).with_name("worker.py")
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def postgres() -> Iterator[LocalPostgres]:
    """A PostgreSQL server on a free loopback port (installed by scripts/ensure-postgres.sh
    if needed); skipped with the reason only when it cannot be installed or started."""
    try:
        server = LocalPostgres(postgres_bindir())
    except PostgresUnavailable as e:
        pytest.skip(f"PostgreSQL unavailable: {e}")
    try:
        server.start()
    except PostgresUnavailable as e:
        server.stop()
        pytest.skip(f"PostgreSQL would not start: {e}")
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def db_url(postgres: LocalPostgres, request: pytest.FixtureRequest) -> str:
    """A fresh database for this test."""
    digest = hashlib.sha1(request.node.nodeid.encode()).hexdigest()[:10]
    name = re.sub(r"[^a-z0-9_]", "_", request.node.name.lower())[:30]
    return postgres.url_for(f"tw_{name}_{digest}")


class Log:
    """The log file the workers append to: one event per line."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def lines(self) -> list[str]:
        return self.path.read_text().splitlines() if self.path.exists() else []

    def matching(self, prefix: str) -> list[str]:
        return [line for line in self.lines() if line.startswith(prefix)]

    def wait_for(self, prefix: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = self.matching(prefix)
            if found:
                return found[0]
            time.sleep(0.05)
        raise TimeoutError(f"no line starting with {prefix!r} within {timeout}s: {self.lines()}")


class Workers:
    """Starts worker subprocesses; stops every one of them at the end of the test."""

    def __init__(self, db_url: str, app: str, tmp: Path) -> None:
        self.db_url = db_url
        self.app = app
        self.tmp = tmp
        self.log = Log(tmp / "events.log")
        self.procs: dict[str, subprocess.Popen[bytes]] = {}

    def start(
        self,
        executor: str,
        *,
        tool_queue: bool = False,
        hang: str | None = None,
        recover: list[str] | None = None,
        wait: bool = True,
    ) -> subprocess.Popen[bytes]:
        args = [
            sys.executable, str(WORKER), "--db", self.db_url, "--app", self.app,
            "--executor", executor, "--log", str(self.log.path),
        ]  # fmt: skip
        if tool_queue:
            args.append("--tool-queue")
        if hang:
            args += ["--hang", hang]
        if recover:
            args += ["--recover", *recover]
        out = open(self.tmp / f"{executor}.out", "ab")  # noqa: SIM115
        # this checkout's package first, whatever an installed (editable) copy points at
        path = os.pathsep.join([str(REPO / "src"), str(REPO / "tests" / "durable")])
        env = dict(os.environ, PYTHONPATH=path)
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        out.close()
        self.procs[executor] = proc
        if wait:
            self.wait_ready(executor)
        return proc

    def wait_ready(self, executor: str, timeout: float = 90.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.log.matching(f"ready {executor} "):
                return
            proc = self.procs[executor]
            if proc.poll() is not None:
                raise RuntimeError(f"worker {executor} exited early:\n{self.output(executor)}")
            time.sleep(0.05)
        raise TimeoutError(
            f"worker {executor} not ready after {timeout}s:\n{self.output(executor)}"
        )

    def output(self, executor: str) -> str:
        path = self.tmp / f"{executor}.out"
        return path.read_text(errors="replace")[-4000:] if path.exists() else ""

    def kill(self, executor: str) -> None:
        """SIGKILL: no cleanup, exactly like a crash."""
        proc = self.procs[executor]
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)

    def stop_all(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=15)


@pytest.fixture
def workers(db_url: str, tmp_path: Path) -> Iterator[Workers]:
    """Worker subprocesses sharing this test's database (app name `twtest`)."""
    w = Workers(db_url, "twtest", tmp_path)
    try:
        yield w
    finally:
        w.stop_all()


@pytest.fixture
def client_factory(db_url: str) -> Iterator[Callable[[], object]]:
    """`ConversationClient`s on this test's database, closed at the end."""
    from toolweave.durable import ConversationClient

    made: list[ConversationClient] = []

    def make() -> ConversationClient:
        c = ConversationClient(db_url, app_name="twtest")
        made.append(c)
        return c

    try:
        yield make
    finally:
        for c in made:
            c.close()
