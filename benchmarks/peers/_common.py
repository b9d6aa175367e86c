"""Inputs, baselines and the measurement harness shared by every peer adapter.

A workload is a `Case`: `run(n)` executes the body `n` times and returns the elapsed
nanoseconds. `measure` calibrates each case (so one batch lasts about `target` seconds), then
runs all cases of the process round-robin, `repeats` times, so machine noise hits every case
alike; it reports the median per iteration and its p10/p25/p75/p90 over the batches. A ratio
to a baseline is the median, over the rounds both ran, of the case's time divided by the
baseline's time in the same round (drift between rounds cancels out).
"""

from __future__ import annotations

import asyncio
import gc
import json
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from . import _subject

__all__ = [
    "BAD_ARGS",
    "RAW_ARGS",
    "W5_CALLS",
    "W6_ROUNDS",
    "W7_CALLS",
    "W7_READ",
    "Case",
    "Env",
    "Result",
    "async_case",
    "baseline_cases",
    "import_cases",
    "measure",
    "na",
    "stream_chunks",
    "sync_case",
]

RAW_ARGS = (
    '{"origin": "CDG", "max_stops": 1, "budget": 450.5, "refundable": false, '
    '"airlines": ["AF", "KL"], "cabin": "business"}'
)
"""W2/W3: valid arguments as the model sends them (`note` left to its default)."""

BAD_ARGS = '{"origin": "CDG", "max_stops": "two", "budget": 450.5, "refundable": false, "cabin": "business"}'
"""W4: `max_stops` has the wrong type and `airlines` is missing."""

W5_CALLS = 50
W6_ROUNDS = 20
W7_CALLS = 3
W7_READ = 16
"""Chunks per network read for toolweave's W7.read (about 2.5 KB of SSE)."""


@dataclass
class Env:
    """What an adapter gets: the process's event loop, the mode and the W8 sizes."""

    loop: asyncio.AbstractEventLoop
    quick: bool
    sizes: tuple[int, ...]


@dataclass
class Case:
    """One workload of one library. `per` divides the time of one iteration (W6: rounds)."""

    id: str
    label: str
    run: Callable[[int], int] | None
    baseline: str | None = None
    per: int = 1
    note: str = ""
    reason: str = ""
    """Why the workload is n/a (then `run` is None)."""
    max_number: int = 100_000
    rounds: int | None = None
    """Rounds to run instead of the default 15 (W9: more, shorter batches, since a pair of
    processes is noisier than one)."""


@dataclass
class Result:
    """A measured (or n/a) case, as written to the worker's JSON."""

    id: str
    label: str
    status: str
    median_ns: float = 0.0
    p10_ns: float = 0.0
    p25_ns: float = 0.0
    p75_ns: float = 0.0
    p90_ns: float = 0.0
    batches: int = 0
    number: int = 0
    baseline: str | None = None
    ratio: float | None = None
    note: str = ""
    reason: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def sync_case(
    id: str,
    label: str,
    body: Callable[[], object],
    *,
    baseline: str | None = None,
    per: int = 1,
    note: str = "",
    max_number: int = 100_000,
) -> Case:
    """A case timing a synchronous callable."""

    def run(n: int) -> int:
        start = time.perf_counter_ns()
        for _ in range(n):
            body()
        return time.perf_counter_ns() - start

    return Case(id, label, run, baseline, per, note, max_number=max_number)


def async_case(
    id: str,
    label: str,
    body: Callable[[], Awaitable[object]],
    loop: asyncio.AbstractEventLoop,
    *,
    baseline: str | None = None,
    per: int = 1,
    note: str = "",
    max_number: int = 100_000,
) -> Case:
    """A case timing an async callable: `n` awaits inside the process's running loop."""

    async def batch(n: int) -> int:
        start = time.perf_counter_ns()
        for _ in range(n):
            await body()
        return time.perf_counter_ns() - start

    def run(n: int) -> int:
        return loop.run_until_complete(batch(n))

    return Case(id, label, run, baseline, per, note, max_number=max_number)


_IMPORT_CODE = "import time; t = time.process_time_ns(); {stmt}; print(time.process_time_ns() - t)"


def import_cases(statements: tuple[str, str]) -> list[Case]:
    """I.import / I.tool: the CPU time of an import statement in a fresh interpreter (CPU
    time, not wall time: on a shared machine it is the steadier measure of the same work)."""

    def case(id: str, label: str, stmt: str) -> Case:
        def run(n: int) -> int:
            total = 0
            for _ in range(n):
                out = subprocess.run(
                    [sys.executable, "-c", _IMPORT_CODE.format(stmt=stmt)],
                    capture_output=True,
                    text=True,
                    check=True,
                    timeout=120,
                )
                total += int(out.stdout.strip().splitlines()[-1])
            return total

        return Case(id, f"{label}: `{stmt}`", run, max_number=3)

    package, tool_import = statements
    return [
        case("I.import", "import the package", package),
        case("I.tool", "import what declaring a tool needs", tool_import),
    ]


def na(id: str, label: str, reason: str) -> Case:
    """A workload the library cannot run honestly."""
    return Case(id, label, None, reason=reason)


# --- baselines (measured in every process, interleaved with the library's cases) -----------


def _plain_accumulate(chunks: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    calls: dict[int, list[Any]] = {}
    for chunk in chunks:
        for choice in chunk["choices"]:
            for frag in choice["delta"].get("tool_calls") or ():
                call = calls.get(frag["index"])
                if call is None:
                    call = calls[frag["index"]] = [frag.get("id"), None, []]
                fn = frag.get("function") or {}
                if fn.get("name"):
                    call[1] = fn["name"]
                if fn.get("arguments"):
                    call[2].append(fn["arguments"])
    return [(c[0], c[1], "".join(c[2])) for c in calls.values()]


def baseline_cases(env: Env) -> list[Case]:
    """W0 and the plain-Python floors of W5 to W8, for every process."""
    fn = _subject.search_flights
    afn = _subject.asearch_flights

    def w0() -> str:
        return json.dumps(fn(**json.loads(RAW_ARGS)))

    async def w0a() -> str:
        return json.dumps(await afn(**json.loads(RAW_ARGS)))

    async def w0t() -> str:
        return json.dumps(await asyncio.to_thread(fn, **json.loads(RAW_ARGS)))

    async def one_call() -> str:
        return await _subject.wait_20ms(0)

    tools = {"ping": _subject.ping}
    turns = [
        {"tool_calls": [{"id": f"call_{r}", "name": "ping", "arguments": f'{{"n": {r}}}'}]}
        for r in range(W6_ROUNDS)
    ] + [{"content": "done"}]

    async def plain_loop() -> list[Any]:
        messages: list[Any] = [{"role": "user", "content": "go"}]
        for turn in turns:  # the "model" answers from its script
            messages.append(turn)
            calls = turn.get("tool_calls")
            if not calls:
                return messages
            for call in calls:
                out = await tools[call["name"]](**json.loads(call["arguments"]))
                messages.append({"role": "tool", "id": call["id"], "content": json.dumps(out)})
        return messages

    chunks = stream_chunks()
    return [
        sync_case("W0", "plain: json.loads + call + json.dumps", w0),
        async_case("W0a", "plain async: json.loads + await + json.dumps", w0a, env.loop),
        async_case("W0t", "plain: json.loads + to_thread + json.dumps", w0t, env.loop),
        async_case("W5.one", "one call of the 20 ms tool (await)", one_call, env.loop),
        async_case(
            "W6.plain",
            f"plain loop: {W6_ROUNDS} rounds, dict dispatch",
            plain_loop,
            env.loop,
            per=W6_ROUNDS,
        ),
        sync_case(
            "W7.plain", "plain accumulator (dict of lists, join)", lambda: _plain_accumulate(chunks)
        ),
    ]


# --- W7 input --------------------------------------------------------------------------------


def _arguments(i: int) -> str:
    rng = random.Random(i)
    words = ["alpha", "beta", "gamma", "delta", "épsilon", "zeta", "eta", "theta", '"quoted"']
    items = []
    size = 0
    while size < 2000:
        item = " ".join(rng.choice(words) for _ in range(rng.randint(2, 6)))
        items.append(item)
        size += len(item) + 4
    return json.dumps({"query": f"call {i}", "items": items}, ensure_ascii=False)


def stream_chunks() -> list[dict[str, Any]]:
    """W7: an OpenAI Chat Completions stream (decoded chunks) carrying 3 tool calls with about
    2 KB of arguments each, in 1-4 character deltas (seeded, identical for every library)."""
    rng = random.Random(7)
    base = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "created": 1, "model": "m"}

    def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {**base, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}

    out = [chunk({"role": "assistant", "content": None})]
    for i in range(W7_CALLS):
        args = _arguments(i)
        first = {
            "index": i,
            "id": f"call_{i}",
            "type": "function",
            "function": {"name": f"tool_{i}", "arguments": ""},
        }
        out.append(chunk({"tool_calls": [first]}))
        pos = 0
        while pos < len(args):
            step = rng.randint(1, 4)
            piece = args[pos : pos + step]
            pos += step
            out.append(chunk({"tool_calls": [{"index": i, "function": {"arguments": piece}}]}))
    out.append(chunk({}, "tool_calls"))
    return out


def expected_stream_arguments() -> list[str]:
    """The argument strings W7 must reassemble."""
    return [_arguments(i) for i in range(W7_CALLS)]


# --- the harness -------------------------------------------------------------------------------


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    pos = q * (len(ordered) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def measure(
    cases: list[Case], *, quick: bool, log: Callable[[str], None] | None = None
) -> list[Result]:
    """Calibrate, then run the cases round-robin; see the module docstring."""
    target_ns = 2_000_000 if quick else 25_000_000
    repeats = 2 if quick else 15
    numbers: dict[str, int] = {}
    rounds: dict[str, int] = {}
    results: dict[str, Result] = {}
    live: list[Case] = []
    for case in cases:
        if case.run is None:
            results[case.id] = Result(
                case.id, case.label, "n/a", note=case.note, reason=case.reason
            )
            continue
        try:
            case.run(1)  # first call: lazy caches, imports
            one = max(case.run(1), 1)
        except Exception as e:  # a peer failing is a result, not a crash of the whole run
            results[case.id] = Result(
                case.id,
                case.label,
                "error",
                note=case.note,
                reason=f"{type(e).__name__}: {e}"[:300],
            )
            continue
        numbers[case.id] = max(1, min(case.max_number, target_ns // one))
        # very slow cases (seconds per iteration) get fewer rounds, at least 5
        wanted = case.rounds if case.rounds is not None and not quick else repeats
        rounds[case.id] = max(min(5, wanted), min(wanted, int(4e9 // one)))
        live.append(case)
        if log:
            log(f"  calibrated {case.id}: {one / 1000:.1f} µs x {numbers[case.id]}")
    # The setup (thousands of tools for W8) stays alive for the whole run; without this,
    # every full collection would walk it again and bill the library's allocation-heavy
    # cases for its own fixture size.
    gc.collect()
    gc.freeze()
    samples: dict[str, list[float]] = {c.id: [] for c in live}
    for round_ in range(max(rounds.values(), default=0)):
        for case in live:
            if case.id in results or round_ >= rounds[case.id]:
                continue
            n = numbers[case.id]
            assert case.run is not None
            try:
                samples[case.id].append(case.run(n) / n / case.per)
            except Exception as e:
                results[case.id] = Result(
                    case.id,
                    case.label,
                    "error",
                    note=case.note,
                    reason=f"{type(e).__name__}: {e}"[:300],
                )
    for case in live:
        if case.id in results:
            continue
        values = samples[case.id]
        results[case.id] = Result(
            case.id,
            case.label,
            "ok",
            median_ns=statistics.median(values),
            p10_ns=_quantile(values, 0.1),
            p25_ns=_quantile(values, 0.25),
            p75_ns=_quantile(values, 0.75),
            p90_ns=_quantile(values, 0.9),
            batches=len(values),
            number=numbers[case.id],
            baseline=case.baseline,
            note=case.note,
        )
    for case in cases:
        r = results[case.id]
        base = results.get(case.baseline) if case.baseline else None
        if r.status == "ok" and base is not None and base.status == "ok" and base.median_ns:
            pairs = zip(samples[case.id], samples[base.id], strict=False)  # round by round
            r.ratio = statistics.median(a / b for a, b in pairs if b)
        r.baseline = case.baseline
    return [results[c.id] for c in cases]
