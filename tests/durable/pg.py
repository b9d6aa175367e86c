"""A throwaway PostgreSQL server for the durable tests: initdb into a temporary directory,
`pg_ctl start` on a free loopback port with a private socket directory, always stopped."""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ENSURE = REPO / "scripts" / "ensure-postgres.sh"


class PostgresUnavailable(RuntimeError):
    """PostgreSQL is not installed and could not be installed."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def postgres_bindir() -> Path:
    """The directory with initdb/pg_ctl, installing PostgreSQL via scripts/ensure-postgres.sh."""
    try:
        out = subprocess.run(
            ["bash", str(ENSURE)], capture_output=True, text=True, timeout=600, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise PostgresUnavailable(f"scripts/ensure-postgres.sh could not run: {e}") from e
    if out.returncode != 0:
        raise PostgresUnavailable(
            f"scripts/ensure-postgres.sh failed ({out.returncode}): {out.stderr.strip()[-2000:]}"
        )
    return Path(out.stdout.strip().splitlines()[-1])


class LocalPostgres:
    """One PostgreSQL server on 127.0.0.1, data and socket in a temporary directory."""

    def __init__(self, bindir: Path) -> None:
        self.bindir = bindir
        self.port = _free_port()
        self.root = Path(tempfile.mkdtemp(prefix="toolweave-pg-"))
        self.data = self.root / "data"
        self.sockets = self.root / "sock"
        self.log = self.root / "server.log"
        self._prefix: list[str] = []
        self.started = False
        if os.geteuid() == 0:
            # initdb and postgres refuse to run as root: run them as the `postgres` user.
            try:
                user = pwd.getpwnam("postgres")
            except KeyError as e:
                raise PostgresUnavailable("running as root and there is no 'postgres' user") from e
            self._prefix = ["runuser", "-u", "postgres", "--"]
            os.chmod(self.root, 0o755)
            self.sockets.mkdir()
            os.chown(self.root, user.pw_uid, user.pw_gid)
            os.chown(self.sockets, user.pw_uid, user.pw_gid)
        else:
            self.sockets.mkdir()

    @property
    def url(self) -> str:
        """The URL of the `toolweave` database (DBOS creates databases on first use)."""
        return self.url_for("toolweave")

    def url_for(self, database: str) -> str:
        """The URL of database `database` on this server."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def _run(self, *args: str, timeout: float = 120) -> None:
        out = subprocess.run(
            [*self._prefix, *args], capture_output=True, text=True, timeout=timeout, check=False
        )
        if out.returncode != 0:
            raise PostgresUnavailable(
                f"{' '.join(args[:2])} failed: {out.stdout[-1500:]} {out.stderr[-1500:]}"
            )

    def start(self) -> LocalPostgres:
        """initdb (trust auth, user `postgres`) and start the server; waits until ready."""
        self._run(
            str(self.bindir / "initdb"),
            "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8",
            "--no-sync", "--locale=C",
        )  # fmt: skip
        options = (
            f"-c listen_addresses=127.0.0.1 -c port={self.port} "
            f"-c unix_socket_directories={self.sockets} -c fsync=off "
            "-c synchronous_commit=off -c full_page_writes=off -c max_connections=300"
        )
        self.started = True
        self._run(
            str(self.bindir / "pg_ctl"), "-D", str(self.data), "-l", str(self.log),
            "-o", options, "-w", "-t", "60", "start",
        )  # fmt: skip
        return self

    def stop(self) -> None:
        """Stop the server (fast, then immediate) and delete its directory."""
        if self.started:
            for mode in ("fast", "immediate"):
                try:
                    self._run(
                        str(self.bindir / "pg_ctl"), "-D", str(self.data), "-m", mode,
                        "-w", "-t", "30", "stop", timeout=60,
                    )  # fmt: skip
                    break
                except (PostgresUnavailable, subprocess.TimeoutExpired):
                    continue
            self.started = False
        shutil.rmtree(self.root, ignore_errors=True)
