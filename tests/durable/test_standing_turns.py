"""Durable conversations and standing decisions across turns (issue 30): an earlier turn's
`result.standing_decisions` passed to `start` / `achat` / `chat` stand in the new
conversation from its start (kept in the database with its input), come back in its
result, and a function limit, which the database cannot keep, is refused."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from toolweave import AiMessage, ScriptedChatModel, StandingDecision, tool
from toolweave.chat.request import ChatRequest
from toolweave.execution.requests import ToolExecutionRequest

SEARCHED: list[str] = []


@tool(requires_approval=True)
def search_web(query: str) -> str:
    """Search the web (needs approval)."""
    SEARCHED.append(query)
    return f"results for {query}"


def script(request: ChatRequest) -> AiMessage:
    if not any(m.type == "ai" for m in request.messages):
        query = request.messages[-1].text or ""  # type: ignore[union-attr]
        call = ToolExecutionRequest(id="s", name="search_web", arguments=f'{{"query": "{query}"}}')
        return AiMessage(tool_execution_requests=[call])
    results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
    return AiMessage(" | ".join(results))


@pytest.fixture(scope="module")
def service(postgres: Any) -> Iterator[Any]:
    from toolweave.durable import DurableToolService, launch, shutdown

    durable = DurableToolService("standing-turns", model=ScriptedChatModel(script)).tools(
        search_web
    )
    launch(postgres.url_for("tw_standing_turns"), app_name="twstandturns", log_level="WARNING")
    try:
        yield durable
    finally:
        shutdown()


def test_standing_decisions_of_an_earlier_turn_stand_from_the_start(service: Any) -> None:
    SEARCHED.clear()
    always = StandingDecision(tool_name="search_web", decision="approve", when={"query": "cats"})

    async def turns() -> tuple[Any, Any]:
        handle = await service.start("cats", conversation_id="turn-2", standing_decisions=[always])
        # (a guard, not a timing: without the decision the conversation would wait for one)
        done = await handle.result(timeout=60)
        later = service.achat(
            None, None, "cats", conversation_id="turn-3", standing_decisions=done.standing_decisions
        )
        return done, await asyncio.wait_for(later, 60)

    done, later = asyncio.run(turns())
    assert done.text == "results for cats" and later.text == "results for cats"
    assert SEARCHED == ["cats", "cats"]  # never asked
    assert done.standing_decisions == (always,)  # through the recorded result
    assert later.standing_decisions == (always,)


def test_a_function_limit_or_unverified_data_is_refused(service: Any) -> None:
    from toolweave.durable.service import conversation_payload

    limited = StandingDecision(tool_name="search_web", decision="approve")
    limited._predicate = lambda arguments: True
    with pytest.raises(TypeError, match="limited by a function"):
        service.payload("cats", standing_decisions=[limited])
    with pytest.raises(TypeError, match="StandingDecision"):
        conversation_payload("cats", standing_decisions=[{"tool_name": "search_web"}])  # type: ignore[list-item]
    assert "standing" not in conversation_payload("cats")  # none given: none kept
