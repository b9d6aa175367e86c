"""toolweave: `@tool`, `DefaultToolExecutor`, `ToolService` with `ScriptedChatModel`,
the OpenAI stream aggregator, `openai_tool` over the registered cards."""

from __future__ import annotations

from typing import Any

from toolweave import (
    AiMessage,
    DefaultToolExecutor,
    ScriptedChatModel,
    ToolArgumentsError,
    ToolExecutionRequest,
    ToolService,
    tool,
)
from toolweave.dialects import openai_tool, openai_tools
from toolweave.providers import OpenAIStreamAggregator

from .. import _mcp, _subject
from .._common import (
    BAD_ARGS,
    RAW_ARGS,
    W5_CALLS,
    W6_ROUNDS,
    W7_READ,
    Case,
    Env,
    async_case,
    expected_stream_arguments,
    stream_chunks,
    sync_case,
)

NAME = "toolweave"
DISTRIBUTIONS = ("toolweave", "pydantic")
IMPORTS = ("import toolweave", "from toolweave import tool")
"""I: importing the package, and importing what declaring a tool needs."""


def _aggregate(chunks: list[dict[str, Any]]) -> list[ToolExecutionRequest]:
    """One chunk at a time, as the peers are fed: a `PartialToolCall` per fragment."""
    aggregator = OpenAIStreamAggregator()
    for chunk in chunks:
        aggregator.feed_chunk(chunk)
    aggregator.finish()
    return aggregator.requests


def _aggregate_per_read(chunks: list[dict[str, Any]]) -> list[ToolExecutionRequest]:
    """As the HTTP layer feeds it: the chunks of one network read at a time, the read's
    argument fragments coalesced into one `PartialToolCall`."""
    aggregator = OpenAIStreamAggregator()
    for i in range(0, len(chunks), W7_READ):
        aggregator.feed_chunks(chunks[i : i + W7_READ])
    aggregator.finish()
    return aggregator.requests


def cases(env: Env) -> list[Case]:
    loop = env.loop
    sync_tool = tool(_subject.search_flights)
    async_tool = tool(_subject.asearch_flights)
    sync_exec = DefaultToolExecutor(sync_tool)
    async_exec = DefaultToolExecutor(async_tool)
    openai_tool(sync_tool.card)

    def declare() -> Any:
        t = tool(_subject.fresh(_subject.search_flights))
        return openai_tool(t.card)

    def w2() -> str:
        request = ToolExecutionRequest(id="call_1", name="search_flights", arguments=RAW_ARGS)
        return sync_exec.execute_with_result(request).text

    async def w3() -> str:
        request = ToolExecutionRequest(id="call_1", name="asearch_flights", arguments=RAW_ARGS)
        return (await async_exec.aexecute_with_result(request)).text

    async def w3s() -> str:
        request = ToolExecutionRequest(id="call_1", name="search_flights", arguments=RAW_ARGS)
        return (await sync_exec.aexecute_with_result(request)).text

    def w4() -> str:
        request = ToolExecutionRequest(id="call_1", name="search_flights", arguments=BAD_ARGS)
        try:
            sync_exec.execute_with_result(request)
        except ToolArgumentsError as e:
            # what ToolService's default arguments_error_handler sends back (error_text)
            return e.message
        raise AssertionError("invalid arguments were accepted")

    # W5: one round of 50 calls, then the answer
    w5_tool = tool(_subject.wait_20ms)
    fan_out = AiMessage(
        tool_execution_requests=[
            ToolExecutionRequest(id=f"call_{i}", name="wait_20ms", arguments=f'{{"i": {i}}}')
            for i in range(W5_CALLS)
        ]
    )
    w5_script = [fan_out, AiMessage("done")]
    w5_default = ToolService().tools(w5_tool)
    w5_bounded = ToolService(max_concurrency=16).tools(w5_tool)

    async def w5(service: ToolService = w5_default) -> Any:
        result = await service.achat(ScriptedChatModel(w5_script), None, "go")
        assert len(result.tool_executions) == W5_CALLS
        return result

    async def w5_bounded_run() -> Any:
        return await w5(w5_bounded)

    # W6: 20 rounds of one trivial call
    w6_script = [
        AiMessage(
            tool_execution_requests=[
                ToolExecutionRequest(id=f"call_{r}", name="ping", arguments=f'{{"n": {r}}}')
            ]
        )
        for r in range(W6_ROUNDS)
    ] + [AiMessage("done")]
    w6_service = ToolService().tools(tool(_subject.ping))

    async def w6() -> Any:
        result = await w6_service.achat(ScriptedChatModel(w6_script), None, "go")
        assert len(result.tool_executions) == W6_ROUNDS
        return result

    # W7
    chunks = stream_chunks()
    for aggregate in (_aggregate, _aggregate_per_read):
        assert [r.arguments for r in aggregate(chunks)] == expected_stream_arguments()

    out: list[Case] = [
        sync_case("W1.cold", "declare: new function -> tool + OpenAI schema", declare),
        sync_case(
            "W1.cached", "OpenAI schema of an existing tool", lambda: openai_tool(sync_tool.card)
        ),
        sync_case("W2", "invoke sync: raw JSON -> text (execute_with_result)", w2, baseline="W0"),
        async_case("W3", "invoke async tool (aexecute_with_result)", w3, loop, baseline="W0a"),
        async_case("W3s", "sync body from async code", w3s, loop, baseline="W0t"),
        sync_case("W4", "invalid arguments -> error text", w4, baseline="W0"),
        async_case(
            "W5",
            f"{W5_CALLS} x 20 ms calls in one round (achat, default settings: no cap)",
            w5,
            loop,
            baseline="W5.one",
        ),
        async_case(
            "W5.c16",
            f"{W5_CALLS} x 20 ms calls, tuned: ToolService(max_concurrency=16), an opt-in bound",
            w5_bounded_run,
            loop,
            baseline="W5.one",
        ),
        async_case(
            "W6", "loop overhead per round (achat)", w6, loop, baseline="W6.plain", per=W6_ROUNDS
        ),
        sync_case(
            "W7",
            "stream aggregation, one chunk at a time",
            lambda: _aggregate(chunks),
            baseline="W7.plain",
            note="OpenAIStreamAggregator.feed_chunk",
        ),
        sync_case(
            "W7.read",
            f"stream aggregation, fed per network read ({W7_READ} chunks)",
            lambda: _aggregate_per_read(chunks),
            baseline="W7.plain",
            note="OpenAIStreamAggregator.feed_chunks, as the HTTP layer feeds it",
        ),
    ]
    out.extend(_scale_cases(env))
    return out


def late_cases(env: Env) -> list[Case]:
    """W9, measured after the others: an open stdio session to an MCP server slows every
    thread hand-off of the process (W0t, W3s) by an order of magnitude."""
    return _mcp.cases(env.loop, _HOLDERS)


_HOLDERS: list[Any] = []


def close() -> None:
    """Stop W9's MCP sessions and servers."""
    while _HOLDERS:
        _HOLDERS.pop().close()


def _scale_cases(env: Env) -> list[Case]:
    out: list[Case] = []
    for n in env.sizes:
        tools = [
            tool(name=f"tool_{i}", description=f"Tool number {i}: look a key up.")(_subject.lookup)
            for i in range(n)
        ]
        service = ToolService().tools(tools)
        cards = service.tool_cards
        names = [f"tool_{i}" for i in range(0, n, max(1, n // 100))]

        def register(tools: list[Any] = tools) -> Any:
            return ToolService().tools(tools)

        def request_tools(cards: Any = cards) -> list[dict[str, Any]]:
            # what OpenAIChatModel._body does for every request: the list of the service's
            # (unchanged) card tuple, cached, copied per request
            return openai_tools(cards)

        def lookups(names: list[str] = names, entries: Any = service._entries) -> None:
            for name in names:  # ToolService._dispatch: self._entries.get(call.name)
                entries.get(name)

        out += [
            sync_case(f"W8.register.{n}", f"register {n} tools (ToolService().tools)", register),
            sync_case(
                f"W8.request.{n}",
                f"tool list for one request, {n} tools (openai_tools, cached)",
                request_tools,
            ),
            sync_case(
                f"W8.lookup.{n}",
                f"lookup by name, {n} tools",
                lookups,
                per=len(names),
            ),
        ]
    return out
