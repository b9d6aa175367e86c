"""Run the peer comparison: `python -m benchmarks.peers [--quick] [--only NAME ...]`.

Each library runs in its own subprocess (`benchmarks.peers.worker`), which measures the
plain baselines (W0 and friends) interleaved with the library's workloads. This process
collects their JSON, prints the table and, in a full run, writes `benchmarks/RESULTS.md`
and the chart `benchmarks/peers.png` (when matplotlib is installed). Libraries that are
not installed are reported as skipped.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from .adapters import ADAPTERS

ROOT = Path(__file__).resolve().parents[2]

LABELS = {
    "toolweave": "toolweave",
    "langchain": "langchain-core + langgraph",
    "pydantic_ai": "pydantic-ai-slim",
    "openai_agents": "openai-agents",
    "llama_index": "llama-index-core",
}

WORKLOADS: list[tuple[str, str]] = [
    ("I.import", "I import the package (fresh interpreter, CPU time)"),
    ("I.tool", "I import what declaring a tool needs (fresh interpreter, CPU time)"),
    ("W1.cold", "W1 declare, cold (new function, docstring of its own → tool + OpenAI schema)"),
    ("W1.cached", "W1 OpenAI schema of an existing tool"),
    ("W2", "W2 invoke sync: raw args → text"),
    ("W3", "W3 invoke async tool: raw args → text"),
    ("W3s", "W3s sync body from async code"),
    ("W4", "W4 invalid args → error text"),
    ("W5", "W5 50 × 20 ms async calls, one round (whole run)"),
    ("W5.c16", "W5 same, tuned: opt-in bound max_concurrency=16"),
    ("W6", "W6 loop overhead, per round (20 rounds)"),
    ("W7", "W7 stream aggregation (3 calls × ~2 KB, 1–4 char deltas), chunk by chunk"),
    ("W7.read", "W7 same, fed per network read (16 chunks)"),
    ("W9", "W9 MCP round trip over stdio: McpTool.ainvoke → SDK server"),
    ("W9.new", "W9 same, protocol='newest' (2026-07-28), against the SDK on it"),
    ("W9.serve", "W9 serving: SDK client → `toolweave mcp serve`"),
]
BASELINES: list[tuple[str, str]] = [
    ("W0", "W0 plain: json.loads + call + json.dumps"),
    ("W0a", "W0 plain async: json.loads + await + json.dumps"),
    ("W0t", "W0 plain: json.loads + to_thread + json.dumps"),
    ("W5.one", "one call of the 20 ms tool"),
    ("W6.plain", "plain loop, per round"),
    ("W7.plain", "plain accumulator"),
    ("W9.sdk", "W9 mcp SDK alone: ClientSession.call_tool → SDK MCPServer"),
    ("W9.sdk26", "W9 mcp SDK alone, on 2026-07-28 (the SDK Client's default)"),
]


def _scale_workloads(sizes: list[int]) -> list[tuple[str, str]]:
    out = []
    for what, label in (
        ("register", "W8 register {n} tools"),
        ("request", "W8 tool list for one request, {n} tools"),
        ("lookup", "W8 lookup by name, {n} tools"),
    ):
        for n in sizes:
            out.append((f"W8.{what}.{n}", label.format(n=f"{n:,}")))
    return out


def fmt_ns(ns: float) -> str:
    """A duration for humans."""
    if ns >= 1e9:
        return f"{ns / 1e9:.2f} s"
    if ns >= 1e6:
        return f"{ns / 1e6:.2f} ms"
    if ns >= 1e3:
        return f"{ns / 1e3:.1f} µs"
    return f"{ns:.0f} ns"


def run_worker(name: str, *, python: str, quick: bool, timeout: float) -> dict[str, Any]:
    """Run one library's worker and return its JSON (or a skipped/failed record)."""
    cmd = [python, "-m", "benchmarks.peers.worker", name]
    if quick:
        cmd.append("--quick")
    start = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, cwd=ROOT, capture_output=True, text=True, timeout=timeout, check=False
        )
    except subprocess.TimeoutExpired:
        return {"adapter": name, "failed": f"timed out after {timeout:.0f} s"}
    sys.stderr.write(proc.stderr if not quick else "")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not lines:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return {"adapter": name, "failed": f"exit {proc.returncode}: " + " | ".join(tail)}
    data: dict[str, Any] = json.loads(lines[-1])
    data["wall_s"] = time.perf_counter() - start
    return data


def _w0(data: dict[str, Any]) -> float:
    """The run's own plain W0 time: how disturbed the process was (inf when it did not run)."""
    r = _by_id(data).get("W0")
    return float(r["median_ns"]) if r and r["status"] == "ok" else float("inf")


def _by_id(data: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {r["id"]: r for r in data.get("results", ())}


def _cell(r: dict[str, Any] | None, tw: dict[str, Any] | None, is_tw: bool) -> str:
    if r is None:
        return "–"
    if r["status"] != "ok":
        return "n/a" if r["status"] == "n/a" else "error"
    text = fmt_ns(r["median_ns"])
    if is_tw:
        if r.get("ratio") is not None:
            text += f" ({r['ratio']:.2f}× {r['baseline']})"
    elif tw is not None and tw["status"] == "ok" and tw["median_ns"]:
        text += f" ({r['median_ns'] / tw['median_ns']:.2f}× tw)"
    return text


def targets(runs: dict[str, dict[str, Any]], sizes: list[int]) -> list[tuple[str, str, str]]:
    """(target, measured, verdict) rows for toolweave."""
    tw = _by_id(runs.get("toolweave", {}))
    rows: list[tuple[str, str, str]] = []

    def ratio(key: str) -> float | None:
        r = tw.get(key)
        return r["ratio"] if r and r["status"] == "ok" else None

    def verdict(ok: bool | None) -> str:
        return "–" if ok is None else ("met" if ok else "**missed**")

    def best_peer(key: str) -> tuple[str, float] | None:
        found = [
            (LABELS[name], float(r["median_ns"]))
            for name, data in runs.items()
            if name != "toolweave"
            for r in [_by_id(data).get(key)]
            if r and r["status"] == "ok"
        ]
        return min(found, key=lambda x: x[1]) if found else None

    def vs_peers(key: str, target: str) -> None:
        r = tw.get(key)
        if not r or r["status"] != "ok":
            return
        best = best_peer(key)
        measured = fmt_ns(r["median_ns"]) + (
            f" (best peer: {best[0]}, {fmt_ns(best[1])})" if best else " (no peer measured)"
        )
        rows.append(
            (target, measured, verdict(None if best is None else r["median_ns"] <= best[1]))
        )

    vs_peers("I.import", "import the package ≤ best peer")
    vs_peers("I.tool", "import what declaring a tool needs ≤ best peer")
    vs_peers("W1.cold", "W1 cold declaration ≤ best peer")
    w1 = tw.get("W1.cold")
    if w1 and w1["status"] == "ok":
        rows.append(
            (
                "W1 cold declaration ≤ 0.5 ms (aim)",
                fmt_ns(w1["median_ns"]),
                verdict(w1["median_ns"] <= 500_000),
            )
        )
    for key, base, limit in (("W2", "W0", 2), ("W3", "W0a", 2), ("W4", "W0", 3)):
        value = ratio(key)
        rows.append(
            (
                f"{key} ≤ {limit}× {base}",
                f"{value:.2f}×" if value is not None else "–",
                verdict(None if value is None else value <= limit),
            )
        )
    value = ratio("W5")
    rows.append(
        (
            "W5 ≤ 2× one call, default settings",
            f"{value:.2f}×" if value is not None else "–",
            verdict(None if value is None else value <= 2),
        )
    )
    w6 = tw.get("W6")
    if w6 and w6["status"] == "ok":
        peers = {
            name: _by_id(data).get("W6")
            for name, data in runs.items()
            if name != "toolweave" and data.get("results")
        }
        ok_peers = {n: r for n, r in peers.items() if r and r["status"] == "ok"}
        best = min((r["median_ns"] for r in ok_peers.values()), default=None)
        rows.append(
            ("W6 ≤ 50 µs per round", fmt_ns(w6["median_ns"]), verdict(w6["median_ns"] <= 50_000))
        )
        rows.append(
            (
                "W6 below every peer",
                f"fastest peer {fmt_ns(best)}" if best is not None else "no peer measured",
                verdict(None if best is None else w6["median_ns"] < best),
            )
        )
    value = ratio("W7.read")
    rows.append(
        (
            "W7 ≤ 1.2× plain accumulator (fed per network read, as the HTTP layer does)",
            f"{value:.2f}×" if value is not None else "–",
            verdict(None if value is None else value <= 1.2),
        )
    )
    value = ratio("W7")
    rows.append(
        (
            "W7 fed one chunk at a time (a PartialToolCall per fragment)",
            f"{value:.2f}×" if value is not None else "–",
            "(info)",
        )
    )
    for n in sizes:
        r = tw.get(f"W8.register.{n}")
        if r and r["status"] == "ok" and n >= 10_000:
            rows.append(
                (
                    f"W8 register {n:,} tools < 5 ms",
                    fmt_ns(r["median_ns"]),
                    verdict(r["median_ns"] < 5e6),
                )
            )
        r = tw.get(f"W8.request.{n}")
        if r and r["status"] == "ok":
            rows.append(
                (
                    f"W8 request building, {n:,} tools < 1 ms",
                    fmt_ns(r["median_ns"]),
                    verdict(r["median_ns"] < 1_000_000) if n >= 10_000 else "(info)",
                )
            )
    value = ratio("W9")
    rows.append(
        (
            "W9 McpTool round trip ≤ 1.1× the SDK's ClientSession.call_tool",
            f"{value:.2f}×" if value is not None else "–",
            verdict(None if value is None else value <= 1.1),
        )
    )
    newest, modern = ratio("W9.new"), ratio("W9.sdk26")
    if newest is not None and modern:
        rows.append(
            (
                "W9 with protocol='newest': McpTool vs the SDK, both on 2026-07-28",
                f"{newest:.2f}× (the protocol alone: {modern:.2f}× W9.sdk)",
                "(info)",
            )
        )
    serve, sdk = tw.get("W9.serve"), tw.get("W9.sdk")
    if serve and sdk and serve["status"] == sdk["status"] == "ok":
        rows.append(
            (
                "W9 serving: `toolweave mcp serve` calls/s vs the SDK's MCPServer (one client)",
                f"{1e9 / serve['median_ns']:.0f} vs {1e9 / sdk['median_ns']:.0f} calls/s "
                f"({ratio('W9.serve') or 0:.2f}× the SDK's time per call)",
                "(info)",
            )
        )
    return rows


def render(runs: dict[str, dict[str, Any]], *, quick: bool, command: str) -> str:
    """RESULTS.md."""
    names = [n for n in ADAPTERS if n in runs]
    sizes = next((d["sizes"] for d in runs.values() if d.get("sizes")), [])
    tw = _by_id(runs.get("toolweave", {}))
    lines: list[str] = []
    add = lines.append
    add("# Peer benchmarks (generated)")
    add("")
    add(
        f"Generated by `{command}` on {datetime.datetime.now(datetime.UTC):%Y-%m-%d %H:%M} UTC"
        f"{' (quick smoke run: not meaningful)' if quick else ''}. Do not edit: rerun."
    )
    add("")
    add("Reproduce with `make bench-peers` (pinned peers in `.venv-bench/`, see")
    add("`benchmarks/peers/requirements.txt`; adapters in `benchmarks/peers/adapters/`).")
    add("")
    add(
        f"Machine: {platform.platform()}, {platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()} ({platform.python_implementation()})."
    )
    add("")
    add("Each library ran in its own process, which also measured the plain baselines (W0 …);")
    add("all cases of a process ran round-robin, so noise hits them alike. Cells: median per")
    add("iteration; toolweave's cells give the ratio to its baseline, the peers' the ratio to")
    add("toolweave (`× tw`, < 1 means the peer is faster). Spreads are in the detail table.")
    add("The machine is shared (other builds and test suites run at the same time), so absolute")
    add("times are noisy, by a factor of 2 or more between runs: compare the ratios measured")
    add("within one process (`× W0` …), repeat the run, and read the p10–p90 spreads. Import")
    add("times (I) are CPU time in a fresh interpreter, the steadier measure on a busy machine.")
    passes = max((d.get("passes", 1) for d in runs.values()), default=1)
    if passes > 1:
        add(f"Every library ran {passes} times, in alternating order; each column is the run")
        add("whose own W0 baseline was fastest (the least disturbed by the shared machine).")
    add("")
    add("## Versions")
    add("")
    add("| library | packages | status |")
    add("|---|---|---|")
    for name in names:
        data = runs[name]
        versions = ", ".join(f"{k} {v}" for k, v in data.get("versions", {}).items()) or "–"
        status = (
            data.get("skipped") or data.get("failed") or (f"ran in {data.get('wall_s', 0):.0f} s")
        )
        add(f"| {LABELS[name]} | {versions} | {status} |")
    add("")
    add("## Targets (toolweave)")
    add("")
    add("| target | measured | verdict |")
    add("|---|---|---|")
    for target, measured, verdict in targets(runs, sizes):
        add(f"| {target} | {measured} | {verdict} |")
    add("")
    add("## Summary")
    add("")
    add("| workload | " + " | ".join(LABELS[n] for n in names) + " |")
    add("|---|" + "---|" * len(names))
    for key, label in WORKLOADS + _scale_workloads(sizes):
        cells = [_cell(_by_id(runs[n]).get(key), tw.get(key), n == "toolweave") for n in names]
        if all(c == "–" for c in cells):
            continue
        add(f"| {label} | " + " | ".join(cells) + " |")
    add("")
    add("Baselines, measured in each library's process (shows the noise between processes):")
    add("")
    add("| baseline | " + " | ".join(LABELS[n] for n in names) + " |")
    add("|---|" + "---|" * len(names))
    for key, label in BASELINES:
        cells = []
        for n in names:
            r = _by_id(runs[n]).get(key)
            cells.append(fmt_ns(r["median_ns"]) if r and r["status"] == "ok" else "–")
        add(f"| {label} | " + " | ".join(cells) + " |")
    add("")
    add("## Detail")
    add("")
    add("`× baseline` is the ratio to the named plain baseline measured in the same process;")
    add("`× toolweave` compares medians across processes. n/a and error rows give the reason.")
    add("")
    add(
        "| library | id | what exactly | median | p10–p90 | IQR | × baseline | × toolweave | note |"
    )
    add("|---|---|---|---|---|---|---|---|---|")
    for n in names:
        for r in runs[n].get("results", ()):
            if r["id"] in dict(BASELINES):
                continue
            if r["status"] != "ok":
                add(
                    f"| {LABELS[n]} | {r['id']} | {r['label']} | {r['status']} | | | | | {r['reason']} |"
                )
                continue
            t = tw.get(r["id"])
            vs = (
                f"{r['median_ns'] / t['median_ns']:.2f}×"
                if t and t["status"] == "ok" and t["median_ns"] and n != "toolweave"
                else ""
            )
            base = f"{r['ratio']:.2f}× {r['baseline']}" if r.get("ratio") is not None else ""
            add(
                f"| {LABELS[n]} | {r['id']} | {r['label']} | {fmt_ns(r['median_ns'])} | "
                f"{fmt_ns(r['p10_ns'])}–{fmt_ns(r['p90_ns'])} | {fmt_ns(r['p75_ns'] - r['p25_ns'])} | "
                f"{base} | {vs} | {r['note']} |"
            )
    add("")
    return "\n".join(lines)


def chart(runs: dict[str, dict[str, Any]], path: Path) -> bool:
    """Grouped bars: each library's median relative to toolweave, per workload (log scale)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    names = [n for n in ADAPTERS if n in runs and runs[n].get("results")]
    sizes = next((d["sizes"] for d in runs.values() if d.get("sizes")), [])
    tw = _by_id(runs.get("toolweave", {}))
    keys = [
        (k, label)
        for k, label in WORKLOADS + _scale_workloads(sizes)
        if k in tw and tw[k]["status"] == "ok" and k not in ("W5.c16", "W9.new", "W9.serve")
    ]
    fig, ax = plt.subplots(figsize=(max(10, len(keys) * 0.9), 6))
    width = 0.8 / max(1, len(names))
    for i, n in enumerate(names):
        res = _by_id(runs[n])
        xs, ys, lo, hi = [], [], [], []
        for j, (k, _) in enumerate(keys):
            r = res.get(k)
            if not r or r["status"] != "ok":
                continue
            base = tw[k]["median_ns"]
            xs.append(j + (i - (len(names) - 1) / 2) * width)
            ys.append(r["median_ns"] / base)
            lo.append((r["median_ns"] - r["p10_ns"]) / base)
            hi.append((r["p90_ns"] - r["median_ns"]) / base)
        ax.bar(xs, ys, width, label=LABELS[n], yerr=[lo, hi], capsize=2)
    ax.set_yscale("log")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels([k for k, _ in keys], rotation=45, ha="right")
    ax.set_ylabel("median time relative to toolweave (log; lower is faster)")
    ax.set_title("toolweave vs peers per workload (error bars: p10–p90); n/a bars are missing")
    ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.peers")
    parser.add_argument("--quick", action="store_true", help="smoke run; writes no files")
    parser.add_argument("--only", nargs="*", choices=ADAPTERS, help="libraries to run")
    parser.add_argument("--python", default=sys.executable, help="interpreter for the workers")
    parser.add_argument("--results", default=str(ROOT / "benchmarks" / "RESULTS.md"))
    parser.add_argument("--chart", default=str(ROOT / "benchmarks" / "peers.png"))
    parser.add_argument("--json", default=None, help="also save the raw worker output here")
    parser.add_argument("--no-write", action="store_true", help="print only")
    parser.add_argument(
        "--passes",
        type=int,
        default=2,
        help="runs per library, in alternating order; the one with the fastest W0 is kept",
    )
    args = parser.parse_args(argv)
    names = args.only or list(ADAPTERS)
    passes = 1 if args.quick else max(1, args.passes)
    runs: dict[str, dict[str, Any]] = {}
    for number in range(passes):
        for name in names if number % 2 == 0 else reversed(names):
            print(f"== {LABELS[name]} (pass {number + 1}/{passes})", file=sys.stderr, flush=True)
            data = run_worker(
                name, python=args.python, quick=args.quick, timeout=300 if args.quick else 900
            )
            data["passes"] = passes
            status = data.get("skipped") or data.get("failed")
            if status:
                print(f"   {status}", file=sys.stderr, flush=True)
            if name not in runs or _w0(data) < _w0(runs[name]):
                runs[name] = data
    command = "python -m benchmarks.peers" + (" --quick" if args.quick else "")
    text = render(runs, quick=args.quick, command=command)
    print(text)
    if args.json:
        Path(args.json).write_text(json.dumps(runs, indent=1))
    if not args.quick and not args.no_write:
        Path(args.results).write_text(text)
        print(f"wrote {args.results}", file=sys.stderr)
        if chart(runs, Path(args.chart)):
            print(f"wrote {args.chart}", file=sys.stderr)
        else:
            print("matplotlib not installed: no chart", file=sys.stderr)
    failed = [n for n, d in runs.items() if d.get("failed")]
    return 1 if "toolweave" in failed else 0


if __name__ == "__main__":
    sys.exit(main())
