"""Tools registered from a `ToolSource` (an MCP server's listing) follow its changes: the
service lists them again before its next request; a round in progress keeps the tools it
started with (issue #16). The MCP end to end is in tests/mcp/test_mcp_tools_changed.py."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import pytest

from toolweave import AiMessage, ScriptedChatModel, Tool, ToolService, tool
from toolweave.tools.source import ToolSource

from .helpers import MODES, ai_calls, call, run


class Shelf:
    """A real `ToolSource`: a set of tools that changes when asked, telling its watchers."""

    def __init__(self, *tools: Tool) -> None:
        self.tools = {t.card.name: t for t in tools}
        self.watchers: list[Callable[[], None]] = []
        self.listed = 0

    def watch(self, on_change: Callable[[], None]) -> None:
        self.watchers.append(on_change)

    async def alist(self) -> Sequence[Tool]:
        self.listed += 1
        return list(self.tools.values())

    def change(self, *, add: Sequence[Tool] = (), drop: Sequence[str] = ()) -> None:
        for t in add:
            self.tools[t.card.name] = t
        for name in drop:
            self.tools.pop(name, None)
        for watcher in self.watchers:
            watcher()

    def listing(self) -> list[Tool]:
        class Listing(list[Tool]):
            tool_source: ToolSource

        out = Listing(self.tools.values())
        out.tool_source = self
        return out


def named(name: str, answer: str) -> Tool:
    async def run_it() -> str:
        return answer

    return tool(name=name, description=f"The {name} tool.")(run_it)


def offered(request: Any) -> list[str]:
    return [c.name for c in request.parameters.tools or ()]


@pytest.mark.parametrize("mode", MODES)
def test_added_and_removed_tools_reach_the_next_request_in_every_face(mode: str) -> None:
    shelf = Shelf(named("old", "old ran"))

    @tool
    def grow() -> str:
        """Change the shelf."""
        shelf.change(add=[named("fresh", "fresh ran")], drop=["old"])
        return "grown"

    service = ToolService().tools(grow, shelf.listing())
    model = ScriptedChatModel(
        [
            ai_calls(call("grow")),
            ai_calls(call("fresh"), call("old")),
            AiMessage("done"),
        ]
    )
    result = run(mode, service, model)
    assert [offered(r) for r in model.requests] == [
        ["grow", "old"],
        ["grow", "fresh"],
        ["grow", "fresh"],
    ], mode
    fresh, old = result.tool_executions[1:]
    assert fresh.result.result_text() == "fresh ran"
    assert old.has_failed and "old" in old.result.result_text()  # the unknown-tool answer
    assert "fresh" in service and "old" not in service
    assert shelf.listed == 1, mode  # listed again once, for the one change


def test_without_a_change_the_request_is_built_once_and_nothing_is_listed() -> None:
    shelf = Shelf(named("a", "a ran"), named("b", "b ran"))
    service = ToolService().tools(shelf.listing())
    cards = service.tool_cards
    model = ScriptedChatModel([ai_calls(call("a")), ai_calls(call("b")), AiMessage("done")])
    service.chat(model, None, "hi")
    assert shelf.listed == 0
    assert model.requests[0].parameters is model.requests[2].parameters
    assert service.tool_cards is cards


def test_a_round_in_progress_keeps_the_tools_it_started_with() -> None:
    """Conversation A's round calls `hold` (a barrier) then `doomed`; while `hold` waits,
    conversation B removes `doomed` and sends its next request (the refresh). A's `doomed`
    still runs; A's next request no longer offers it."""
    shelf = Shelf(named("doomed", "doomed ran"))
    held = asyncio.Event()
    release = asyncio.Event()

    @tool(parallel_safe=False)
    async def hold() -> str:
        """Wait to be released."""
        held.set()
        await release.wait()
        return "held"

    @tool
    def remove_doomed() -> str:
        """Remove doomed."""
        shelf.change(drop=["doomed"])
        return "removed"

    service = ToolService().tools(hold, remove_doomed, shelf.listing())
    model_a = ScriptedChatModel([ai_calls(call("hold"), call("doomed")), AiMessage("a done")])
    model_b = ScriptedChatModel([ai_calls(call("remove_doomed")), AiMessage("b done")])

    async def both() -> Any:
        a = asyncio.create_task(service.achat(model_a, None, "a"))
        await held.wait()
        b = await service.achat(model_b, None, "b")
        release.set()
        return await a, b

    a, _ = asyncio.run(asyncio.wait_for(both(), 30))
    assert "doomed" not in offered(model_b.requests[1])
    assert [e.result.result_text() for e in a.tool_executions] == ["held", "doomed ran"]
    assert "doomed" not in offered(model_a.requests[1])


def test_a_changed_tool_is_replaced_and_registration_options_still_apply() -> None:
    shelf = Shelf(named("t", "first"))
    service = ToolService().tools(shelf.listing(), requires_approval=False, max_concurrency=2)
    entry_before = service._entry("t")
    assert entry_before is not None and entry_before.limit is not None
    shelf.change(add=[tool(name="t", description="Second version.")(lambda: "second")])
    model = ScriptedChatModel([ai_calls(call("t")), AiMessage("done")])
    result = service.chat(model, None, "hi")
    assert model.requests[0].parameters.tools[0].description == "Second version."
    assert result.tool_executions[0].result.result_text() == "second"
    entry = service._entry("t")
    assert entry is not None and entry is not entry_before and entry.limit is not None


def test_a_removed_tool_stays_removed_and_a_clash_is_not_registered() -> None:
    shelf = Shelf(named("a", "a ran"), named("b", "b ran"))

    @tool
    def local() -> str:
        """A local tool."""
        return "local"

    service = ToolService().tools(local, shelf.listing())
    service.remove("a")
    shelf.change(add=[named("local", "impostor"), named("c", "c ran")])
    model = ScriptedChatModel([ai_calls(call("local")), AiMessage("done")])
    result = service.chat(model, None, "hi")
    assert offered(model.requests[0]) == ["local", "b", "c"]
    assert result.tool_executions[0].result.result_text() == "local"


def test_a_source_that_fails_to_list_keeps_its_tools() -> None:
    shelf = Shelf(named("a", "a ran"))

    async def broken() -> Sequence[Tool]:
        raise RuntimeError("server gone")

    service = ToolService().tools(shelf.listing())
    shelf.alist = broken  # type: ignore[method-assign]
    shelf.change()
    model = ScriptedChatModel([AiMessage("done")])
    service.chat(model, None, "hi")
    assert offered(model.requests[0]) == ["a"]
