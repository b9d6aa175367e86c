"""Tool output limits (issue 29 item 3): caps per tool, toolset and service, a token cap
through the caller's counter, the result store and `read_result`, parts counted by size,
and the history processor that stubs old results; through every face, with the scripted
model asserting what the model received."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from service.helpers import MODES, ai_calls, assert_history_valid, call, run
from toolweave import (
    AiMessage,
    ChatRequest,
    ClearToolResults,
    DirectoryResultStore,
    ImageContent,
    MemoryResultStore,
    ScriptedChatModel,
    StoredResult,
    TextContent,
    ToolCardError,
    ToolExecutionResultMessage,
    ToolService,
    UserMessage,
    history_processor,
    redact_secrets,
    tool,
)
from toolweave.toolsets import FunctionToolset

TEXT = "".join(f"line {i:04d}\n" for i in range(1000))  # 10,000 characters


def _results(model: ScriptedChatModel, turn: int) -> list[ToolExecutionResultMessage]:
    return [m for m in model.requests[turn].messages if isinstance(m, ToolExecutionResultMessage)]


def _tools_offered(model: ScriptedChatModel, turn: int) -> list[str]:
    return [c.name for c in model.requests[turn].parameters.tools or ()]


@tool(max_result_chars=100)
def report() -> str:
    """A long report."""
    return TEXT


@pytest.mark.parametrize("mode", MODES)
def test_a_result_over_the_cap_reaches_the_model_cut_with_a_marker(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("report", id="r1")), AiMessage("read it")])
    result = run(mode, ToolService().tools(report), model)
    answer = _results(model, 1)[-1]
    preview, marker = answer.text.split("\n[Output truncated:")
    assert preview + "\n" == TEXT[:100]  # ends at a line's end
    assert "the result of report is 10,000 characters" in marker
    assert "limit of 100 characters" in marker
    assert "9,900 characters cut" in marker
    assert "read_result" not in answer.text  # no store: nothing to page through
    info = answer.attributes["toolweave.truncated"]
    assert info == {"size": 10000, "shown": 100, "limit": "100 characters", "result_id": None}
    # the caller keeps the raw value; the execution shows what the model got
    execution = result.tool_executions[0]
    assert execution.raw_result == TEXT
    assert execution.result_text == answer.text
    assert _tools_offered(model, 1) == ["report"]
    assert_history_valid(result.messages)


def test_a_result_within_the_cap_is_untouched() -> None:
    @tool(max_result_chars=10_000)
    def exact() -> str:
        """Exactly at the cap."""
        return TEXT

    model = ScriptedChatModel([ai_calls(call("exact", id="e")), AiMessage("ok")])
    ToolService().tools(exact).chat(model, None, "hi")
    answer = _results(model, 1)[-1]
    assert answer.text == TEXT and "toolweave.truncated" not in answer.attributes


def _long() -> str:
    return TEXT


@pytest.mark.parametrize("mode", MODES)
def test_the_most_specific_cap_wins(mode: str) -> None:
    own = tool(_long, name="own", max_result_chars=10)
    in_set = tool(_long, name="in_set")
    plain = tool(_long, name="plain")
    limited = FunctionToolset(own, in_set).limited(max_result_chars=20)
    model = ScriptedChatModel(
        [
            ai_calls(call("own", id="a"), call("in_set", id="b"), call("plain", id="c")),
            AiMessage("ok"),
        ]
    )
    service = ToolService(toolsets=[limited], max_result_chars=30).tools(plain)
    run(mode, service, model)
    shown = {m.id: m.attributes["toolweave.truncated"]["shown"] for m in _results(model, 1)}
    assert shown == {"a": 10, "b": 20, "c": 30}


@pytest.mark.parametrize("mode", MODES)
def test_a_token_cap_counts_with_the_callers_counter(mode: str) -> None:
    counted: list[int] = []

    def words(text: str) -> int:
        counted.append(len(text))
        return len(text.split())

    @tool(max_result_tokens=50)
    def wordy() -> str:
        """Many words."""
        return " ".join(f"w{i}" for i in range(500))

    model = ScriptedChatModel([ai_calls(call("wordy", id="w")), AiMessage("ok")])
    run(mode, ToolService(result_token_counter=words).tools(wordy), model)
    answer = _results(model, 1)[-1]
    preview = answer.text.split("\n[Output truncated:")[0]
    assert len(preview.split()) == 50 and preview.startswith("w0 w1 ")
    assert "(500 tokens)" in answer.text and "limit of 50 tokens" in answer.text
    assert counted  # the caller's counter did the counting


def test_a_token_cap_needs_a_counter() -> None:
    with pytest.raises(ToolCardError, match="result_token_counter"):
        ToolService(max_result_tokens=10)


@pytest.mark.parametrize("mode", MODES)
def test_images_count_by_their_size(mode: str) -> None:
    png = b"\x89PNG" + bytes(4000)

    @tool(max_result_chars=1000)
    def snapshot() -> list[Any]:
        """Text, then a 4 kB image."""
        return [TextContent(text="the chart:"), ImageContent.from_bytes(png)]

    @tool(max_result_chars=5000)
    def small() -> list[Any]:
        """The same, under a larger cap."""
        return [TextContent(text="the chart:"), ImageContent.from_bytes(png)]

    model = ScriptedChatModel(
        [ai_calls(call("snapshot", id="s"), call("small", id="t")), AiMessage("ok")]
    )
    run(mode, ToolService().tools(snapshot, small), model)
    cut, kept = _results(model, 1)
    assert cut.contents is not None
    assert [type(p).__name__ for p in cut.contents] == ["TextContent", "TextContent"]
    assert cut.contents[0].text == "the chart:"  # type: ignore[union-attr]
    assert "4,014 characters" in cut.text  # 10 characters of text + 4,004 bytes of image
    assert kept.contents is not None and isinstance(kept.contents[1], ImageContent)
    assert "toolweave.truncated" not in kept.attributes


def _reader(turn_result: int, page: int) -> Any:
    """A scripted turn reading `page` of the result the model got last."""

    def reply(request: ChatRequest) -> AiMessage:
        last = [m for m in request.messages if isinstance(m, ToolExecutionResultMessage)]
        rid = last[turn_result].attributes["toolweave.truncated"]["result_id"]
        return ai_calls(
            call("read_result", f'{{"result_id": "{rid}", "page": {page}}}', id=f"p{page}")
        )

    return reply


@pytest.mark.parametrize("mode", MODES)
def test_with_a_store_the_model_pages_through_the_whole_result(mode: str) -> None:
    store = MemoryResultStore()

    @tool(max_result_chars=4000)
    def dump() -> str:
        """A 10,000 character dump."""
        return TEXT

    model = ScriptedChatModel(
        [
            ai_calls(call("dump", id="d")),
            _reader(0, 2),
            _reader(0, 3),
            AiMessage("done"),
        ]
    )
    result = run(mode, ToolService(result_store=store).tools(dump), model)
    assert _tools_offered(model, 0) == ["dump"]  # nothing stored yet: no reader
    assert _tools_offered(model, 1) == ["dump", "read_result"]
    first, second, third = _results(model, 3)
    rid = first.attributes["toolweave.truncated"]["result_id"]
    assert first.text.startswith(TEXT[:4000]) and "page 1 of 3" in first.text
    assert f"read_result(result_id='{rid}', page=2)" in first.text
    assert second.text.startswith(f"[Page 2 of 3 of {rid} (dump), characters 4,001-8,000")
    assert TEXT[4000:8000] in second.text and "page=3" in second.text
    assert TEXT[8000:] in third.text and third.text.endswith("[This is the last page.]")
    assert len(store) == 1
    assert_history_valid(result.messages)


def test_a_stored_result_is_read_only_by_its_conversation() -> None:
    store = MemoryResultStore()
    asyncio.run(store.put("res_other", StoredResult("secret" * 100, 10, 10, "x", "c")))

    @tool(max_result_chars=10)
    def dump() -> str:
        """Dump."""
        return TEXT

    model = ScriptedChatModel(
        [
            ai_calls(call("dump", id="d")),
            ai_calls(call("read_result", '{"result_id": "res_other", "page": 1}', id="r")),
            AiMessage("no"),
        ]
    )
    ToolService(result_store=store).tools(dump).chat(model, None, "hi")
    answer = _results(model, 2)[-1]
    assert answer.is_error and "no stored result 'res_other'" in answer.text
    assert "secret" not in answer.text


def test_a_directory_store_serves_a_continued_conversation(tmp_path: Path) -> None:
    @tool(max_result_chars=4000)
    def dump() -> str:
        """Dump."""
        return TEXT

    first = ScriptedChatModel([ai_calls(call("dump", id="d")), AiMessage("later")])
    result = (
        ToolService(result_store=DirectoryResultStore(tmp_path)).tools(dump).chat(first, None, "hi")
    )
    assert len(list(tmp_path.glob("res_*.json"))) == 1
    # another service (another process, say) over the same directory continues it
    second = ScriptedChatModel([_reader(0, 3), AiMessage("done")])
    again = ToolService(result_store=DirectoryResultStore(tmp_path)).tools(dump)
    again.chat(second, None, [*result.messages, UserMessage("the end, please")])
    assert _tools_offered(second, 0) == ["dump", "read_result"]
    assert TEXT[8000:] in _results(second, 1)[-1].text


def test_a_tool_named_like_the_reader_is_refused_once_it_is_needed() -> None:
    @tool(max_result_chars=10)
    def read_result() -> str:
        """Mine."""
        return TEXT

    model = ScriptedChatModel([ai_calls(call("read_result", id="d")), AiMessage("x")])
    with pytest.raises(ToolCardError, match="read_result"):
        ToolService(result_store=True).tools(read_result).chat(model, None, "hi")


# the history processor ----------------------------------------------------------------------
def _history(rounds: int) -> list[Any]:
    out: list[Any] = [UserMessage("go")]
    for i in range(rounds):
        out.append(ai_calls(call("fetch", id=f"f{i}")))
        out.append(ToolExecutionResultMessage(id=f"f{i}", tool_name="fetch", text=f"{i}" * 500))
    out.append(AiMessage("done"))
    return out


def test_old_tool_results_become_stubs_naming_what_was_there() -> None:
    history = _history(4)
    cleared = ClearToolResults(keep_rounds=2)(history)
    assert_history_valid(cleared)
    texts = [m.text for m in cleared if isinstance(m, ToolExecutionResultMessage)]
    assert texts[0] == (
        "[Result of fetch (call f0, 500 characters) cleared from the history to save space; "
        "call the tool again if you need it.]"
    )
    assert texts[1].startswith("[Result of fetch (call f1, 500 characters)")
    assert texts[2:] == ["2" * 500, "3" * 500]
    assert history[2].text == "0" * 500  # the list given is not changed
    assert ClearToolResults(keep_rounds=2)(cleared) == cleared  # stubs stay as they are
    assert ClearToolResults(keep_rounds=4)(history) == history
    small = ClearToolResults(keep_rounds=0, min_chars=1000)(history)
    assert small == history  # results of at most min_chars are kept
    kept = ClearToolResults(keep_rounds=0, keep_tools=["fetch"])(history)
    assert kept == history


@pytest.mark.parametrize("mode", MODES)
def test_the_processor_plugs_into_the_before_model_request_hook(mode: str) -> None:
    @tool
    def fetch(n: int) -> str:
        """Fetch a page."""
        return f"page {n} " * 100

    model = ScriptedChatModel(
        [
            *[ai_calls(call("fetch", f'{{"n": {i}}}', id=f"f{i}")) for i in range(3)],
            AiMessage("done"),
        ]
    )
    hook = history_processor(ClearToolResults(keep_rounds=1))
    result = run(mode, ToolService(hooks=[hook]).tools(fetch), model)
    last = _results(model, 3)
    assert [m.text.startswith("[Result of fetch (call ") for m in last] == [True, True, False]
    assert "call f0, 700 characters" in last[0].text
    assert last[2].text == "page 2 " * 100
    assert_history_valid(result.messages)
    assert [m.text[:7] for m in _results(model, 2)] == ["[Result", "page 1 "]


@pytest.mark.parametrize("mode", MODES)
def test_the_store_keeps_what_the_output_guardrails_let_through(mode: str) -> None:
    secret = "sk-live-1234567890abcdef1234"

    @tool(max_result_chars=50)
    def leak() -> str:
        """A result echoing a credential past its first page."""
        return "a" * 60 + f" Authorization: Bearer {secret} " + "b" * 60

    store = MemoryResultStore()
    model = ScriptedChatModel([ai_calls(call("leak", id="c")), _reader(0, 2), AiMessage("ok")])
    service = ToolService(result_store=store, guardrails=[redact_secrets()]).tools(leak)
    result = run(mode, service, model)
    page = _results(model, 2)[-1].text
    assert "Authorization: Bearer ***" in page and secret not in page
    rid = _results(model, 1)[-1].attributes["toolweave.truncated"]["result_id"]
    stored = asyncio.run(store.get(rid))
    assert stored is not None and secret not in stored.text
    assert_history_valid(result.messages)
