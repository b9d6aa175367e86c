"""`toolweave mcp serve` runs a served tool's own guardrails (its card's) around each call,
as a `ToolService` would: a rejection, a replaced result, and a halt (an error result: there
is no conversation to end), checked with the official SDK's client in process."""

from __future__ import annotations

import asyncio
from typing import Any

from mcp.client.client import Client
from mcp_support import TEST_TIMEOUT

from toolweave import (
    Allow,
    Halt,
    Reject,
    Replace,
    ToolContext,
    ToolExecutionResult,
    input_guardrail,
    output_guardrail,
    redact_secrets,
    tool,
)
from toolweave.mcp import build_mcp_server

ran: list[str] = []


@input_guardrail
def payees(arguments: dict[str, Any], ctx: ToolContext) -> Allow | Reject | Halt:
    if arguments["to"] == "Mallory":
        return Halt("Mallory is on the sanctions list")
    return Allow() if arguments["to"] == "Ann" else Reject(f"{arguments['to']} is not a payee")


@output_guardrail
def receipt(result: ToolExecutionResult, ctx: ToolContext) -> Replace:
    return Replace(f"{result.text} (checked)")


@tool(guardrails=[payees, receipt, redact_secrets(["pay-Zq9-secret"])])
def pay(to: str, amount: int = 5) -> str:
    """Pay someone."""
    ran.append(to)
    return f"paid {amount} to {to} with key pay-Zq9-secret"


def _text(result: Any) -> str:
    return str(result.content[0].text)


async def test_a_served_tool_runs_its_guardrails() -> None:
    ran.clear()
    server = build_mcp_server([pay], name="tw")
    async with asyncio.timeout(TEST_TIMEOUT), Client(server, mode="legacy") as client:
        result = await client.call_tool("pay", {"to": "Ann"})
        assert not result.is_error
        assert _text(result) == "paid 5 to Ann with key *** (checked)"

        result = await client.call_tool("pay", {"to": "Eve", "amount": 3})
        assert result.is_error and _text(result) == "Eve is not a payee"

        result = await client.call_tool("pay", {"to": "Mallory"})
        assert (
            result.is_error and _text(result) == "This call was stopped by the guardrail 'payees'."
        )
    assert ran == ["Ann"]  # the rejected and halted calls never ran
