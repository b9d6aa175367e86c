"""Each framework's tool, imported, run by a `ToolService` against the real local model
(llama.cpp's llama-server with SmolLM2, constrained tool calling). Protocol facts only: a
call of the imported tool was made, ran without error, and the model answered. Skipped when
llama-server is not built; marked `local_model` (by the `llama_server` fixture's name)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from toolweave import ChatRequestParameters, Tool, ToolService
from toolweave.local import LlamaServer, find_llama_server

pytestmark = pytest.mark.e2e


def weather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    return f"{city}: 14 degrees Celsius, light rain."


async def aweather(city: str) -> str:
    """Get the current weather for a city.

    Args:
        city: The city name, e.g. "Paris".
    """
    return weather(city)


def _langchain() -> Tool:
    lc = pytest.importorskip("langchain_core.tools")
    from toolweave.interop.langchain import from_langchain

    return from_langchain(lc.StructuredTool.from_function(weather, name="get_weather"))


def _pydantic_ai() -> Tool:
    pai = pytest.importorskip("pydantic_ai")
    from toolweave.interop.pydantic_ai import from_pydantic_ai

    return from_pydantic_ai(pai.Tool(aweather, name="get_weather"))


def _openai_agents() -> Tool:
    agents = pytest.importorskip("agents")
    from toolweave.interop.openai_agents import from_openai_agents

    return from_openai_agents(agents.function_tool(aweather, name_override="get_weather"))


def _llamaindex() -> Tool:
    tools = pytest.importorskip("llama_index.core.tools")
    from toolweave.interop.llamaindex import from_llamaindex

    return from_llamaindex(tools.FunctionTool.from_defaults(weather, name="get_weather"))


IMPORTED: dict[str, Callable[[], Tool]] = {
    "langchain": _langchain,
    "pydantic_ai": _pydantic_ai,
    "openai_agents": _openai_agents,
    "llamaindex": _llamaindex,
}


@pytest.fixture(scope="module")
def llama_server() -> Iterator[LlamaServer]:
    binary = find_llama_server()
    if binary is None:
        pytest.skip("llama-server is not built: run `python -m toolweave.local build`")
    server = LlamaServer(binary, startup_timeout=120)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.parametrize("framework", sorted(IMPORTED))
def test_imported_tool_with_the_local_model(llama_server: LlamaServer, framework: str) -> None:
    imported = IMPORTED[framework]()
    params = ChatRequestParameters(temperature=0, max_tokens=200)
    with llama_server.chat_model(tool_calling="constrained", timeout=120, max_retries=2) as model:
        service = ToolService(max_tool_calling_round_trips=6).tools(imported)
        result = service.chat(model, params, "What is the weather in Paris today?")
    assert result.tool_executions, "the model made no tool call"
    for execution in result.tool_executions:
        assert execution.request.name == "get_weather"
        arguments: dict[str, Any] = json.loads(execution.request.arguments)
        assert isinstance(arguments.get("city"), str) and arguments["city"]
        assert not execution.result.is_error, execution.result.text
        assert "degrees Celsius" in execution.result.text
    assert result.text
