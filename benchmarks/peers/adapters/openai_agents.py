"""openai-agents: `function_tool` / `FunctionTool.on_invoke_tool`, `Runner.run` with a
minimal fake `Model`, the Chat Completions stream handler and `Converter.tool_to_openai`."""

from __future__ import annotations

import itertools
import time
from collections.abc import AsyncIterator
from typing import Any

from agents import Agent, RunConfig, Runner, function_tool, set_tracing_disabled
from agents.items import ItemHelpers, ModelResponse
from agents.models.chatcmpl_converter import Converter
from agents.models.chatcmpl_stream_handler import ChatCmplStreamHandler
from agents.models.interface import Model
from agents.run_context import RunContextWrapper
from agents.testing import assistant_message, function_call
from agents.tool_context import ToolContext
from agents.usage import Usage
from openai.types.chat import ChatCompletionChunk
from openai.types.responses import Response, ResponseFunctionToolCall

from .. import _subject
from .._common import (
    BAD_ARGS,
    RAW_ARGS,
    W5_CALLS,
    W6_ROUNDS,
    Case,
    Env,
    async_case,
    expected_stream_arguments,
    na,
    stream_chunks,
    sync_case,
)

NAME = "openai_agents"
DISTRIBUTIONS = ("openai-agents", "openai", "pydantic", "griffe")
IMPORTS = ("import agents", "from agents import function_tool")
"""I: importing the package, and importing what declaring a tool needs."""


class _ScriptedModel(Model):
    """The smallest `Model`: returns the next scripted output (cycling)."""

    def __init__(self, script: list[list[Any]]) -> None:
        self._cursor = itertools.cycle(script)

    async def get_response(self, *args: Any, **kwargs: Any) -> ModelResponse:
        return ModelResponse(output=next(self._cursor), usage=Usage(), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError


async def _aggregate(chunks: list[ChatCompletionChunk]) -> list[Any]:
    response = Response(
        id="__fake_id__",
        created_at=time.time(),
        model="m",
        object="response",
        output=[],
        tool_choice="auto",
        top_p=None,
        temperature=None,
        tools=[],
        parallel_tool_calls=True,
        reasoning=None,
    )

    async def stream() -> AsyncIterator[ChatCompletionChunk]:
        for chunk in chunks:
            yield chunk

    final = None
    async for event in ChatCmplStreamHandler.handle_stream(response, stream()):  # type: ignore[arg-type]
        if event.type == "response.completed":
            final = event.response
    assert final is not None
    return [item for item in final.output if item.type == "function_call"]


def cases(env: Env) -> list[Case]:
    set_tracing_disabled(True)
    loop = env.loop
    sync_tool = function_tool(_subject.search_flights)
    async_tool = function_tool(_subject.asearch_flights)

    def declare() -> Any:
        return Converter.tool_to_openai(function_tool(_subject.fresh(_subject.search_flights)))

    async def call(tool: Any, args: str) -> str:
        # what the runner does per function call: ToolContext, on_invoke_tool (JSON parse,
        # pydantic validation, call), then the output item whose text goes to the model
        item = ResponseFunctionToolCall(
            id="fc_1", call_id="call_1", type="function_call", name=tool.name, arguments=args
        )
        ctx = ToolContext(
            context=None,
            tool_name=tool.name,
            tool_call_id="call_1",
            tool_arguments=args,
            tool_call=item,
        )
        output = await tool.on_invoke_tool(ctx, args)
        return ItemHelpers.tool_call_output_item(item, output)["output"]

    async def w4() -> str:
        text = await call(sync_tool, BAD_ARGS)
        assert text.startswith("An error occurred"), text
        return text

    w5_agent = Agent(
        name="w5",
        model=_scripted_fan_out(),
        tools=[function_tool(_subject.wait_20ms)],
    )
    config = RunConfig(tracing_disabled=True)

    async def w5() -> Any:
        result = await Runner.run(w5_agent, "go", run_config=config, max_turns=100)
        assert result.final_output == "done"
        return result

    w6_agent = Agent(
        name="w6",
        model=_ScriptedModel(
            [[function_call("ping", {"n": r}, call_id=f"call_{r}")] for r in range(W6_ROUNDS)]
            + [[assistant_message("done")]]
        ),
        tools=[function_tool(_subject.ping)],
    )

    async def w6() -> Any:
        result = await Runner.run(w6_agent, "go", run_config=config, max_turns=100)
        assert result.final_output == "done"
        return result

    # the SDK's objects are built from the wire by the openai client; that step is left out
    chunks = [ChatCompletionChunk.model_validate(c) for c in stream_chunks()]
    calls = loop.run_until_complete(_aggregate(chunks))
    assert [c.arguments for c in calls] == expected_stream_arguments()

    out: list[Case] = [
        sync_case("W1.cold", "function_tool(new function) + Converter.tool_to_openai", declare),
        sync_case(
            "W1.cached",
            "Converter.tool_to_openai(tool) (per request)",
            lambda: Converter.tool_to_openai(sync_tool),
        ),
        na("W2", "invoke sync", "FunctionTool.on_invoke_tool is async only"),
        async_case(
            "W3",
            "on_invoke_tool + tool_call_output_item",
            lambda: call(async_tool, RAW_ARGS),
            loop,
            baseline="W0a",
        ),
        async_case(
            "W3s", "same, sync function", lambda: call(sync_tool, RAW_ARGS), loop, baseline="W0t"
        ),
        async_case(
            "W4",
            "on_invoke_tool -> default failure_error_function text",
            w4,
            loop,
            baseline="W0a",
            note="async only; the default text is fixed and names no field",
        ),
        async_case("W5", "Runner.run: 50 calls", w5, loop, baseline="W5.one"),
        async_case("W6", "Runner.run, per round", w6, loop, baseline="W6.plain", per=W6_ROUNDS),
        async_case(
            "W7",
            "ChatCmplStreamHandler.handle_stream (ChatCompletionChunk objects)",
            lambda: _aggregate(chunks),
            loop,
            baseline="W7.plain",
            note="input already parsed into openai SDK objects",
        ),
    ]
    ctx = RunContextWrapper(context=None)
    for n in env.sizes:
        tools = [
            function_tool(
                _subject.lookup,
                name_override=f"tool_{i}",
                description_override=f"Tool number {i}: look a key up.",
            )
            for i in range(n)
        ]
        agent = Agent(name="big", tools=tools)
        names = [f"tool_{i}" for i in range(0, n, max(1, n // 100))]

        async def request_tools(agent: Any = agent) -> list[Any]:
            # every turn: the enabled tools, then the Chat Completions conversion of each
            return [Converter.tool_to_openai(t) for t in await agent.get_all_tools(ctx)]

        async def lookups(agent: Any = agent, names: list[str] = names) -> None:
            # every turn the runner builds a name -> tool map of the enabled tools
            table = {t.name: t for t in await agent.get_all_tools(ctx)}
            for name in names:
                table[name]

        out += [
            sync_case(
                f"W8.register.{n}",
                f"Agent(tools={n} tools)",
                lambda t=tools: Agent(name="big", tools=t),
            ),
            async_case(
                f"W8.request.{n}", "get_all_tools + Converter.tool_to_openai", request_tools, loop
            ),
            async_case(
                f"W8.lookup.{n}",
                "per-turn name map (get_all_tools) + lookups",
                lookups,
                loop,
                per=len(names),
                note="the map is rebuilt every turn; amortised over 100 lookups",
            ),
        ]
    return out


def _scripted_fan_out() -> _ScriptedModel:
    return _ScriptedModel(
        [
            [function_call("wait_20ms", {"i": i}, call_id=f"call_{i}") for i in range(W5_CALLS)],
            [assistant_message("done")],
        ]
    )
