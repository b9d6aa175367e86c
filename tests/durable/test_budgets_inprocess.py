"""A durable conversation's own `usage_limits` (DBOS launched in this process, on its own
database): given to `achat`/`start`, it travels in the workflow's input and replaces the
service's; a refusal is a recorded `ConversationFailedError`."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, UsageLimits, tool
from toolweave.chat.request import ChatRequest

RAN: list[str] = []


@tool(idempotent=True)
def look(key: str) -> str:
    """Look a key up."""
    RAN.append(key)
    return f"value of {key}"


def script(request: ChatRequest) -> AiMessage:
    if request.parameters.tool_choice is not None:  # told the budget is spent
        return AiMessage("answered with what I had")
    turn = sum(1 for m in request.messages if m.type == "ai")
    call = ToolExecutionRequest(id=f"k{turn}", name="look", arguments=f'{{"key": "{turn}"}}')
    return AiMessage(tool_execution_requests=[call])


@pytest.fixture(scope="module")
def service(postgres: Any) -> Iterator[Any]:
    from toolweave.durable import DurableToolService, launch, shutdown

    made = DurableToolService(
        "budget-inproc",
        model=ScriptedChatModel(script),
        usage_limits=UsageLimits(tool_calls=2, on_exceeded="answer"),
    ).tools(look)
    launch(postgres.url_for("tw_budget_inprocess"), app_name="twbudget", log_level="WARNING")
    try:
        yield made
    finally:
        shutdown()


def test_the_services_budget_answers_once(service: Any) -> None:
    RAN.clear()
    result = asyncio.run(service.achat(None, None, "go", conversation_id="b-service"))
    assert result.text == "answered with what I had" and RAN == ["0", "1"]


def test_a_conversations_budget_replaces_the_services_and_is_recorded(service: Any) -> None:
    from toolweave.durable import ConversationFailedError

    RAN.clear()
    limits = UsageLimits(tool_calls=1)
    with pytest.raises(ConversationFailedError) as info:
        asyncio.run(service.achat(None, None, "go", conversation_id="b-own", usage_limits=limits))
    assert info.value.error_type == "UsageLimitExceeded" and RAN == ["0"]
    # the same id again: the recorded failure, nothing runs
    with pytest.raises(ConversationFailedError):
        asyncio.run(service.achat(None, None, "go", conversation_id="b-own"))
    assert RAN == ["0"]
