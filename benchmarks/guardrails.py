"""Tool guardrails: what they cost per tool round (docs/policies.md, "Guardrails").

W6's workload (20 rounds of one trivial sync call through `ToolService.achat`, per round)
with no guardrail, one input guardrail, one output guardrail, and each built-in. The
difference to the first row is the guardrails' cost per call; an input guardrail includes
validating the arguments once more (what the tool will receive).

Run alone with `python -m benchmarks.guardrails [--quick]`.
"""

from __future__ import annotations

import asyncio
import sys
from typing import Any

from toolweave import (
    Allow,
    ToolService,
    input_guardrail,
    output_guardrail,
    prompt_injection_check,
    redact_secrets,
    tool,
)

from ._harness import Row, async_case, measure
from .loop import ROUNDS, per_round, w6_model


@tool
def bump(n: int) -> str:
    """Add one."""
    return f"the answer is {n + 1}, as the service reported"


@input_guardrail
def allow_input(arguments: dict[str, Any], ctx: Any) -> Allow:
    return Allow()


@output_guardrail
def allow_output(result: Any, ctx: Any) -> Allow:
    return Allow()


SETS: dict[str, list[Any]] = {
    "no guardrail": [],
    "one input guardrail (Allow)": [allow_input],
    "one output guardrail (Allow)": [allow_output],
    "redact_secrets()": [redact_secrets()],
    "prompt_injection_check()": [prompt_injection_check()],
    "redact_secrets() + prompt_injection_check()": [redact_secrets(), prompt_injection_check()],
}


def run(quick: bool) -> list[Row]:
    """One row per guardrail set, per round."""
    loop = asyncio.new_event_loop()
    try:
        cases = []
        for label, guardrails in SETS.items():
            service = ToolService(guardrails=guardrails).tools(bump)
            cases.append(
                async_case(
                    f"guardrails: {label}, {ROUNDS} rounds",
                    lambda service=service: service.achat(w6_model(), None, "go"),
                    loop,
                    baseline=None
                    if not guardrails
                    else f"guardrails: no guardrail, {ROUNDS} rounds",
                    number=20,
                )
            )
        rows = measure("guardrails (W6 per round)", cases, quick=quick)
    finally:
        loop.close()
    return per_round(rows)


if __name__ == "__main__":
    from .__main__ import print_table

    print_table(run(quick="--quick" in sys.argv[1:]))
