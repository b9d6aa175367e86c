"""Serving over MCP: calls per second and p50/p99 latency of `toolweave mcp serve` against
the `mcp` SDK's `MCPServer` and FastMCP 4, all serving the same function.

Each server is a subprocess on 127.0.0.1 serving `add(a, b)` (`benchmarks/_mcp_serve_server.py`)
over streamable HTTP with its defaults (sessions; SSE responses). The clients are the same
for every server, so the server is what differs: N concurrent asyncio clients (1, 16, 64),
each its own `mcp` SDK `ClientSession` over `streamable_http_client` (its own HTTP
connection; `initialize`, so the 2025-11-25 protocol every server speaks), call `add` in a
loop for a fixed time after a warm-up. The clients run in this process, on the same machine
as the server: on 2 CPUs they compete with it, so the figures are those of the pair, and the
ratio to the SDK's server (measured in the same round, servers in rotating order; the median
over the rounds) is the number to read. calls/s, p50 and p99 are medians over the rounds.

FastMCP runs from its own venv (`.venv-bench-serve/`, created by this script from
`benchmarks/mcp_serve_requirements.txt` on a full run when missing; never `.venv`). Several
workers are measured when `toolweave mcp serve` has a `--workers` option; until then that row
says it is not available.

Run with `python -m benchmarks.mcp_serve [--quick] [--write]` (`make bench-serve`); `--write`
puts the table into the "MCP serving" section of benchmarks/RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import os
import platform
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
SERVE_VENV = ROOT / ".venv-bench-serve"
REQUIREMENTS = ROOT / "benchmarks" / "mcp_serve_requirements.txt"
RESULTS = ROOT / "benchmarks" / "RESULTS.md"
SECTION = "## MCP serving"
BASELINE = "sdk"
ARGS = {"a": 2, "b": 3}


@dataclass
class Server:
    key: str
    label: str
    command: list[str] | None
    """None: not measured (`missing` says why)."""
    missing: str = ""
    version: str = ""
    url: str = ""
    process: subprocess.Popen[bytes] | None = None
    log: IO[bytes] | None = None


@dataclass
class Cell:
    """One server at one concurrency: a value per round."""

    rates: list[float] = field(default_factory=list)
    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    ratios: list[float] = field(default_factory=list)
    errors: int = 0


def _load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.1f} / {five:.1f} / {fifteen:.1f} (1/5/15 min) on {os.cpu_count()} CPUs"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _python_version_of(python: str, module: str) -> str | None:
    proc = subprocess.run(
        [python, "-c", f"import {module}; print({module}.__version__)"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None


def _fastmcp_python(*, install: bool) -> tuple[str | None, str]:
    """The interpreter that has FastMCP (its version), or None and why not."""
    for python in (sys.executable, str(SERVE_VENV / "bin" / "python")):
        if Path(python).exists() and (version := _python_version_of(python, "fastmcp")):
            return python, version
    if not install:
        return None, f"not installed (a full run installs it into {SERVE_VENV.name}/)"
    print(f"installing FastMCP into {SERVE_VENV.name}/ ...", file=sys.stderr)
    subprocess.run([sys.executable, "-m", "venv", str(SERVE_VENV)], check=True)
    venv_python = str(SERVE_VENV / "bin" / "python")
    subprocess.run(
        [venv_python, "-m", "pip", "install", "-q", "-r", str(REQUIREMENTS)],
        check=True,
    )
    version = _python_version_of(venv_python, "fastmcp")
    return (venv_python, version) if version else (None, "installing it failed")


def _toolweave_workers() -> bool:
    """Whether `toolweave mcp serve` can serve with several worker processes yet."""
    proc = subprocess.run(
        [sys.executable, "-m", "toolweave", "mcp", "serve", "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200", "NO_COLOR": "1"},
    )
    return "--workers" in proc.stdout


def servers(*, install: bool) -> list[Server]:
    """The servers to measure, the SDK's (the baseline) first."""
    from importlib.metadata import version

    from toolweave import __version__

    sdk_version = version("mcp")
    toolweave = [sys.executable, "-m", "toolweave", "mcp", "serve"]
    toolweave += ["benchmarks._mcp_serve_server:add", "--transport", "http"]
    found: list[Server] = [
        Server(
            "sdk",
            "mcp SDK MCPServer",
            [sys.executable, "-m", "benchmarks._mcp_serve_server", "sdk"],
            version=f"mcp {sdk_version}",
        ),
        Server("toolweave", "toolweave mcp serve", toolweave, version=f"toolweave {__version__}"),
    ]
    if _toolweave_workers():
        found.append(
            Server(
                "toolweave-2",
                "toolweave mcp serve --workers 2",
                [*toolweave, "--workers", "2"],
                version=f"toolweave {__version__}",
            )
        )
    else:
        found.append(
            Server(
                "toolweave-2",
                "toolweave mcp serve, 2 workers",
                None,
                missing="not available yet (`toolweave mcp serve` has no --workers option)",
            )
        )
    python, fast = _fastmcp_python(install=install)
    if python is None:
        found.append(Server("fastmcp", "FastMCP 4", None, missing=fast))
    else:
        command = [python, "-m", "benchmarks._mcp_serve_server", "fastmcp"]
        found.append(Server("fastmcp", "FastMCP 4", command, version=f"fastmcp {fast}"))
    return found


async def _ready(url: str, process: subprocess.Popen[bytes], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise RuntimeError(f"the server exited ({process.returncode}) before serving {url}")
        try:
            async with _session(url) as session:
                await session.call_tool("add", ARGS)
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.3)


@contextlib.contextmanager
def started(found: list[Server], logdir: Path) -> Iterator[list[Server]]:
    """Start every available server; stop them on the way out."""
    running = [s for s in found if s.command is not None]
    try:
        for server in running:
            assert server.command is not None
            port = _free_port()
            command = [
                *server.command,
                *(["--port", str(port)] if server.key.startswith("toolweave") else [str(port)]),
            ]
            server.log = (logdir / f"{server.key}.log").open("wb")
            server.process = subprocess.Popen(
                command, cwd=ROOT, stdout=server.log, stderr=subprocess.STDOUT
            )
            server.url = f"http://127.0.0.1:{port}/mcp"
        for server in running:
            assert server.process is not None
            asyncio.run(_ready(server.url, server.process, timeout=90))
        yield running
    finally:
        for server in running:
            if server.process is not None and server.process.poll() is None:
                server.process.terminate()
                try:
                    server.process.wait(10)
                except subprocess.TimeoutExpired:
                    server.process.kill()
                    server.process.wait()
            if server.log is not None:
                server.log.close()


@contextlib.asynccontextmanager
async def _session(url: str) -> Any:
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async with (
        streamable_http_client(url) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


async def window(
    url: str, clients: int, seconds: float, warmup: int
) -> tuple[float, list[float], int]:
    """`clients` sessions calling `add` for `seconds` after a warm-up: calls/s, latencies (s),
    failed calls."""
    latencies: list[float] = []
    errors = 0
    async with contextlib.AsyncExitStack() as stack:
        sessions = [await stack.enter_async_context(_session(url)) for _ in range(clients)]

        async def warm(session: Any) -> None:
            for _ in range(warmup):
                await session.call_tool("add", ARGS)

        await asyncio.gather(*(warm(s) for s in sessions))
        start = time.perf_counter()
        stop = start + seconds

        async def calls(session: Any) -> None:
            nonlocal errors
            while (t0 := time.perf_counter()) < stop:
                result = await session.call_tool("add", ARGS)
                if result.is_error or result.content[0].text != "5":
                    errors += 1
                else:
                    latencies.append(time.perf_counter() - t0)

        await asyncio.gather(*(calls(s) for s in sessions))
        elapsed = time.perf_counter() - start
    return len(latencies) / elapsed, latencies, errors


def measure(
    running: list[Server], levels: list[int], rounds: int, seconds: float, warmup: int
) -> dict[tuple[str, int], Cell]:
    cells: dict[tuple[str, int], Cell] = {}
    for clients in levels:
        for round_ in range(rounds):
            order = running[round_ % len(running) :] + running[: round_ % len(running)]
            rates: dict[str, float] = {}
            for server in order:
                rate, latencies, errors = asyncio.run(window(server.url, clients, seconds, warmup))
                cell = cells.setdefault((server.key, clients), Cell())
                cell.rates.append(rate)
                cell.p50.append(_quantile(latencies, 0.5) if latencies else float("nan"))
                cell.p99.append(_quantile(latencies, 0.99) if latencies else float("nan"))
                cell.errors += errors
                rates[server.key] = rate
            for key, rate in rates.items():
                if rates.get(BASELINE):
                    cells[(key, clients)].ratios.append(rate / rates[BASELINE])
            print(
                f"  {clients} clients, round {round_ + 1}/{rounds}: "
                + ", ".join(f"{k} {v:.0f}/s" for k, v in rates.items())
                + f"; load {os.getloadavg()[0]:.1f}",
                file=sys.stderr,
            )
    return cells


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms" if seconds == seconds else "-"


def table(
    found: list[Server], levels: list[int], cells: dict[tuple[str, int], Cell]
) -> list[list[str]]:
    """Rows: server, clients, calls/s, p50, p99, calls/s vs MCPServer, each round's calls/s."""
    rows = [
        ["server", "clients", "calls/s", "p50", "p99", "calls/s vs MCPServer", "calls/s per round"]
    ]
    for server in found:
        if server.command is None:
            rows.append([server.label, "-", server.missing, "", "", "", ""])
            continue
        for clients in levels:
            cell = cells.get((server.key, clients))
            if cell is None:
                rows.append([server.label, str(clients), "-", "", "", "", ""])
                continue
            ratio = f"{statistics.median(cell.ratios):.2f}x" if cell.ratios else "-"
            rows.append(
                [
                    server.label,
                    str(clients),
                    f"{statistics.median(cell.rates):.0f}"
                    + (f" ({cell.errors} failed)" if cell.errors else ""),
                    _ms(statistics.median(cell.p50)),
                    _ms(statistics.median(cell.p99)),
                    ratio,
                    "/".join(f"{r:.0f}" for r in cell.rates),
                ]
            )
    return rows


def print_table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for i, row in enumerate(rows):
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
        if i == 0:
            print("  ".join("-" * w for w in widths))


def markdown(
    rows: list[list[str]],
    found: list[Server],
    *,
    load: tuple[str, str],
    rounds: int,
    seconds: float,
) -> str:
    versions = ", ".join(s.version for s in found if s.version)
    intro = [
        "Not generated by `python -m benchmarks.peers`: measured with `python -m benchmarks.mcp_serve"
        f" --write` (`make bench-serve`; {versions}) on "
        f"{datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC, {platform.python_implementation()} "
        f"{platform.python_version()}, {os.cpu_count()} CPUs. **The machine is shared and was loaded**: "
        f"load average {load[0]} before, {load[1]} after, so absolute figures are low and noisy; read "
        "the ratios, which compare servers measured in the same round. Rerun to refresh this section "
        "(a regeneration of this file by `benchmarks.peers` drops it).",
        "Each server is a subprocess on 127.0.0.1 serving the same `add(a, b)` over streamable HTTP "
        "with its defaults; N concurrent asyncio clients, each an `mcp` SDK `ClientSession` over its "
        "own HTTP connection (`initialize`: protocol 2025-11-25), call it in a loop for "
        f"{seconds:g} s after a warm-up, in the benchmark's process on the same CPUs as the server. "
        f"Cells are medians over {rounds} rounds (servers in rotating order); the ratio is the "
        "median of the per-round ratios of calls/s to the SDK's `MCPServer`.",
    ]
    lines = [SECTION, ""]
    for paragraph in intro:
        lines += [*textwrap.wrap(paragraph, 95, break_on_hyphens=False), ""]
    lines += [
        "| " + " | ".join(rows[0]) + " |",
        "|" + "---|" * len(rows[0]),
    ]
    lines += ["| " + " | ".join(row) + " |" for row in rows[1:]]
    return "\n".join(lines) + "\n"


def write_section(text: str, path: Path = RESULTS) -> None:
    """Replace the "MCP serving" section of RESULTS.md (or append it)."""
    current = path.read_text()
    pattern = re.compile(rf"^{re.escape(SECTION)}\n.*?(?=^## |\Z)", re.S | re.M)
    if pattern.search(current):
        updated = pattern.sub(lambda _: text + "\n", current, count=1).rstrip("\n") + "\n"
    else:
        updated = current.rstrip("\n") + "\n\n" + text
    path.write_text(updated)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.mcp_serve")
    parser.add_argument("--quick", action="store_true", help="smoke run (1 and 4 clients, short)")
    parser.add_argument("--clients", type=int, nargs="*", help="concurrency levels (1 16 64)")
    parser.add_argument("--seconds", type=float, help="timed window per round (5)")
    parser.add_argument("--rounds", type=int, help="rounds per level (3)")
    parser.add_argument("--write", action="store_true", help="update benchmarks/RESULTS.md")
    parser.add_argument(
        "--no-install", action="store_true", help="do not create .venv-bench-serve for FastMCP"
    )
    args = parser.parse_args(argv)
    levels = args.clients or ([1, 4] if args.quick else [1, 16, 64])
    seconds = args.seconds or (0.5 if args.quick else 5.0)
    rounds = args.rounds or (1 if args.quick else 3)
    warmup = 2 if args.quick else 20
    before = _load()
    print(f"machine load: {before}", file=sys.stderr)
    found = servers(install=not args.quick and not args.no_install)
    with tempfile.TemporaryDirectory() as logdir, started(found, Path(logdir)) as running:
        cells = measure(running, levels, rounds, seconds, warmup)
    after = _load()
    rows = table(found, levels, cells)
    print_table(rows)
    print(
        f"\n{', '.join(s.version for s in found if s.version)}; {rounds} round(s) of {seconds:g} s "
        f"per server and level{' (quick)' if args.quick else ''}; machine load {before} before, "
        f"{after} after"
    )
    if args.write and not args.quick:
        write_section(markdown(rows, found, load=(before, after), rounds=rounds, seconds=seconds))
        print(f"wrote {RESULTS}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
