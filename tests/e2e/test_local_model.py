"""End to end against a real model: llama.cpp's llama-server with SmolLM2-135M-Instruct on
127.0.0.1. The model makes no native tool calls, so these run the constrained mode. They
assert protocol facts (a real call was made, executed, answered with its id, and the model
ended with an answer), never wording. Skipped only when llama-server is not built."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from pydantic import BaseModel
from typer.testing import CliRunner

from toolweave import (
    AiMessage,
    ChatCompleted,
    ChatRequestParameters,
    FinishReason,
    TextDelta,
    ToolChatResult,
    ToolExecutionFinished,
    ToolExecutionResultMessage,
    ToolExecutionStarted,
    ToolService,
    tool,
)
from toolweave.local import LlamaServer
from toolweave.providers import OpenAIChatModel, clear_probe_cache, probe_capabilities

pytestmark = pytest.mark.e2e

QUESTION = "What is the weather in Paris today?"
PARAMS = ChatRequestParameters(temperature=0, max_tokens=200)


@tool
def get_weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    return f"{city}: 14 degrees Celsius, light rain."


@pytest.fixture
def model(llama_server: LlamaServer) -> Iterator[OpenAIChatModel]:
    with llama_server.chat_model(tool_calling="constrained", timeout=120, max_retries=2) as m:
        yield m


def check_protocol(result: ToolChatResult) -> None:
    """The conversation is a valid tool-calling exchange that ends with an answer."""
    assert result.tool_executions, "the model made no tool call"
    for execution in result.tool_executions:
        assert execution.request.name == "get_weather"
        arguments = json.loads(execution.request.arguments)
        assert isinstance(arguments.get("city"), str) and arguments["city"]
        assert not execution.result.is_error
    # every call id of every AI turn is answered exactly once, right after it, in order
    messages = result.messages
    for i, message in enumerate(messages):
        if isinstance(message, AiMessage) and message.tool_execution_requests:
            ids = [r.id for r in message.tool_execution_requests]
            assert len(set(ids)) == len(ids)
            answers = messages[i + 1 : i + 1 + len(ids)]
            assert all(isinstance(a, ToolExecutionResultMessage) for a in answers)
            assert [a.id for a in answers] == ids  # type: ignore[union-attr]
    executed = [e.request.id for e in result.tool_executions]
    answered = [m.id for m in messages if isinstance(m, ToolExecutionResultMessage)]
    assert executed == answered
    final = result.final_response
    assert final is not None and not final.ai_message.tool_execution_requests
    assert final.finish_reason in (FinishReason.STOP, FinishReason.LENGTH)
    assert result.text and result.text.strip()
    assert isinstance(messages[-1], AiMessage) and messages[-1].text == result.text


def test_probe_finds_json_schema_support(llama_server: LlamaServer) -> None:
    clear_probe_cache()
    with llama_server.chat_model(timeout=120, max_retries=2) as m:
        caps = probe_capabilities(m)
    assert caps.json_schema, caps.errors
    # tool_calling="auto" picks constrained unless the model makes native calls
    assert caps.recommended_tool_calling == ("native" if caps.native_tool_calls else "constrained")


def test_tool_loop(model: OpenAIChatModel) -> None:
    service = ToolService(max_tool_calling_round_trips=6).tools(get_weather)
    result = service.chat(model, PARAMS, QUESTION)
    check_protocol(result)


def test_tool_loop_streaming(model: OpenAIChatModel) -> None:
    service = ToolService(max_tool_calling_round_trips=6).tools(get_weather)
    events = list(service.chat_stream(model, PARAMS, QUESTION))
    completed = events[-1]
    assert isinstance(completed, ChatCompleted)
    result = completed.result
    check_protocol(result)
    started = [e.request.id for e in events if isinstance(e, ToolExecutionStarted)]
    finished = [e.execution.request.id for e in events if isinstance(e, ToolExecutionFinished)]
    assert started == finished == [e.request.id for e in result.tool_executions]
    first_finish = next(i for i, e in enumerate(events) if isinstance(e, ToolExecutionFinished))
    deltas = [i for i, e in enumerate(events) if isinstance(e, TextDelta)]
    assert deltas and deltas[0] > first_finish  # the answer streams after the tool ran
    assert (
        "".join(e.text for e in events if isinstance(e, TextDelta)).strip() == result.text.strip()
    )  # type: ignore[union-attr]


async def test_tool_loop_async(model: OpenAIChatModel) -> None:
    service = ToolService(max_tool_calling_round_trips=6).tools(get_weather)
    result = await service.achat(model, PARAMS, QUESTION)
    check_protocol(result)


def test_demo_command_on_the_local_model(llama_server: LlamaServer) -> None:
    from toolweave.cli import app

    result = CliRunner().invoke(app, ["demo", "--provider", "local"])
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "tool call get_weather" in out and "tool result" in out and "assistant>" in out
    assert out.index("tool call") < out.index("tool result") < out.index("assistant>")


class Forecast(BaseModel):
    city: str
    temperature_celsius: int


@pytest.mark.parametrize("with_tools", [False, True])
def test_structured_output_from_the_real_model(model: OpenAIChatModel, with_tools: bool) -> None:
    """The server's grammar enforces the schema: the answer parses into the type, whether or
    not the model calls a tool first (the answer branch of the constrained schema)."""
    service = ToolService(max_tool_calling_round_trips=3)
    if with_tools:
        service.tools(get_weather)
    result = service.chat(
        model, PARAMS, "Give the forecast for Paris as JSON.", output_type=Forecast
    )
    assert isinstance(result.output, Forecast)
    assert result.output.city.strip()
    assert Forecast.model_validate_json(result.text or "") == result.output
