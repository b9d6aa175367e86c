"""The loop: one round of 50 concurrent async calls, and the per-round overhead.

- W5: 50 calls of an async tool awaiting 20 ms in one round, through `ToolService` with a
  scripted model, against one such call (target ≤ 2x). Measured with the default settings
  (no cap: all 50 in flight) and with the opt-in bound `max_concurrency=16` (four waves).
- W6: 20 rounds of one trivial call, per round, against a plain Python loop doing the same
  work by hand (json.loads + call + json.dumps per round). Target ≤ 100 µs per round.

Run alone with `python -m benchmarks.loop [--quick]`.
"""

from __future__ import annotations

import asyncio
import json
import sys

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, ToolService, tool

from ._harness import Row, async_case, measure, sync_case

ROUNDS = 20
DELAY = 0.02


@tool
async def wait() -> str:
    """Wait 20 ms."""
    await asyncio.sleep(DELAY)
    return "ok"


@tool
def bump(n: int) -> int:
    """Add one."""
    return n + 1


def _fan_out(calls: int) -> ScriptedChatModel:
    requests = [ToolExecutionRequest(id=f"c{i}", name="wait") for i in range(calls)]
    return ScriptedChatModel([AiMessage(tool_execution_requests=requests), AiMessage("done")])


def w6_model() -> ScriptedChatModel:
    """The W6 conversation: ROUNDS rounds of one `bump` call each, then the answer."""
    script = [
        AiMessage(
            tool_execution_requests=[
                ToolExecutionRequest(id=f"r{i}", name="bump", arguments='{"n": 1}')
            ]
        )
        for i in range(ROUNDS)
    ]
    return ScriptedChatModel([*script, AiMessage("done")])


def per_round(rows: list[Row]) -> list[Row]:
    """W6 rows per round: each timed conversation is ROUNDS tool rounds (+ the answer)."""
    return [
        Row(
            r.group,
            r.name.replace(f"{ROUNDS} rounds", "per round"),
            r.median_ns / ROUNDS,
            r.spread_pct,
            r.baseline.replace(f"{ROUNDS} rounds", "per round") if r.baseline else None,
            r.ratio,
        )
        for r in rows
    ]


def _plain_rounds() -> None:
    history = []
    for i in range(ROUNDS):
        args = json.loads('{"n": 1}')
        history.append(json.dumps(args["n"] + 1))
        history.append(f"r{i}")


def run(quick: bool) -> list[Row]:
    """W5 and W6 (per round), interleaved."""
    loop = asyncio.new_event_loop()
    default = ToolService().tools(wait, bump)
    bounded = ToolService(max_concurrency=16).tools(wait, bump)
    try:
        fan_out = [
            async_case("one 20 ms call (W5 unit)", lambda: wait.ainvoke({}), loop, number=5),
            async_case(
                "W5: 50 x 20 ms calls, one round (default: no cap)",
                lambda: default.achat(_fan_out(50), None, "go"),
                loop,
                baseline="one 20 ms call (W5 unit)",
                number=5,
            ),
            async_case(
                "W5: 50 x 20 ms calls, one round (max_concurrency=16, opt-in)",
                lambda: bounded.achat(_fan_out(50), None, "go"),
                loop,
                baseline="one 20 ms call (W5 unit)",
                number=5,
            ),
        ]
        rows = measure("loop W5", fan_out, quick=quick, repeats=7)
        w6_cases = [
            sync_case(f"plain Python, {ROUNDS} rounds", _plain_rounds, number=200),
            sync_case(
                f"W6: ToolService.chat, {ROUNDS} rounds (sync tool)",
                lambda: default.chat(w6_model(), None, "go"),
                baseline=f"plain Python, {ROUNDS} rounds",
                number=20,
            ),
            async_case(
                f"W6: ToolService.achat, {ROUNDS} rounds (sync tool)",
                lambda: default.achat(w6_model(), None, "go"),
                loop,
                baseline=f"plain Python, {ROUNDS} rounds",
                number=20,
            ),
        ]
        w6 = measure("loop W6", w6_cases, quick=quick)
    finally:
        loop.close()
    return rows + per_round(w6)


if __name__ == "__main__":
    from .__main__ import print_table

    print_table(run(quick="--quick" in sys.argv[1:]))
