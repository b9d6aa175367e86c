"""Loop policies: what hooks and usage budgets cost per tool round (docs/policies.md).

W6's workload (20 rounds of one trivial sync call, per round) through `ToolService.chat`
and `.achat` with no policy, a history processor, an around-tool-call hook, a budget
(`UsageLimits` on requests, tool calls, a tool and tokens), and a typical set: one rewrite
hook (a history processor stubbing results older than two rounds) plus that budget; an
output cap alone, and the typical set with `ClearToolResults` and an output cap. The
difference to the first row of a face is the policies' cost per round. All cases of a
face run round-robin, so noise hits them alike: compare the ratios.

Run alone with `python -m benchmarks.policies [--quick]`.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from toolweave import (
    AiMessage,
    ClearToolResults,
    ToolExecutionResultMessage,
    ToolService,
    UsageLimits,
    around_tool_call,
    history_processor,
    tool,
)

from ._harness import Row, async_case, measure, sync_case
from .loop import ROUNDS, per_round, w6_model


@tool
def bump(n: int) -> int:
    """Add one."""
    return n + 1


def stub_old_results(messages: list[Any]) -> list[Any]:
    """Results older than the last two rounds become a stub (once: a stub stays as it is)."""
    turns = [i for i, m in enumerate(messages) if isinstance(m, AiMessage)]
    if len(turns) <= 2:
        return messages
    cutoff = turns[-2]
    return [
        m.model_copy(update={"text": "[cleared]"})
        if i < cutoff and isinstance(m, ToolExecutionResultMessage) and m.text != "[cleared]"
        else m
        for i, m in enumerate(messages)
    ]


async def passthrough(call: Any, call_tool: Any, ctx: Any) -> Any:
    return await call_tool(call)


BUDGET = UsageLimits(requests=1000, tool_calls=1000, per_tool={"bump": 1000}, total_tokens=10**9)
SETS: dict[str, dict[str, Any]] = {
    "no policy": {},
    "a history processor": {"hooks": [history_processor(stub_old_results)]},
    "an around-tool-call hook": {"hooks": [around_tool_call(passthrough)]},
    "a budget (UsageLimits)": {"usage_limits": BUDGET},
    "typical: a history processor + a budget": {
        "hooks": [history_processor(stub_old_results)],
        "usage_limits": BUDGET,
    },
    "an output cap (max_result_chars)": {"max_result_chars": 10_000},
    "typical + an output cap (ClearToolResults, a budget, max_result_chars)": {
        "hooks": [history_processor(ClearToolResults(keep_rounds=2, min_chars=0))],
        "usage_limits": BUDGET,
        "max_result_chars": 10_000,
    },
}


def run(quick: bool) -> list[Row]:
    """One row per policy set and face, per round."""
    loop = asyncio.new_event_loop()
    rows: list[Row] = []
    try:
        for face in ("chat", "achat"):
            cases = []
            first = f"policies {face}: no policy, {ROUNDS} rounds"
            for label, options in SETS.items():
                service = ToolService(**options).tools(bump)
                name = f"policies {face}: {label}, {ROUNDS} rounds"
                baseline = None if not options else first
                if face == "chat":
                    cases.append(
                        sync_case(
                            name,
                            lambda s=service: s.chat(w6_model(), None, "go"),
                            baseline=baseline,
                            number=20,
                        )
                    )
                else:
                    cases.append(
                        async_case(
                            name,
                            lambda s=service: s.achat(w6_model(), None, "go"),
                            loop,
                            baseline=baseline,
                            number=20,
                        )
                    )
            rows += measure(f"policies (W6 per round, {face})", cases, quick=quick)
    finally:
        loop.close()
    return per_round(rows)


if __name__ == "__main__":
    from .__main__ import print_table

    print_table(run(quick="--quick" in sys.argv[1:]))
