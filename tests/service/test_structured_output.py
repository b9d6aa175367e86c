"""Structured output in the loop: response_format, validation, corrections, partial objects."""

from __future__ import annotations

from enum import StrEnum

import pytest
from pydantic import BaseModel

from toolweave import (
    AiMessage,
    ChatCompleted,
    PartialOutput,
    ScriptedChatModel,
    StructuredOutputError,
    ToolService,
    UserMessage,
    tool,
)

from .helpers import MODES, ai_calls, assert_history_valid, call, run


class Unit(StrEnum):
    C = "celsius"
    F = "fahrenheit"


class Reading(BaseModel):
    value: float
    unit: Unit


class Report(BaseModel):
    city: str
    readings: list[Reading]
    note: str | None = None


@tool
def temperature(city: str) -> str:
    """Current temperature."""
    return f"{city}: 21.5 celsius"


GOOD = '{"city": "Paris", "readings": [{"value": 21.5, "unit": "celsius"}]}'


@pytest.mark.parametrize("mode", MODES)
def test_tools_first_then_a_typed_answer(mode: str) -> None:
    model = ScriptedChatModel([ai_calls(call("temperature", '{"city": "Paris"}')), AiMessage(GOOD)])
    result = run(mode, ToolService().tools(temperature), model, "Paris?", output_type=Report)
    assert result.output == Report(city="Paris", readings=[Reading(value=21.5, unit=Unit.C)])
    assert all(r.parameters.response_format is Report for r in model.requests)


@pytest.mark.parametrize("mode", MODES)
def test_invalid_json_then_wrong_type_then_valid_is_corrected_twice(mode: str) -> None:
    model = ScriptedChatModel(
        [
            AiMessage("Sure! Here is the report: {city: Paris"),
            AiMessage('{"city": "Paris", "readings": [{"value": "hot", "unit": "kelvin"}]}'),
            AiMessage(f"```json\n{GOOD}\n```"),
        ]
    )
    result = run(mode, ToolService(max_argument_retries=2), model, "report", output_type=Report)
    assert result.output.city == "Paris"
    corrections = [m for m in result.messages if isinstance(m, UserMessage)][1:]
    assert len(corrections) == 2
    assert corrections[0].text.startswith(
        "Your answer could not be used. The answer is not valid JSON"
    )
    assert "readings.0.value" in corrections[1].text and "readings.0.unit" in corrections[1].text
    assert len(result.intermediate_responses) == 2
    assert_history_valid(result.messages)


@pytest.mark.parametrize("mode", MODES)
def test_budget_of_one_raises_with_the_raw_text(mode: str) -> None:
    model = ScriptedChatModel([AiMessage("not json"), AiMessage('{"city": 3}'), AiMessage(GOOD)])
    with pytest.raises(StructuredOutputError) as info:
        run(mode, ToolService(max_argument_retries=1), model, "report", output_type=Report)
    assert info.value.raw_text == '{"city": 3}'
    assert len(model.requests) == 2


def test_dict_schema_output() -> None:
    schema = {
        "type": "object",
        "properties": {
            "answer": {"type": "integer"},
            "tags": {"type": "array", "items": {"type": "string"}},
        },
        "required": ["answer"],
        "additionalProperties": False,
    }
    model = ScriptedChatModel(
        [AiMessage('{"answer": "x"}'), AiMessage('{"answer": 42, "tags": ["a"]}')]
    )
    result = ToolService().chat(model, None, "q", output_type=schema)
    assert result.output == {"answer": 42, "tags": ["a"]}
    assert "answer: 'x' is not of type 'integer'" in model.requests[1].messages[-1].text


def test_stream_yields_growing_partial_objects() -> None:
    model = ScriptedChatModel([AiMessage(GOOD)], chunk_size=7)
    events = list(ToolService().chat_stream(model, None, "q", output_type=Report))
    partials = [e.value for e in events if isinstance(e, PartialOutput)]
    assert len(partials) > 3
    assert partials[0] == {} or "city" in partials[0]
    assert partials[-1] == {"city": "Paris", "readings": [{"value": 21.5, "unit": "celsius"}]}
    final = events[-1]
    assert isinstance(final, ChatCompleted)
    assert final.result.output.readings[0].unit is Unit.C


class Entry(BaseModel):
    n: int
    word: str


class Catalogue(BaseModel):
    entries: list[Entry]


def test_a_long_streamed_answer_is_parsed_a_bounded_number_of_times(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Re-parsing the whole prefix after each delta would be quadratic; the parses of a
    60 KB answer streamed in 4-character deltas must read a bounded multiple of its length,
    and the partial values must still grow to the whole answer."""
    import json

    import pydantic_core

    parsed: list[int] = []
    real = pydantic_core.from_json

    def spy(data: str, **kwargs: object) -> object:  # every JSON parse, wherever it is
        parsed.append(len(data))
        return real(data, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(pydantic_core, "from_json", spy)
    answer = json.dumps({"entries": [{"n": i, "word": "w" * 12} for i in range(2000)]})
    model = ScriptedChatModel([AiMessage(answer)], chunk_size=4)
    events = list(ToolService().chat_stream(model, None, "q", output_type=Catalogue))
    partials = [e.value for e in events if isinstance(e, PartialOutput)]
    assert partials[-1] == json.loads(answer)
    sizes = [len(p.get("entries", [])) for p in partials]
    assert sizes == sorted(sizes) and len(set(sizes)) > 100
    # growth 1/32: at most ~33 lengths, plus the short prefix parsed after every delta;
    # re-parsing everything after each delta would read about len(answer)**2 / 8
    assert sum(parsed) < 34 * len(answer) + 1024**2 // 4
    final = events[-1]
    assert isinstance(final, ChatCompleted)
    assert len(final.result.output.entries) == 2000


def test_the_last_partial_output_is_the_whole_answer_even_after_a_skipped_parse() -> None:
    from toolweave.schema.output import PartialJsonStream

    stream = PartialJsonStream(eager_chars=4, growth=2)
    values = [stream.feed(piece) for piece in ['{"a"', ": 1", ', "b": ', "2", "}"]]
    assert values[0] == {} or values[0] is None
    assert None in values[1:]  # some deltas did not trigger a parse
    assert stream.flush() == {"a": 1, "b": 2}
    assert stream.flush() is None  # nothing new
