"""A tool that needs approval and a model that calls it, for the CLI approval tests."""

from __future__ import annotations

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, tool
from toolweave.chat.request import ChatRequest


@tool(requires_approval=True)
def pay(to: str, amount: int) -> str:
    """Pay someone."""
    return f"paid {amount} to {to}"


def paying_model() -> ScriptedChatModel:
    """Asks for three payments in one turn, then reports the tool results it got."""

    def script(request: ChatRequest) -> AiMessage:
        if not any(m.type == "ai" for m in request.messages):
            return AiMessage(
                tool_execution_requests=[
                    ToolExecutionRequest(
                        id="p1", name="pay", arguments='{"to": "Ann", "amount": 10}'
                    ),
                    ToolExecutionRequest(
                        id="p2", name="pay", arguments='{"to": "Bob", "amount": 99}'
                    ),
                    ToolExecutionRequest(
                        id="p3", name="pay", arguments='{"to": "Eve", "amount": 5}'
                    ),
                ]
            )
        results = [m.text for m in request.messages if m.type == "tool_result"]  # type: ignore[union-attr]
        return AiMessage("RESULTS: " + " | ".join(results))

    return ScriptedChatModel(script)


def paying_each_turn_model() -> ScriptedChatModel:
    """Pays Ann once per user message (the call id numbers the message), then reports the
    result it got."""

    def script(request: ChatRequest) -> AiMessage:
        last = request.messages[-1]
        if last.type == "user":
            turn = sum(1 for m in request.messages if m.type == "user")
            return AiMessage(
                tool_execution_requests=[
                    ToolExecutionRequest(
                        id=f"t{turn}", name="pay", arguments=f'{{"to": "Ann", "amount": {turn}}}'
                    )
                ]
            )
        return AiMessage(f"RESULTS: {last.text}")  # type: ignore[union-attr]

    return ScriptedChatModel(script)
