"""toolweave <-> LangChain: the langchain-tests standard suites on exported tools, the
semantics kept both ways, and LangChain's own file-management tools run by a `ToolService`."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Annotated, Any

import pytest

pytest.importorskip("langchain_core")
pytest.importorskip("langchain_tests")

from langchain_core.messages import ToolCall, ToolMessage
from langchain_core.tools import (
    BaseTool,
    BaseToolkit,
    InjectedToolArg,
    StructuredTool,
    ToolException,
)
from langchain_core.tools import tool as lc_tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langchain_tests.integration_tests import ToolsIntegrationTests
from langchain_tests.unit_tests import ToolsUnitTests

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
from toolweave.interop.langchain import (
    LangChainTool,
    ToolweaveLangChainTool,
    from_langchain,
    to_langchain,
)

from .support import (
    PNG,
    Recorder,
    aforecast,
    chart,
    divide,
    final_answer,
    forecast,
    save_note,
    slow,
)


def _call(name: str, args: dict[str, Any], call_id: str = "call_1") -> ToolCall:
    return ToolCall(name=name, args=args, id=call_id, type="tool_call")


# the standard suites, on exported tools ------------------------------------------------------


class TestExportedSyncToolUnit(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return to_langchain(forecast)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"city": "Paris", "days": 2}


class TestExportedSyncToolIntegration(ToolsIntegrationTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return to_langchain(forecast)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"city": "Paris", "days": 2}


class TestExportedAsyncToolUnit(ToolsUnitTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return to_langchain(aforecast)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"city": "Oslo"}


class TestExportedAsyncToolIntegration(ToolsIntegrationTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return to_langchain(aforecast)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"city": "Oslo"}


class TestExportedMediaToolIntegration(ToolsIntegrationTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return to_langchain(chart)

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"title": "sales"}


class TestExportedContentOnlyToolIntegration(ToolsIntegrationTests):
    @property
    def tool_constructor(self) -> BaseTool:
        return to_langchain(forecast, response_format="content")

    @property
    def tool_invoke_params_example(self) -> dict[str, Any]:
        return {"city": "Rome"}


# toolweave -> LangChain: what is kept ------------------------------------------------------


def test_exported_tool_describes_the_card() -> None:
    lc = to_langchain(forecast)
    assert isinstance(lc, ToolweaveLangChainTool)
    assert lc.toolweave_tool is forecast
    assert (lc.name, lc.description) == ("forecast", forecast.card.description)
    assert lc.args_schema == forecast.card.input_params
    parameters = convert_to_openai_tool(lc)["function"]["parameters"]
    assert parameters == forecast.card.input_params
    assert lc.get_input_schema().model_json_schema() == forecast.card.input_params


def test_results_are_toolweave_text_with_the_raw_value_as_artifact() -> None:
    lc = to_langchain(forecast)
    message = lc.invoke(_call("forecast", {"city": "Paris", "days": "3"}))
    assert isinstance(message, ToolMessage)
    assert message.content == '{"city":"Paris","days":3,"unit":"C"}'  # coerced, compact JSON
    assert message.artifact == {"city": "Paris", "days": 3, "unit": "C"}
    assert message.status == "success"
    assert lc.invoke({"city": "Paris"}) == '{"city":"Paris","days":1,"unit":"C"}'


def test_bad_arguments_reach_the_model_as_toolweaves_message() -> None:
    message = to_langchain(forecast).invoke(_call("forecast", {"days": "three"}))
    assert message.status == "error"
    assert message.content.startswith("Invalid arguments for tool 'forecast':")
    assert "- city: missing required argument" in message.content
    assert "Fix these arguments and call the tool again." in message.content


def test_a_failure_is_a_tool_exception_with_toolweaves_text() -> None:
    message = to_langchain(divide).invoke(_call("divide", {"a": 1, "b": 0}))
    assert message.status == "error"
    assert message.content == "float division by zero"
    with pytest.raises(ToolException, match="float division by zero"):
        to_langchain(divide, handle_tool_error=False).invoke({"a": 1, "b": 0})


def test_the_timeout_is_toolweaves() -> None:
    message = asyncio.run(to_langchain(slow).ainvoke(_call("slow", {"seconds": 5})))
    assert message.status == "error"
    assert message.content == "tool 'slow' did not finish within 0.2 s and was cancelled"


def test_callbacks_fire_on_both_faces() -> None:
    recorder = Recorder()
    recorded = tool(forecast.func, callbacks=recorder.framework)
    lc = to_langchain(recorded)
    lc.invoke(_call("forecast", {"city": "Paris"}))
    asyncio.run(lc.ainvoke(_call("forecast", {"city": "Paris"})))
    lc.invoke(_call("forecast", {"days": 2}))
    assert recorder.events == [
        "tool_call_started",
        "tool_call_finished",
        "tool_call_started",
        "tool_call_finished",
        "tool_call_started",
        "tool_call_error",
    ]


def test_media_becomes_content_blocks() -> None:
    message = to_langchain(chart).invoke(_call("chart", {"title": "sales"}))
    assert message.content == [
        {"type": "text", "text": "chart of sales"},
        {"type": "image", "mime_type": "image/png", "base64": PNG},
    ]
    assert len(message.artifact) == 2


def test_immediate_return_is_return_direct() -> None:
    assert to_langchain(final_answer).return_direct
    assert not to_langchain(forecast).return_direct


def test_the_call_id_and_configurable_reach_the_tool() -> None:
    notes: dict[str, str] = {}
    lc = to_langchain(save_note)
    assert "notes" not in lc.args and "ctx" not in lc.args
    out = lc.invoke(
        _call("save_note", {"text": "hi"}, "call_9"), config={"configurable": {"notes": notes}}
    )
    assert out.content == "saved 'hi'"
    assert notes == {"call_9": "hi"}


def test_many_tools_give_a_list() -> None:
    tools = to_langchain([forecast, divide])
    assert [t.name for t in tools] == ["forecast", "divide"]
    with pytest.raises(TypeError):
        to_langchain([forecast, "divide"])  # type: ignore[list-item]


# LangChain -> toolweave --------------------------------------------------------------------


@lc_tool
def multiply(x: int, y: int = 2) -> int:
    """Multiply x by y."""
    return x * y


@lc_tool
async def amultiply(x: int, y: int) -> int:
    """Multiply x by y, asynchronously."""
    await asyncio.sleep(0)
    return x * y


@lc_tool(response_format="content_and_artifact")
def search(query: str) -> tuple[str, list[dict[str, Any]]]:
    """Search the catalogue."""
    hits = [{"id": 1, "title": f"{query} guide"}]
    return f"1 hit for {query}", hits


@lc_tool
def explode(reason: str) -> str:
    """Always fails."""
    raise ToolException(f"cannot: {reason}")


@lc_tool(return_direct=True)
def hand_over(summary: str) -> str:
    """Hand the summary to the user."""
    return summary


@lc_tool
def lookup(key: str, store: Annotated[dict[str, str], InjectedToolArg]) -> str:
    """Look a key up."""
    return store.get(key, "missing")


def test_imported_card_uses_langchains_schema() -> None:
    imported = from_langchain(multiply)
    assert isinstance(imported, LangChainTool)
    assert imported.langchain_tool is multiply
    expected = convert_to_openai_tool(multiply)["function"]
    assert imported.card.name == "multiply"
    assert imported.card.description == expected["description"]
    assert imported.card.input_params == expected["parameters"]
    assert imported.card.metadata["interop"] == "langchain"


def test_imported_tool_runs_with_toolweaves_validation() -> None:
    imported = from_langchain(multiply)
    assert imported.invoke('{"x": "4"}') == 8  # the model's raw JSON, coerced, default filled
    assert asyncio.run(imported.ainvoke({"x": 3, "y": 3})) == 9
    with pytest.raises(ToolArgumentsError, match="x: missing required argument"):
        imported.invoke({"y": 3})


def test_async_only_tool_has_both_faces() -> None:
    imported = from_langchain(amultiply)
    assert imported.invoke({"x": 2, "y": 5}) == 10
    assert asyncio.run(imported.ainvoke({"x": 2, "y": 6})) == 12


def test_content_and_artifact_keep_both() -> None:
    result = DefaultToolExecutor(from_langchain(search)).execute_with_result(
        ToolExecutionRequest(id="c1", name="search", arguments='{"query": "tea"}')
    )
    assert result.text == "1 hit for tea"
    assert result.result == [{"id": 1, "title": "tea guide"}]


def test_tool_exception_is_an_error_result() -> None:
    result = DefaultToolExecutor(from_langchain(explode)).execute_with_result(
        ToolExecutionRequest(id="c1", name="explode", arguments='{"reason": "no"}')
    )
    assert result.is_error
    assert result.text == "cannot: no"
    handled = StructuredTool.from_function(
        explode.func, name="explode2", description="fails", handle_tool_error=True
    )
    result = DefaultToolExecutor(from_langchain(handled)).execute_with_result(
        ToolExecutionRequest(id="c2", name="explode2", arguments='{"reason": "no"}')
    )
    assert result.is_error
    assert result.text == "cannot: no"


def test_return_direct_is_immediate_in_the_loop() -> None:
    imported = from_langchain(hand_over)
    assert imported.card.return_behavior is ReturnBehavior.IMMEDIATE
    call = ToolExecutionRequest(id="c1", name="hand_over", arguments='{"summary": "all done"}')
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[call])])
    result = ToolService().tools(imported).chat(model, None, "summarise")
    assert result.immediate
    assert result.tool_executions[0].result.text == "all done"


def test_injected_tool_args_come_from_toolweaves_injected_values() -> None:
    imported = from_langchain(lookup)
    assert list(imported.card.input_params["properties"]) == ["key"]
    call = ToolExecutionRequest(id="c1", name="lookup", arguments='{"key": "a"}')
    model = ScriptedChatModel([AiMessage(tool_execution_requests=[call]), AiMessage("ok")])
    result = (
        ToolService()
        .tools(imported)
        .chat(model, None, "look a up", injected={"store": {"a": "apple"}})
    )
    assert result.tool_executions[0].result.text == "apple"


def test_toolkits_and_lists_give_lists() -> None:
    class Kit(BaseToolkit):
        def get_tools(self) -> list[BaseTool]:
            return [multiply, search]

    assert [t.name for t in from_langchain(Kit())] == ["multiply", "search"]
    assert [t.name for t in from_langchain([multiply])] == ["multiply"]


def test_a_name_no_provider_takes_is_made_valid() -> None:
    odd = StructuredTool.from_function(multiply.func, name="multiply numbers!", description="x")
    imported = from_langchain(odd)
    assert imported.name == "multiply_numbers_"
    assert imported.card.metadata["langchain_name"] == "multiply numbers!"


# existing LangChain tools in a ToolService -------------------------------------------------


def test_langchain_file_management_toolkit_in_a_tool_service(tmp_path: Path) -> None:
    community = pytest.importorskip("langchain_community.agent_toolkits")
    toolkit = community.FileManagementToolkit(root_dir=str(tmp_path))
    tools = from_langchain(toolkit)
    assert {"read_file", "write_file", "list_directory"} <= {t.name for t in tools}
    write = ToolExecutionRequest(
        id="w1", name="write_file", arguments='{"file_path": "notes.txt", "text": "tea at 5"}'
    )
    listing = ToolExecutionRequest(id="l1", name="list_directory", arguments="{}")
    read = ToolExecutionRequest(id="r1", name="read_file", arguments="{'file_path': 'notes.txt'}")
    bad = ToolExecutionRequest(id="b1", name="read_file", arguments='{"path": "notes.txt"}')
    model = ScriptedChatModel(
        [
            AiMessage(tool_execution_requests=[write]),
            AiMessage(tool_execution_requests=[listing, read]),
            AiMessage(tool_execution_requests=[bad]),
            AiMessage("Your note says: tea at 5"),
        ]
    )
    result = ToolService().tools(tools).chat(model, None, "save and read my note")
    texts = {e.request.id: e.result for e in result.tool_executions}
    assert (tmp_path / "notes.txt").read_text() == "tea at 5"
    assert "notes.txt" in texts["l1"].text
    assert texts["r1"].text == "tea at 5"  # the Python-literal arguments were repaired
    assert texts["b1"].is_error
    assert "file_path: missing required argument" in texts["b1"].text
    assert result.text == "Your note says: tea at 5"


def test_exported_tools_run_in_a_langchain_tool_calling_loop() -> None:
    """A minimal LangChain agent loop: a fake chat model asks for tools, the tools run by
    `ToolMessage`, as `create_agent` / LangGraph's `ToolNode` run them."""
    fake = pytest.importorskip("langchain_core.language_models.fake_chat_models")
    from langchain_core.messages import AIMessage, HumanMessage

    tools = {t.name: t for t in to_langchain([forecast, divide])}
    model = fake.FakeMessagesListChatModel(
        responses=[
            AIMessage(
                content="",
                tool_calls=[
                    _call("forecast", {"city": "Paris", "days": 2}, "c1"),
                    _call("divide", {"a": 1, "b": 0}, "c2"),
                ],
            ),
            AIMessage(content="Paris: 2 days; cannot divide by zero."),
        ]
    )
    messages: list[Any] = [HumanMessage("weather and a division")]
    while True:
        reply = model.invoke(messages)
        messages.append(reply)
        if not reply.tool_calls:
            break
        messages.extend(tools[c["name"]].invoke(c) for c in reply.tool_calls)
    outputs = [m for m in messages if isinstance(m, ToolMessage)]
    assert [m.status for m in outputs] == ["success", "error"]
    assert json.loads(outputs[0].content) == {"city": "Paris", "days": 2, "unit": "C"}
    assert outputs[1].content == "float division by zero"
