"""A served tool that pauses itself: `toolweave mcp serve` asks the client's user through
MCP elicitation (with the tool's reason) and runs the tool again, seeing the approval, on
"yes"; a "no", a client without elicitation or a `CallDeferred` give an error result."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

from toolweave import CallDeferred, ChatStatus, NeedsApproval, ToolContext, tool

from ..service.helpers import MODES, ai_calls, call, run

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


SERVED = str(Path(__file__).with_name("served_pausing_tools.py"))


@pytest.mark.parametrize("mode", MODES)
def test_a_conversation_calls_an_mcp_tool_whose_server_asks_through_elicitation(
    mode: str,
) -> None:
    """The whole way: a `ToolService` conversation calls an MCP tool served by `toolweave
    mcp serve`; the tool pauses itself, the server asks through elicitation, the client's
    hook answers, and the tool runs again (or the model is told it was not approved)."""
    from toolweave import AiMessage, ScriptedChatModel, ToolExecutionResultMessage, ToolService
    from toolweave.context import ElicitationResult
    from toolweave.mcp import McpServerConfig, SyncMcpClient
    from toolweave.mcp.hooks import ElicitationRequest

    asked: list[str] = []
    answers = iter([True, False])

    async def elicit(request: ElicitationRequest) -> ElicitationResult:
        asked.append(request.message)
        return ElicitationResult("accept", {"approve": next(answers)})

    config = McpServerConfig(
        server_name="desk",
        client_type="stdio",
        params={"command": sys.executable, "args": ["-m", "toolweave", "mcp", "serve", SERVED]},
        connect_timeout=60,
    )
    with SyncMcpClient(config, elicitation=elicit) as client:
        service = ToolService().tools(*client.list_tools())
        model = ScriptedChatModel(
            [
                ai_calls(
                    call("wire", '{"to": "Bob"}', id="w1"),
                    call("wire", '{"to": "Eve"}', id="w2"),
                ),
                AiMessage("done"),
            ]
        )
        result = run(mode, service, model)
    assert result.status is ChatStatus.COMPLETED
    texts = {m.id: m.text for m in result.messages if isinstance(m, ToolExecutionResultMessage)}
    assert len(asked) == 2 and all("asks for approval" in q for q in asked)
    approved = [t for t in texts.values() if t.startswith("wired to")]
    refused = [t for t in texts.values() if "did not approve" in t]
    assert len(approved) == 1 and len(refused) == 1
