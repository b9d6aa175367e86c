"""llama-index-core: `FunctionTool` (`call`/`acall`, `metadata.to_openai_tool`), and
`FunctionAgent` (a workflow) driven by the core's own `MockFunctionCallingLLM`."""

from __future__ import annotations

import itertools
import json
from typing import Any

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ChatMessage, MessageRole, ToolCallBlock
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool

from .. import _subject
from .._common import (
    BAD_ARGS,
    RAW_ARGS,
    W5_CALLS,
    W6_ROUNDS,
    Case,
    Env,
    async_case,
    na,
    sync_case,
)

NAME = "llama_index"
DISTRIBUTIONS = ("llama-index-core", "llama-index-workflows", "pydantic")
IMPORTS = ("import llama_index.core", "from llama_index.core.tools import FunctionTool")
"""I: importing the package, and importing what declaring a tool needs."""


def _llm(script: list[ChatMessage]) -> MockFunctionCallingLLM:
    cursor = itertools.cycle(script)
    return MockFunctionCallingLLM(response_generator=lambda messages, **kw: next(cursor))


def _calls(*calls: tuple[str, dict[str, Any], str]) -> ChatMessage:
    return ChatMessage(
        role=MessageRole.ASSISTANT,
        blocks=[ToolCallBlock(tool_call_id=i, tool_name=n, tool_kwargs=a) for n, a, i in calls],
    )


def cases(env: Env) -> list[Case]:
    loop = env.loop
    sync_tool = FunctionTool.from_defaults(_subject.search_flights)
    async_tool = FunctionTool.from_defaults(async_fn=_subject.asearch_flights)

    def declare() -> Any:
        t = FunctionTool.from_defaults(_subject.fresh(_subject.search_flights))
        return t.metadata.to_openai_tool(skip_length_check=True)

    # the LLM integration parses the arguments (parse_partial_json); json.loads stands in
    def w2() -> str:
        return str(sync_tool.call(**json.loads(RAW_ARGS)))

    async def w3() -> str:
        return str(await async_tool.acall(**json.loads(RAW_ARGS)))

    async def w3s() -> str:
        return str(await sync_tool.acall(**json.loads(RAW_ARGS)))

    def w4() -> str:
        # no validation: the call itself fails; the agent sends str(exception) back
        try:
            return str(sync_tool.call(**json.loads(BAD_ARGS)))
        except Exception as e:
            return str(e)

    w5_agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(async_fn=_subject.wait_20ms)],
        llm=_llm(
            [
                _calls(*[("wait_20ms", {"i": i}, f"call_{i}") for i in range(W5_CALLS)]),
                ChatMessage(role=MessageRole.ASSISTANT, content="done"),
            ]
        ),
        streaming=False,
    )

    async def w5() -> Any:
        result = await w5_agent.run(user_msg="go", max_iterations=1000)
        assert str(result) == "done", result
        return result

    w6_agent = FunctionAgent(
        tools=[FunctionTool.from_defaults(async_fn=_subject.ping)],
        llm=_llm(
            [_calls(("ping", {"n": r}, f"call_{r}")) for r in range(W6_ROUNDS)]
            + [ChatMessage(role=MessageRole.ASSISTANT, content="done")]
        ),
        streaming=False,
    )

    async def w6() -> Any:
        result = await w6_agent.run(user_msg="go", max_iterations=1000)
        assert str(result) == "done", result
        return result

    out: list[Case] = [
        sync_case("W1.cold", "FunctionTool.from_defaults(new function) + to_openai_tool", declare),
        sync_case(
            "W1.cached",
            "tool.metadata.to_openai_tool() (no cache)",
            lambda: sync_tool.metadata.to_openai_tool(skip_length_check=True),
        ),
        sync_case("W2", "json.loads + FunctionTool.call -> str(ToolOutput)", w2, baseline="W0"),
        async_case(
            "W3", "json.loads + await FunctionTool.acall (async_fn)", w3, loop, baseline="W0a"
        ),
        async_case("W3s", "same, sync function (run_in_executor)", w3s, loop, baseline="W0t"),
        sync_case(
            "W4",
            "FunctionTool.call -> str(exception)",
            w4,
            baseline="W0",
            note="no argument validation: only the missing field fails (TypeError); the wrong type passes",
        ),
        async_case(
            "W5", "FunctionAgent(MockFunctionCallingLLM).run: 50 calls", w5, loop, baseline="W5.one"
        ),
        async_case(
            "W6", "FunctionAgent.run, per round", w6, loop, baseline="W6.plain", per=W6_ROUNDS
        ),
        na(
            "W7",
            "stream aggregation",
            "llama-index-core has no stream aggregation of its own; it lives in "
            "llama-index-llms-openai, whose release pins openai<3 and cannot share a venv with "
            "openai-agents (openai>=3)",
        ),
    ]
    for n in env.sizes:
        tools = [
            FunctionTool.from_defaults(
                _subject.lookup, name=f"tool_{i}", description=f"Tool number {i}: look a key up."
            )
            for i in range(n)
        ]
        agent = FunctionAgent(tools=tools, llm=_llm([]))
        names = itertools.cycle([f"tool_{i}" for i in range(0, n, max(1, n // 100))])

        async def lookup(agent: Any = agent, names: Any = names) -> Any:
            # BaseWorkflowAgent.call_tool, for every tool call
            name = next(names)
            tools_by_name = {t.metadata.name: t for t in await agent.get_tools(name)}
            return tools_by_name[name]

        out += [
            sync_case(
                f"W8.register.{n}",
                f"FunctionAgent(tools={n} tools)",
                lambda t=tools: FunctionAgent(tools=t, llm=_llm([])),
            ),
            sync_case(
                f"W8.request.{n}",
                "[t.metadata.to_openai_tool() for t in tools] (llama-index-llms-openai, every call)",
                lambda t=tools: [x.metadata.to_openai_tool(skip_length_check=True) for x in t],
            ),
            async_case(
                f"W8.lookup.{n}",
                "get_tools + name map, rebuilt for every tool call",
                lookup,
                loop,
            ),
        ]
    return out
