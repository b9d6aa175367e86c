"""The conversation the protocol and browser tests run: a weather tool, a payment that
needs approval, and a scripted model that calls both and then answers."""

from __future__ import annotations

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, ToolService, tool
from toolweave.ui import create_app

KEY = "a test signing key of 32 bytes!!"


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: sunny, 21 C"


@tool(requires_approval=True)
def send_money(to: str, amount: int) -> str:
    """Send money to someone."""
    return f"sent {amount} to {to}"


def script() -> ScriptedChatModel:
    return ScriptedChatModel(
        [
            AiMessage(
                "Let me look.",
                reasoning="The user wants the weather.",
                tool_execution_requests=[
                    ToolExecutionRequest(id="w1", name="get_weather", arguments='{"city": "Paris"}')
                ],
            ),
            AiMessage(
                "Paris is sunny. Now the payment.",
                tool_execution_requests=[
                    ToolExecutionRequest(
                        id="p1", name="send_money", arguments='{"to": "Ann", "amount": 5}'
                    )
                ],
            ),
            AiMessage("Done: sunny in Paris, and the payment went through."),
        ]
    )


def service() -> ToolService:
    return ToolService().tools(get_weather, send_money)


def app(*, web: bool = False, middleware: tuple = ()):  # type: ignore[no-untyped-def]
    return create_app(service(), script(), key=KEY, web=web, middleware=middleware)
