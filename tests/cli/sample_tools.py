"""Tools and a scripted model for the CLI tests."""

from __future__ import annotations

from pydantic import BaseModel

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, tool
from toolweave.chat.request import ChatRequest


@tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@tool
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: City name.
    """
    return f"{city}: 21 degrees, sunny"


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


class Point(BaseModel):
    """A point."""

    x: int
    y: int


@tool
def norm1(p: Point) -> int:
    """Manhattan norm of a point."""
    return abs(p.x) + abs(p.y)


class Calculator:
    """A class whose @tool methods are collected."""

    @tool
    def mul(self, a: int, b: int) -> int:
        """Multiply two integers."""
        return a * b


def plain(text: str) -> str:
    """Echo text (a plain function, made a tool by the CLI)."""
    return text


def scripted_model() -> ScriptedChatModel:
    """A model that asks for get_weather(Paris), then answers."""
    return ScriptedChatModel(
        [
            AiMessage(
                tool_execution_requests=[
                    ToolExecutionRequest(
                        id="call_1", name="get_weather", arguments='{"city":"Paris"}'
                    )
                ]
            ),
            AiMessage("It is sunny in Paris."),
        ]
    )


def silent_model() -> ScriptedChatModel:
    """A model that answers without calling any tool."""
    return ScriptedChatModel([AiMessage("No tools needed.")])


LONG_PATH = "/srv/data/" + "/".join(f"directory-{i:02d}" for i in range(12)) + "/report.csv"


@tool
def locate(name: str) -> str:
    """Where a file is."""
    return LONG_PATH


def failing_model() -> ScriptedChatModel:
    """A model that calls explode, then answers."""
    call = ToolExecutionRequest(id="c1", name="explode", arguments='{"reason": "disk full"}')
    return ScriptedChatModel([AiMessage(tool_execution_requests=[call]), AiMessage("It failed.")])


def locating_model() -> ScriptedChatModel:
    """A model that calls locate, then answers with the (long) path."""
    call = ToolExecutionRequest(id="c1", name="locate", arguments='{"name": "report"}')
    return ScriptedChatModel(
        [AiMessage(tool_execution_requests=[call]), AiMessage(f"The report is at {LONG_PATH}.")]
    )


def parameters_model() -> ScriptedChatModel:
    """Answers with the sampling parameters the request set (none unless given)."""

    def answer(request: ChatRequest) -> AiMessage:
        given = sorted(
            k
            for k in ("temperature", "top_p", "max_tokens")
            if k in request.parameters.model_fields_set
        )
        return AiMessage(f"parameters set: {given}")

    return ScriptedChatModel(answer)
