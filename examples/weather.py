"""The seed's weather example, end to end, offline.

A `get_weather` tool, a `ToolService`, and a scripted model that behaves like the real one in
the seed's transcript: it first asks for `get_weather(city="杭州")`, then answers from the
tool's result. Swap `ScriptedChatModel` for `OpenAIChatModel(model="gpt-4o-mini")` (or any
other provider) to run it against a real model.
"""

from __future__ import annotations

from toolweave import (
    AiMessage,
    ChatCompleted,
    ChatRequestParameters,
    ScriptedChatModel,
    ToolExecutionFinished,
    ToolExecutionRequest,
    ToolExecutionStarted,
    ToolService,
    UserMessage,
    tool,
)
from toolweave.dialects import openai_tool


@tool(strict=False)
def get_weather(city: str) -> str:
    """查询指定城市的当前天气

    Args:
        city: 城市名
    """
    forecasts = {"杭州": "杭州今天 22℃，天气晴。", "Paris": "Paris: 14°C, light rain."}
    return forecasts.get(city, f"{city}: no data")


def scripted_model() -> ScriptedChatModel:
    """A stand-in for a real model, replaying the seed's two responses."""
    return ScriptedChatModel(
        [
            AiMessage(
                tool_execution_requests=[
                    ToolExecutionRequest(
                        id="call_abc123", name="get_weather", arguments='{"city":"杭州"}'
                    )
                ]
            ),
            AiMessage("杭州今天天气晴，气温 22℃，适合出行。"),
        ]
    )


def main() -> None:
    service = ToolService().tools(get_weather)
    print("tool declaration (OpenAI dialect):")
    print(" ", openai_tool(get_weather.card))
    question = "杭州今天天气怎么样？"
    print(f"\nuser: {question}")
    for event in service.chat_stream(
        scripted_model(),
        ChatRequestParameters(tool_choice="auto"),
        [UserMessage(question)],
    ):
        if isinstance(event, ToolExecutionStarted):
            r = event.request
            print(f"model -> tool call {r.name}({r.arguments}) [id={r.id}]")
        elif isinstance(event, ToolExecutionFinished):
            print(f"tool  -> {event.execution.result_text!r}")
        elif isinstance(event, ChatCompleted):
            print(f"model: {event.result.text}")
            print(f"\n{len(event.result.messages)} messages in the conversation")


if __name__ == "__main__":
    main()
