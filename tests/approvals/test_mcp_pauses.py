"""A served tool that pauses itself: `toolweave mcp serve` asks the client's user through
MCP elicitation (with the tool's reason) and runs the tool again, seeing the approval, on
"yes"; a "no", a client without elicitation or a `CallDeferred` give an error result."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolweave import CallDeferred, NeedsApproval, ToolContext, tool

pytest.importorskip("mcp")


def test_a_served_tool_that_pauses_itself_asks_through_elicitation() -> None:
    import mcp_types
    from mcp.client.client import Client

    from toolweave.mcp import build_mcp_server

    seen: list[Any] = []

    @tool
    def wire(to: str, ctx: ToolContext) -> str:
        """Wire money (asks for approval itself)."""
        seen.append(ctx.approval)
        if ctx.approval is None:
            raise NeedsApproval(f"a wire to {to}\x1b[2J", {"to": to})
        return f"wired to {to}"

    @tool
    def report(name: str) -> str:
        """A report made elsewhere."""
        raise CallDeferred({"name": name})

    questions: list[str] = []
    answers = iter([True, False])

    async def elicit(context: object, params: mcp_types.ElicitRequestParams) -> object:
        questions.append(params.message)
        return mcp_types.ElicitResult(action="accept", content={"approve": next(answers)})

    async def scenario() -> None:
        server = build_mcp_server([wire, report])
        async with (
            asyncio.timeout(60),
            Client(server, mode="legacy", elicitation_callback=elicit) as client,
        ):
            approved = await client.call_tool("wire", {"to": "Bob"})
            assert not approved.is_error, approved
            assert approved.content[0].text == "wired to Bob"  # type: ignore[union-attr]
            assert [s is None for s in seen] == [True, False]
            assert len(questions) == 1 and "a wire to Bob" in questions[0]
            assert "\x1b" not in questions[0]  # the tool's reason is escaped
            declined = await client.call_tool("wire", {"to": "Eve"})
            assert declined.is_error and "did not approve" in declined.content[0].text  # type: ignore[union-attr]
            assert len(seen) == 3  # not run again
            deferred = await client.call_tool("report", {"name": "q3"})
            assert deferred.is_error and "CallDeferred" in deferred.content[0].text  # type: ignore[union-attr]
        async with asyncio.timeout(60), Client(server, mode="legacy") as plain:
            cannot = await plain.call_tool("wire", {"to": "Cy"})
            assert cannot.is_error and "elicitation" in cannot.content[0].text  # type: ignore[union-attr]
            assert len(seen) == 4

    asyncio.run(scenario())
