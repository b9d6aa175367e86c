"""tools_from_openapi on the Petstore example, executed against a local Starlette app."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from toolweave.errors import ErrorCode, ToolCardError
from toolweave.execution import DefaultToolExecutor
from toolweave.execution.requests import ToolExecutionRequest
from toolweave.http import RestfulApi, RestfulApiResponseError, tools_from_openapi
from toolweave.tools.card import TOOL_NAME_PATTERN

PETSTORE = Path(__file__).with_name("petstore.json")


def _by_name(tools: list[RestfulApi]) -> dict[str, RestfulApi]:
    return {t.name: t for t in tools}


@pytest.fixture
async def petstore(petstore_server: str) -> AsyncIterator[dict[str, RestfulApi]]:
    tools = tools_from_openapi(
        PETSTORE, base_url=petstore_server + "/v2", allow_private_network=True
    )
    yield _by_name(tools)
    for t in tools:
        await t.aclose()


# building -------------------------------------------------------------------------------
def test_petstore_tools_and_schemas() -> None:
    tools = _by_name(tools_from_openapi(str(PETSTORE)))
    assert set(tools) == {"findPets", "addPet", "find_pet_by_id", "deletePet"}

    find = tools["findPets"].card
    assert find.method == "GET"
    assert find.url == "https://petstore.swagger.io/v2/pets"  # servers[0].url
    assert find.description.startswith("Returns all pets")
    props = find.input_params["properties"]
    assert props["tags"] == {
        "type": "array",
        "items": {"type": "string"},
        "description": "tags to filter by",
        "location": "query",
    }
    assert props["limit"]["location"] == "query"
    assert props["X-Request-ID"]["location"] == "header"  # resolved from components
    assert "required" not in find.input_params

    add = tools["addPet"].card
    assert add.method == "POST"
    assert add.input_params["properties"] == {
        "name": {"type": "string", "location": "body"},
        "tag": {"type": "string", "location": "body"},
    }
    assert add.input_params["required"] == ["name"]

    by_id = tools["find_pet_by_id"].card
    assert by_id.url.endswith("/pets/{id}")
    assert by_id.input_params["properties"]["id"]["location"] == "path"
    assert by_id.input_params["required"] == ["id"]
    assert by_id.metadata["openapi"]["operationId"] == "find pet by id"

    assert tools["deletePet"].card.method == "DELETE"


def test_loads_from_dict_text_and_path() -> None:
    doc = json.loads(PETSTORE.read_text())
    for source in (doc, PETSTORE, str(PETSTORE), PETSTORE.read_text()):
        assert len(tools_from_openapi(source)) == 4
    # the caller's dict is not modified
    assert doc == json.loads(PETSTORE.read_text())


def test_yaml_text() -> None:
    pytest.importorskip("yaml")
    text = "openapi: 3.0.0\nservers:\n  - url: https://x.example\npaths:\n  /a:\n    get:\n      operationId: getA\n"
    assert [t.name for t in tools_from_openapi(text)] == ["getA"]


@pytest.mark.parametrize(
    ("include", "expected"),
    [
        (["findPets"], {"findPets"}),
        ("write", {"addPet", "deletePet"}),
        (["find pet by id", "deletePet"], {"find_pet_by_id", "deletePet"}),
        (lambda op: op.method == "GET", {"findPets", "find_pet_by_id"}),
        (lambda op: op.path == "/pets/{id}", {"find_pet_by_id", "deletePet"}),
    ],
)
def test_include(include: Any, expected: set[str]) -> None:
    assert {t.name for t in tools_from_openapi(PETSTORE, include=include)} == expected


def test_names_sanitised_unique_and_short() -> None:
    long_id = "x" * 100
    doc = {
        "openapi": "3.1.0",
        "servers": [{"url": "https://api.example.com/{v}", "variables": {"v": {"default": "v1"}}}],
        "paths": {
            "/a/{id}/b.c": {
                "get": {
                    "parameters": [
                        {"name": "id", "in": "path", "required": True, "schema": {"type": "string"}}
                    ]
                },
                "post": {"operationId": "do.thing!"},
                "put": {"operationId": "do thing"},
                "patch": {"operationId": long_id},
                "delete": {"operationId": long_id},
            }
        },
    }
    tools = tools_from_openapi(doc)
    names = [t.name for t in tools]
    assert len(set(names)) == len(names) == 5
    assert all(TOOL_NAME_PATTERN.match(n) for n in names)
    assert "get_a_id_b_c" in names
    assert "do_thing" in names and "do_thing_2" in names
    assert tools[0].card.url == "https://api.example.com/v1/a/{id}/b.c"


def test_ref_cycle_is_cut() -> None:
    doc = {
        "openapi": "3.0.3",
        "servers": [{"url": "https://api.example.com"}],
        "paths": {
            "/nodes": {
                "post": {
                    "operationId": "addNode",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/Node"}}
                        },
                    },
                }
            }
        },
        "components": {
            "schemas": {
                "Node": {
                    "type": "object",
                    "required": ["value"],
                    "properties": {
                        "value": {"type": "string"},
                        "children": {
                            "type": "array",
                            "items": {"$ref": "#/components/schemas/Node"},
                        },
                    },
                }
            }
        },
    }
    (tool,) = tools_from_openapi(doc)
    props = tool.card.input_params["properties"]
    assert props["value"]["location"] == "body"
    child = props["children"]["items"]
    assert child["description"].startswith("(recursive Node")


@pytest.mark.parametrize(
    "doc",
    [
        {"swagger": "2.0", "paths": {}},
        {"openapi": "3.0.0", "paths": {"/a": {"get": {}}}},  # no servers, no base_url
        {"openapi": "3.0.0", "servers": [{"url": "/relative"}], "paths": {}},
        {
            "openapi": "3.0.0",
            "servers": [{"url": "https://a.example"}],
            "paths": {"/a": {"get": {"parameters": [{"$ref": "other.json#/P"}]}}},
        },
        {
            "openapi": "3.0.0",
            "servers": [{"url": "https://a.example"}],
            "paths": {"/a": {"get": {"parameters": [{"$ref": "#/components/parameters/Nope"}]}}},
        },
    ],
)
def test_invalid_documents(doc: dict[str, Any]) -> None:
    with pytest.raises(ToolCardError) as info:
        tools_from_openapi(doc)
    assert info.value.code == ErrorCode.RESTFUL_API_CARD_CONFIG_INVALID


def test_invalid_text() -> None:
    with pytest.raises(ToolCardError):
        tools_from_openapi("{not json")


# executing against the local Petstore -------------------------------------------------
async def test_find_pets_query_and_header(petstore: dict[str, RestfulApi]) -> None:
    result = await petstore["findPets"].ainvoke(
        {"tags": ["dog"], "limit": 1, "X-Request-ID": "req-1"}
    )
    assert result["code"] == 200
    assert result["data"] == [{"id": 1, "name": "Rex", "tag": "dog"}]
    assert result["headers"]["x-request-id"] == "req-1"
    assert "tags=dog" in result["url"] and "limit=1" in result["url"]


async def test_add_get_delete_pet(petstore: dict[str, RestfulApi]) -> None:
    added = (await petstore["addPet"].ainvoke({"name": "Nemo", "tag": "fish"}))["data"]
    assert added["name"] == "Nemo" and added["tag"] == "fish"
    pet_id = added["id"]
    got = await petstore["find_pet_by_id"].ainvoke({"id": pet_id})
    assert got["data"] == added
    deleted = await petstore["deletePet"].ainvoke({"id": pet_id})
    assert deleted["code"] == 204
    assert deleted["data"] == ""
    with pytest.raises(RestfulApiResponseError) as info:
        await petstore["find_pet_by_id"].ainvoke({"id": pet_id})
    assert info.value.status == 404
    assert "not found" in info.value.body


async def test_petstore_through_executor(petstore: dict[str, RestfulApi]) -> None:
    tool = petstore["find_pet_by_id"]
    result = await DefaultToolExecutor(tool).aexecute_with_result(
        ToolExecutionRequest(id="1", name=tool.name, arguments='{"id": "2"}')
    )
    assert not result.is_error
    assert json.loads(result.text)["data"]["name"] == "Tom"


async def test_openapi_tools_are_guarded_by_default(petstore_server: str) -> None:
    tools = tools_from_openapi(PETSTORE, base_url=petstore_server + "/v2", include="findPets")
    try:
        from toolweave.http import SsrfBlockedError

        with pytest.raises(SsrfBlockedError):
            await tools[0].ainvoke({})
    finally:
        await tools[0].aclose()


async def test_openapi_auth_and_form_body(base: str) -> None:
    doc = {
        "openapi": "3.0.0",
        "paths": {
            "/echo/login": {
                "post": {
                    "operationId": "login",
                    "parameters": [{"name": "v", "in": "query", "schema": {"type": "integer"}}],
                    "requestBody": {
                        "content": {
                            "application/x-www-form-urlencoded": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"user": {"type": "string"}},
                                }
                            }
                        }
                    },
                }
            }
        },
    }
    (tool,) = tools_from_openapi(
        doc,
        base_url=base,
        allow_private_network=True,
        auth={"headers": {"Authorization": "Bearer abc"}, "query": {"key": "k"}},
    )
    try:
        result = await tool.ainvoke({"user": "ann", "v": 2})
        data = result["data"]
        assert data["form"] == [["user", "ann"]]
        # sent, and masked where the echo gives it back (a shorter value, like the key `k`,
        # is not masked: it would mask ordinary words)
        assert data["headers"]["authorization"] == "***"
        assert ["key", "k"] in data["query"] and ["v", "2"] in data["query"]
        assert "key=k" not in result["url"]
    finally:
        await tool.aclose()


async def test_openapi_defaults_filled_after_validation(base: str) -> None:
    doc = {
        "openapi": "3.0.0",
        "paths": {
            "/echo/report": {
                "get": {
                    "operationId": "report",
                    "parameters": [
                        {"name": "q", "in": "query", "schema": {"type": "string"}},
                        {
                            "name": "format",
                            "in": "query",
                            "schema": {"type": "string", "nullable": False, "default": None},
                        },
                        {
                            "name": "unit",
                            "in": "query",
                            "schema": {"type": "string", "enum": ["c", "f"], "default": "k"},
                        },
                    ],
                }
            }
        },
    }
    (tool,) = tools_from_openapi(doc, base_url=base, allow_private_network=True)
    try:
        result = await tool.ainvoke('{"q": "x"}')
        assert result["data"]["query"] == [["q", "x"], ["unit", "k"]]
    finally:
        await tool.aclose()
