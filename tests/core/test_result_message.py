"""`ToolExecutionResultMessage.from_result` builds, without validation, exactly the message
pydantic's own constructors build (it skips `model_construct`'s generic loop)."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest

from toolweave.chat import ToolExecutionResultMessage
from toolweave.execution.content import TextContent
from toolweave.execution.requests import ToolExecutionRequest
from toolweave.execution.results import ToolExecutionResult

REQUEST = ToolExecutionRequest(id="call_7", name="lookup", arguments='{"q": 1}')

RESULTS = [
    ToolExecutionResult.success("42", 42),
    ToolExecutionResult.failure("boom", ValueError("boom")),
    ToolExecutionResult(
        text="a",
        contents=(TextContent(text="a"),),
        structured={"n": 1},
        attributes={"mcp": {"meta": 1}},
    ),
]


def _values(message: ToolExecutionResultMessage) -> dict[str, Any]:
    return {k: v for k, v in message.__dict__.items() if k != "type"}


@pytest.mark.parametrize("result", RESULTS)
def test_from_result_is_the_model_construct_message(result: ToolExecutionResult) -> None:
    message = ToolExecutionResultMessage.from_result(REQUEST, result)
    reference = ToolExecutionResultMessage.model_construct(**_values(message))
    validated = ToolExecutionResultMessage.model_validate(reference.model_dump())
    assert message.__dict__ == reference.__dict__
    assert list(message.__dict__) == list(reference.__dict__)
    assert message.model_fields_set == reference.model_fields_set
    assert message.__pydantic_extra__ == reference.__pydantic_extra__
    assert message.__pydantic_private__ == reference.__pydantic_private__
    assert message == reference == validated
    assert message.model_dump_json() == reference.model_dump_json()
    assert message.model_dump(exclude_unset=True) == reference.model_dump(exclude_unset=True)
    assert (message.id, message.tool_name, message.text) == (REQUEST.id, "lookup", result.text)
    assert message.attributes == result.attributes
    assert message.attributes is not result.attributes  # a copy: the result stays its own
    # fields_set is the message's own: an update of a copy does not reach the original
    changed = message.model_copy(update={"text": "other"})
    assert changed.text == "other" and message.text == result.text
    assert copy.deepcopy(message) == message
    assert pickle.loads(pickle.dumps(message)) == message
    with pytest.raises(ValueError):
        message.text = "frozen"  # type: ignore[misc]


def test_a_subclass_gets_its_own_fields_and_defaults() -> None:
    class Tagged(ToolExecutionResultMessage):
        tag: str = "t"

    message = Tagged.from_result(REQUEST, RESULTS[0])
    assert type(message) is Tagged
    assert (message.tag, message.type, message.text) == ("t", "tool_result", "42")
