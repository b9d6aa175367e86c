"""toolweave <-> LlamaIndex: exported tools in a `FunctionAgent` driven by LlamaIndex's mock
function-calling LLM, and LlamaIndex tools and tool specs that work offline (a SQLite
database, a Python file) run by a `ToolService`."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("llama_index.core")

from llama_index.core.agent.workflow import FunctionAgent
from llama_index.core.base.llms.types import ImageBlock, TextBlock, ToolCallBlock
from llama_index.core.llms import ChatMessage
from llama_index.core.llms.mock import MockFunctionCallingLLM
from llama_index.core.tools import FunctionTool, ToolOutput
from llama_index.core.tools.types import AsyncBaseTool, ToolMetadata
from llama_index.core.workflow import Context

from toolweave import (
    AiMessage,
    DefaultToolExecutor,
    ReturnBehavior,
    ScriptedChatModel,
    ToolArgumentsError,
    ToolExecutionRequest,
    ToolService,
    tool,
)
from toolweave.interop.llamaindex import (
    LlamaIndexTool,
    ToolweaveLlamaIndexTool,
    from_llamaindex,
    to_llamaindex,
)

from .support import Recorder, chart, divide, final_answer, forecast, save_note, slow

# LlamaIndex's workflow runtime inspects its pydantic events through deprecated attributes
pytestmark = pytest.mark.filterwarnings("ignore::pydantic.warnings.PydanticDeprecationWarning")


def _llm(*turns: list[tuple[str, Any]] | str) -> MockFunctionCallingLLM:
    """LlamaIndex's mock LLM answering with the given turns: (tool, arguments) calls (a
    dict, or the raw JSON string the LLM would send), or a final text."""
    pending = list(turns)

    def respond(messages: Any, **kwargs: Any) -> ChatMessage:
        turn = pending.pop(0)
        if isinstance(turn, str):
            return ChatMessage(role="assistant", content=turn)
        blocks = [
            ToolCallBlock(tool_call_id=f"c{len(pending)}_{i}", tool_name=name, tool_kwargs=args)
            for i, (name, args) in enumerate(turn)
        ]
        return ChatMessage(role="assistant", blocks=blocks)

    return MockFunctionCallingLLM(response_generator=respond)


def _run(agent: FunctionAgent, message: str) -> Any:
    async def main() -> Any:
        return await agent.run(user_msg=message)

    return asyncio.run(main())


# toolweave -> LlamaIndex -------------------------------------------------------------------


def test_exported_metadata_is_the_card() -> None:
    exported = to_llamaindex(forecast)
    assert isinstance(exported, ToolweaveLlamaIndexTool)
    meta = exported.metadata
    assert (meta.name, meta.description) == ("forecast", forecast.card.description)
    assert meta.get_parameters_dict() == forecast.card.input_params
    assert meta.to_openai_tool()["function"]["parameters"] == forecast.card.input_params
    assert meta.fn_schema is not None
    assert meta.fn_schema(city="Paris", days="2").model_dump() == {
        "city": "Paris",
        "days": 2,
        "metric": True,
    }


def test_function_agent_calls_exported_tools() -> None:
    llm = _llm(
        [("forecast", {"city": "Paris", "days": "2"}), ("divide", '{"a": 1, "b": 4}')],
        "Sunny; a quarter.",
    )
    agent = FunctionAgent(tools=to_llamaindex([forecast, divide]), llm=llm)
    result = _run(agent, "weather and a division")
    assert str(result) == "Sunny; a quarter."
    outputs = {c.tool_name: c.tool_output for c in result.tool_calls}
    assert outputs["forecast"].content == '{"city":"Paris","days":2,"unit":"C"}'
    assert outputs["forecast"].raw_output == {"city": "Paris", "days": 2, "unit": "C"}
    assert outputs["divide"].content == "0.25"
    assert not any(o.is_error for o in outputs.values())


def test_bad_arguments_and_failures_are_error_outputs() -> None:
    llm = _llm(
        [("forecast", {"days": "three"}), ("divide", {"a": 1, "b": 0}), ("slow", {"seconds": 5})],
        "sorry",
    )
    result = _run(FunctionAgent(tools=to_llamaindex([forecast, divide, slow]), llm=llm), "go")
    outputs = [c.tool_output for c in result.tool_calls]
    assert all(o.is_error for o in outputs)
    assert outputs[0].content.startswith("Invalid arguments for tool 'forecast':")
    assert isinstance(outputs[0].exception, ToolArgumentsError)
    assert outputs[1].content == "float division by zero"
    assert outputs[2].content == "tool 'slow' did not finish within 0.2 s and was cancelled"


def test_return_direct_ends_the_agent_run() -> None:
    assert to_llamaindex(final_answer).metadata.return_direct
    llm = _llm([("final_answer", {"answer": "42"})], "never reached")
    result = _run(FunctionAgent(tools=[to_llamaindex(final_answer)], llm=llm), "answer?")
    assert str(result) == "42"


def test_both_faces_and_callbacks() -> None:
    recorder = Recorder()
    exported = to_llamaindex(tool(forecast.func, callbacks=recorder.framework))
    assert exported.call(city="Oslo").raw_output["city"] == "Oslo"
    assert asyncio.run(exported.acall(city="Oslo")).content.startswith('{"city":"Oslo"')
    assert exported('{"city": "Bergen"}').raw_output["city"] == "Bergen"  # tool(input)
    assert exported.call(days=1).is_error
    assert recorder.events == [
        "tool_call_started",
        "tool_call_finished",
        "tool_call_started",
        "tool_call_finished",
        "tool_call_started",
        "tool_call_finished",
        "tool_call_started",
        "tool_call_error",
    ]


def test_context_reaches_injected_values() -> None:
    notes: dict[str, str] = {}
    exported = to_llamaindex(save_note, context={"notes": notes})
    assert list(exported.metadata.get_parameters_dict()["properties"]) == ["text"]
    assert exported.call(text="milk").content == "saved 'milk'"
    assert list(notes.values()) == ["milk"]


def test_media_becomes_blocks() -> None:
    output = to_llamaindex(chart).call(title="q3")
    text, image = output.blocks
    assert isinstance(text, TextBlock) and text.text == "chart of q3"
    assert isinstance(image, ImageBlock) and image.image_mimetype == "image/png"


# LlamaIndex -> toolweave -------------------------------------------------------------------


def multiply(x: int, y: int = 2) -> int:
    """Multiply x by y."""
    return x * y


async def lookup(city: str) -> str:
    """Look a city up."""
    if city == "Atlantis":
        raise LookupError("no such city")
    return f"{city} is nice"


def test_imported_card_uses_llamaindexs_schema() -> None:
    native = FunctionTool.from_defaults(multiply)
    imported = from_llamaindex(native)
    assert isinstance(imported, LlamaIndexTool)
    assert imported.card.name == "multiply"
    assert imported.card.description == native.metadata.description
    assert imported.card.input_params == native.metadata.get_parameters_dict()


def test_imported_function_tools_in_a_tool_service() -> None:
    tools = from_llamaindex(
        [FunctionTool.from_defaults(multiply), FunctionTool.from_defaults(async_fn=lookup)]
    )
    calls = [
        ToolExecutionRequest(id="c1", name="multiply", arguments='{"x": "3"}'),
        ToolExecutionRequest(id="c2", name="lookup", arguments='{"city": "Atlantis"}'),
        ToolExecutionRequest(id="c3", name="lookup", arguments='{"town": "Rome"}'),
    ]
    model = ScriptedChatModel([AiMessage(tool_execution_requests=calls), AiMessage("done")])
    result = ToolService().tools(tools).chat(model, None, "?")
    first, second, third = (e.result for e in result.tool_executions)
    assert first.text == "6" and first.result == 6
    assert second.is_error and second.text == "no such city"
    assert third.is_error and "city: missing required argument" in third.text


def test_error_outputs_and_return_direct_map_over() -> None:
    class Refuse(AsyncBaseTool):
        @property
        def metadata(self) -> ToolMetadata:
            return ToolMetadata(description="Refuse.", name="refuse", fn_schema=None)

        def call(self, input: str) -> ToolOutput:
            return ToolOutput(
                content=f"refused: {input}", tool_name="refuse", raw_input={}, is_error=True
            )

        async def acall(self, input: str) -> ToolOutput:
            return self.call(input)

    imported = from_llamaindex(Refuse())
    assert imported.card.input_params["required"] == ["input"]
    refused = DefaultToolExecutor(imported).execute_with_result(
        ToolExecutionRequest(id="c1", name="refuse", arguments='{"input": "x"}')
    )
    assert refused.is_error and refused.text == "refused: x"
    direct = from_llamaindex(FunctionTool.from_defaults(multiply, return_direct=True))
    assert direct.card.return_behavior is ReturnBehavior.IMMEDIATE


def test_database_tool_spec_in_a_tool_service(tmp_path: Path) -> None:
    database = pytest.importorskip("llama_index.tools.database")
    path = tmp_path / "shop.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE orders (id INTEGER, item TEXT, total REAL)")
        db.executemany("INSERT INTO orders VALUES (?, ?, ?)", [(1, "tea", 4.5), (2, "cake", 12.0)])
    tools = from_llamaindex(database.DatabaseToolSpec(uri=f"sqlite:///{path}"))
    assert {t.name for t in tools} == {"load_data", "describe_tables", "list_tables"}
    calls = [
        ToolExecutionRequest(id="t", name="list_tables", arguments=""),
        ToolExecutionRequest(id="d", name="describe_tables", arguments='{"tables": ["orders"]}'),
        ToolExecutionRequest(
            id="q", name="load_data", arguments='{"query": "SELECT item, total FROM orders"}'
        ),
    ]
    model = ScriptedChatModel([AiMessage(tool_execution_requests=calls), AiMessage("2 orders")])
    result = ToolService().tools(tools).chat(model, None, "what was ordered?")
    texts = {e.request.id: e.result for e in result.tool_executions}
    assert texts["t"].text == "['orders']"
    assert "CREATE TABLE orders" in texts["d"].text
    assert texts["q"].text == "tea, 4.5\ncake, 12.0"  # LlamaIndex's text of its Documents
    assert len(texts["q"].result) == 2  # the Documents themselves
    assert result.text == "2 orders"


def test_python_file_tool_spec_in_a_tool_service(tmp_path: Path) -> None:
    python_file = pytest.importorskip("llama_index.tools.python_file")
    source = tmp_path / "shop.py"
    source.write_text('def total(prices):\n    """Sum the prices."""\n    return sum(prices)\n')
    tools = from_llamaindex(python_file.PythonFileToolSpec(str(source)))
    call = ToolExecutionRequest(id="g", name="get_function", arguments='{"name": "total"}')
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[call]), AiMessage("found")])
    result = ToolService().tools(tools).chat(model, None, "show total()")
    assert "Sum the prices." in result.tool_executions[0].result.text


def test_a_tool_needing_a_workflow_context_says_so() -> None:
    async def remember(ctx: Context, fact: str) -> str:
        """Remember a fact."""
        return fact

    # LlamaIndex finds the Context parameter by its annotation object, not a string
    remember.__annotations__ = {"ctx": Context, "fact": str, "return": str}

    imported = from_llamaindex(FunctionTool.from_defaults(async_fn=remember))
    assert list(imported.card.input_params["properties"]) == ["fact"]
    result = DefaultToolExecutor(imported).execute_with_result(
        ToolExecutionRequest(id="c1", name="remember", arguments='{"fact": "x"}')
    )
    assert result.is_error and "needs a workflow Context" in result.text
