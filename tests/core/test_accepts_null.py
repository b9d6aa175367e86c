"""One rule for "may this schema's value be null", and its two uses: argument coercion (an
optional property the model sent as null means "not given" unless null is valid for it) and
OpenAI's strict form (an optional property that rejects null keeps the schema non-strict,
since strict mode would make the model send null for it)."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave import ChatRequest, ChatRequestParameters, UserMessage
from toolweave.providers import OpenAIChatModel
from toolweave.schema.validation import JsonSchemaArgumentsValidator, accepts_null
from toolweave.tools import LocalFunction, ToolCard

DEFS = {"MaybeText": {"type": ["string", "null"]}, "Text": {"type": "string"}}


@pytest.mark.parametrize(
    ("schema", "expected"),
    [
        ({}, True),  # unconstrained
        ({"description": "anything"}, True),
        ({"type": "null"}, True),
        ({"type": ["integer", "null"]}, True),
        ({"enum": ["a", None]}, True),
        ({"const": None}, True),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, True),
        ({"oneOf": [{"type": "string"}, {}]}, True),
        ({"$ref": "#/$defs/MaybeText"}, True),  # judged by its target
        ({"anyOf": [{"$ref": "#/$defs/Text"}, {"$ref": "#/$defs/MaybeText"}]}, True),
        ({"type": "string"}, False),
        ({"enum": ["a", "b"]}, False),
        ({"const": "a"}, False),
        ({"anyOf": [{"type": "string"}, {"type": "integer"}]}, False),
        ({"$ref": "#/$defs/Text"}, False),
    ],
)
def test_the_rule(schema: dict[str, Any], expected: bool) -> None:
    root = {"$defs": DEFS}
    assert accepts_null(schema, root) is expected
    if "$ref" not in str(schema):
        assert accepts_null(schema) is expected  # the schema is its own root


def _search(properties: dict[str, Any]) -> LocalFunction:
    schema = {"type": "object", "properties": properties, "$defs": DEFS}
    return LocalFunction(ToolCard(name="search", input_params=schema), lambda **kw: kw)


def test_coercion_keeps_null_where_it_is_valid_and_drops_it_elsewhere() -> None:
    search = _search(
        {
            "maybe": {"$ref": "#/$defs/MaybeText"},
            "text": {"$ref": "#/$defs/Text"},
            "anything": {},
            "count": {"type": "integer"},
        }
    )
    sent = '{"maybe": null, "text": null, "anything": null, "count": null}'
    assert search.invoke(sent) == {"maybe": None, "anything": None}
    validator = JsonSchemaArgumentsValidator(search.card.input_params, tool_name="search")
    assert validator.validate_python({"maybe": None, "text": None}) == {"maybe": None}


def _strict(response_format: dict[str, Any]) -> bool:
    model = OpenAIChatModel("gpt-4o-mini", api_key="k")
    request = ChatRequest(
        [UserMessage("x")], ChatRequestParameters(response_format=response_format)
    )
    strict: bool = model.build_request_body(request)["response_format"]["json_schema"]["strict"]
    return strict


def _report(note: dict[str, Any]) -> dict[str, Any]:
    return {
        "type": "object",
        "properties": {"title": {"type": "string"}, "note": note},
        "required": ["title"],
        "additionalProperties": False,
        "$defs": DEFS,
    }


def test_openai_strict_form_follows_the_same_rule() -> None:
    # an optional $ref to a nullable definition: null is valid, so strict mode is safe
    assert _strict(_report({"$ref": "#/$defs/MaybeText"})) is True
    # an optional $ref to a definition that rejects null: not strict
    assert _strict(_report({"$ref": "#/$defs/Text"})) is False
    assert _strict(_report({"type": "string"})) is False
    assert _strict(_report({"type": ["string", "null"]})) is True
    # unconstrained accepts null, but has no strict form (no type): not strict either way
    assert _strict(_report({})) is False
