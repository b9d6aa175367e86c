"""langchain-core tools (`StructuredTool`, `convert_to_openai_tool`, `AIMessageChunk`
merging) and the langgraph prebuilt agent (`create_react_agent` + `ToolNode`) driven by a
scripted chat model."""

from __future__ import annotations

import itertools
import json
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk
from langchain_core.messages.tool import tool_call_chunk
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import StructuredTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.prebuilt import ToolNode, create_react_agent
from pydantic import ConfigDict

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
    stream_chunks,
    sync_case,
)

NAME = "langchain"
DISTRIBUTIONS = ("langchain-core", "langgraph", "langgraph-prebuilt", "pydantic")
IMPORTS = ("import langchain_core.tools", "from langchain_core.tools import tool")
"""I: importing the package, and importing what declaring a tool needs."""


class ScriptedChatModel(BaseChatModel):
    """Replays AI messages in a cycle (each agent run consumes the whole script)."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    script: list[AIMessage]
    cursor: Any = None

    def model_post_init(self, context: Any) -> None:
        self.cursor = itertools.cycle(self.script)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def _generate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=next(self.cursor))])

    async def _agenerate(
        self, messages: Any, stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=next(self.cursor))])

    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self


def _call(name: str, args: str, id: str = "call_1") -> dict[str, Any]:
    # langchain's parsers hand tools already-decoded args: decoding is part of the path
    return {"type": "tool_call", "name": name, "args": json.loads(args), "id": id}


def _aggregate(chunks: list[dict[str, Any]]) -> list[Any]:
    # what langchain-openai does per chunk (one AIMessageChunk with tool_call_chunks), then
    # what BaseChatModel.stream does at the end (merge the collected chunks once)
    messages = []
    for chunk in chunks:
        for choice in chunk["choices"]:
            delta = choice["delta"]
            parts = [
                tool_call_chunk(
                    name=(f.get("function") or {}).get("name"),
                    args=(f.get("function") or {}).get("arguments"),
                    id=f.get("id"),
                    index=f.get("index"),
                )
                for f in delta.get("tool_calls") or ()
            ]
            messages.append(
                AIMessageChunk(content=delta.get("content") or "", tool_call_chunks=parts)
            )
    merged = messages[0] + messages[1:]
    return merged.tool_call_chunks


def cases(env: Env) -> list[Case]:
    loop = env.loop
    sync_tool = StructuredTool.from_function(_subject.search_flights, parse_docstring=True)
    async_tool = StructuredTool.from_function(
        coroutine=_subject.asearch_flights, parse_docstring=True
    )
    checked_tool = StructuredTool.from_function(
        _subject.search_flights,
        parse_docstring=True,
        handle_validation_error=lambda e: str(e),
    )

    def declare() -> Any:
        t = StructuredTool.from_function(
            _subject.fresh(_subject.search_flights), parse_docstring=True
        )
        return convert_to_openai_tool(t)

    def w2() -> Any:
        return sync_tool.invoke(_call("search_flights", RAW_ARGS)).content

    async def w3() -> Any:
        return (await async_tool.ainvoke(_call("asearch_flights", RAW_ARGS))).content

    async def w3s() -> Any:
        return (await sync_tool.ainvoke(_call("search_flights", RAW_ARGS))).content

    def w4() -> Any:
        text = checked_tool.invoke(_call("search_flights", BAD_ARGS)).content
        assert "max_stops" in text and "airlines" in text, text
        return text

    # W5 / W6: langgraph's prebuilt ReAct agent (model node + ToolNode)
    w5_tool = StructuredTool.from_function(coroutine=_subject.wait_20ms, parse_docstring=True)
    fan_out = AIMessage(
        content="",
        tool_calls=[
            {"name": "wait_20ms", "args": {"i": i}, "id": f"call_{i}", "type": "tool_call"}
            for i in range(W5_CALLS)
        ],
    )
    w5_agent = create_react_agent(
        ScriptedChatModel(script=[fan_out, AIMessage(content="done")]), [w5_tool]
    )

    async def w5() -> Any:
        out = await w5_agent.ainvoke({"messages": [("user", "go")]}, {"recursion_limit": 1000})
        assert len(out["messages"]) == W5_CALLS + 3
        return out

    ping = StructuredTool.from_function(coroutine=_subject.ping, parse_docstring=True)
    w6_script = [
        AIMessage(
            content="",
            tool_calls=[{"name": "ping", "args": {"n": r}, "id": f"call_{r}", "type": "tool_call"}],
        )
        for r in range(W6_ROUNDS)
    ] + [AIMessage(content="done")]
    w6_agent = create_react_agent(ScriptedChatModel(script=w6_script), [ping])

    async def w6() -> Any:
        out = await w6_agent.ainvoke({"messages": [("user", "go")]}, {"recursion_limit": 1000})
        assert len(out["messages"]) == 2 * W6_ROUNDS + 2
        return out

    chunks = stream_chunks()
    assert [c["args"] for c in _aggregate(chunks)] == expected_stream_arguments()

    out: list[Case] = [
        sync_case(
            "W1.cold",
            "StructuredTool.from_function(parse_docstring) + convert_to_openai_tool",
            declare,
        ),
        sync_case(
            "W1.cached",
            "convert_to_openai_tool(tool) (no cache)",
            lambda: convert_to_openai_tool(sync_tool),
        ),
        sync_case("W2", "json.loads + tool.invoke(ToolCall).content", w2, baseline="W0"),
        async_case("W3", "await tool.ainvoke(ToolCall) (coroutine tool)", w3, loop, baseline="W0a"),
        async_case(
            "W3s", "await tool.ainvoke(ToolCall) (sync function)", w3s, loop, baseline="W0t"
        ),
        sync_case(
            "W4",
            "tool.invoke with handle_validation_error=str",
            w4,
            baseline="W0",
            note="default is to raise; ToolNode turns the raise into a message",
        ),
        async_case(
            "W5",
            "create_react_agent(...).ainvoke: 50 calls via ToolNode",
            w5,
            loop,
            baseline="W5.one",
        ),
        async_case(
            "W6",
            "create_react_agent(...).ainvoke, per round",
            w6,
            loop,
            baseline="W6.plain",
            per=W6_ROUNDS,
        ),
        sync_case(
            "W7",
            "AIMessageChunk per delta, merged once (BaseChatModel.stream)",
            lambda: _aggregate(chunks),
            baseline="W7.plain",
        ),
    ]
    for n in env.sizes:
        tools = [
            StructuredTool.from_function(
                _subject.lookup, name=f"tool_{i}", description=f"Tool number {i}: look a key up."
            )
            for i in range(n)
        ]
        node = ToolNode(tools)
        names = [f"tool_{i}" for i in range(0, n, max(1, n // 100))]

        def lookups(names: list[str] = names, table: Any = node.tools_by_name) -> None:
            for name in names:
                table[name]

        out += [
            sync_case(
                f"W8.register.{n}", f"ToolNode({n} tools)", lambda tools=tools: ToolNode(tools)
            ),
            sync_case(
                f"W8.request.{n}",
                f"[convert_to_openai_tool(t) for t in {n} tools]",
                lambda tools=tools: [convert_to_openai_tool(t) for t in tools],
                note="bind_tools converts once per bound model; nothing is cached per tool",
            ),
            sync_case(f"W8.lookup.{n}", "ToolNode.tools_by_name[name]", lookups, per=len(names)),
        ]
    return out
