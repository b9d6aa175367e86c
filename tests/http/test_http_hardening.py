"""Issue 14, HTTP half: request building under hostile arguments, against the loopback app.
Each case fails on the code before its fix."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Callable
from typing import Any

import pytest

from servers.http_app import serve_raw
from toolweave.dialects import gemini_function_declaration
from toolweave.errors import (
    ErrorCode,
    RestfulApiError,
    SchemaError,
    ToolArgumentsError,
    ToolCardError,
)
from toolweave.http import RestfulApi, RestfulApiCard, tools_from_openapi

MakeTool = Callable[..., Any]


async def _call(tool: Any, args: dict[str, Any], face: str) -> Any:
    if face == "async":
        return await tool.ainvoke(args)
    return await asyncio.to_thread(tool.invoke, args)


# item 10: dot segments ---------------------------------------------------------------------------
@pytest.mark.parametrize(("uid", "raw"), [("..", "%2E%2E"), (".", "%2E"), ("...", "%2E%2E%2E")])
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_dot_path_arguments_stay_one_literal_segment(
    make_tool: MakeTool, uid: str, raw: str, face: str
) -> None:
    tool = make_tool(
        "/echo/api/v1/users/{uid}/profile",
        properties={"uid": {"type": "string", "location": "path"}},
        required=["uid"],
    )
    result = await _call(tool, {"uid": uid}, face)
    assert result["data"]["raw_path"] == f"/echo/api/v1/users/{raw}/profile"


# item 14: values that cannot be encoded ------------------------------------------------------------
_HEADER = {"x": {"type": "string", "location": "header"}}
_PATH = {"x": {"type": "string", "location": "path"}}
_QUERY = {"x": {"type": "string", "location": "query"}}


@pytest.mark.parametrize(
    ("path", "properties", "value"),
    [
        pytest.param("/echo/h", _HEADER, "José", id="header-non-ascii"),
        pytest.param("/echo/h", _HEADER, "a\u2028b", id="header-u2028"),
        pytest.param("/echo/h", _HEADER, "a\r\nX-Injected: 1", id="header-crlf"),
        pytest.param("/echo/h", _HEADER, "\ud800", id="header-surrogate"),
        pytest.param("/echo/{x}", _PATH, "a\ud800b", id="path-surrogate"),
        pytest.param("/echo/q", _QUERY, "a\udfffb", id="query-surrogate"),
        pytest.param("/echo/{x}", _PATH, "a" * 70_000, id="path-over-64k"),
        pytest.param("/echo/q", _QUERY, "a" * 70_000, id="query-over-64k"),
    ],
)
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_unencodable_arguments_are_a_typed_arguments_error(
    make_tool: MakeTool,
    server_log: list[tuple[str, str]],
    path: str,
    properties: dict[str, Any],
    value: str,
    face: str,
) -> None:
    tool = make_tool(path, properties=properties)
    with pytest.raises(ToolArgumentsError) as info:
        await _call(tool, {"x": value}, face)
    message = str(info.value)
    assert "tool 'api'" in message
    assert len(message) < 500  # the value is not echoed back
    assert server_log == []  # nothing was sent


async def test_deeply_nested_body_is_a_typed_arguments_error(make_tool: MakeTool) -> None:
    tool = make_tool("/echo/b", method="POST", properties={"x": {"location": "body"}})
    deep: Any = []
    for _ in range(100_000):
        deep = [deep]
    with pytest.raises(ToolArgumentsError, match="nested too deeply"):
        await tool.ainvoke({"x": deep})


# item 8: deeply nested JSON answers ---------------------------------------------------------------
@pytest.mark.parametrize("face", ["async", "sync"])
async def test_json_answer_past_the_depth_limit_is_refused_before_parsing(face: str) -> None:
    """300 levels: under the recursion limit (json.loads alone takes it), over the 256 that
    toolweave accepts from a server; 256 levels still go through."""
    for depth, refused in ((300, True), (256, False)):
        body = b'{"a": ' + b"[" * (depth - 1) + b"]" * (depth - 1) + b"}"
        reply = (
            b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
            + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
            + body
        )
        with serve_raw(reply) as url:
            tool = RestfulApi(
                RestfulApiCard(
                    name="api",
                    url=url + "/deep",
                    input_params={"type": "object", "properties": {}},
                    allow_private_network=True,
                )
            )
            async with tool:
                if not refused:
                    assert await _call(tool, {}, face)
                    continue
                with pytest.raises(RestfulApiError, match="nested too deeply") as info:
                    await _call(tool, {}, face)
        if refused:
            assert info.value.code == ErrorCode.RESTFUL_API_RESPONSE_PROCESS_ERROR


@pytest.mark.parametrize("face", ["async", "sync"])
async def test_deeply_nested_json_answer_is_a_typed_response_error(face: str) -> None:
    body = b"[" * 100_000 + b"]" * 100_000
    reply = (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode()
        + body
    )
    with serve_raw(reply) as url:
        tool = RestfulApi(
            RestfulApiCard(
                name="api",
                url=url + "/deep",
                input_params={"type": "object", "properties": {}},
                allow_private_network=True,
            )
        )
        async with tool:
            with pytest.raises(RestfulApiError) as info:
                await _call(tool, {}, face)
    assert info.value.code == ErrorCode.RESTFUL_API_RESPONSE_PROCESS_ERROR
    assert "nested too deeply" in str(info.value)


# items 8 and 9: OpenAPI import of hostile documents ------------------------------------------------
def _ref_bomb(levels: int, fanout: int) -> dict[str, Any]:
    """`L0` has `fanout` properties referring to `L1`, which has `fanout` referring to `L2`
    ...: about 2 KB as written, fanout**levels nodes if every $ref is inlined."""
    schemas: dict[str, Any] = {f"L{levels}": {"type": "string"}}
    for level in range(levels):
        schemas[f"L{level}"] = {
            "type": "object",
            "properties": {
                f"p{i}": {"$ref": f"#/components/schemas/L{level + 1}"} for i in range(fanout)
            },
        }
    return {
        "openapi": "3.0.3",
        "paths": {
            "/echo/bomb": {
                "post": {
                    "operationId": "bomb",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": "#/components/schemas/L0"}}
                        },
                    },
                }
            }
        },
        "components": {"schemas": schemas},
    }


@pytest.mark.parametrize("levels", [6, 8])
async def test_ref_bomb_is_shared_through_defs_not_expanded(base: str, levels: int) -> None:
    doc = _ref_bomb(levels, 10)
    assert len(json.dumps(doc)) < 4096
    started = time.monotonic()
    (tool,) = tools_from_openapi(doc, base_url=base, allow_private_network=True)
    assert time.monotonic() - started < 10  # hang guard: was 16.5 s and 833 MB at 6 levels
    schema = tool.card.input_params
    assert len(json.dumps(schema)) < 20_000
    assert set(schema["$defs"]) == {f"L{n}" for n in range(1, levels + 1)}
    # Gemini's OpenAPI subset has no $defs: inlining them is refused past a size cap
    with pytest.raises(SchemaError, match="json_schema"):
        gemini_function_declaration(tool.card)
    assert gemini_function_declaration(tool.card, mode="json_schema")["parametersJsonSchema"]
    # the shared schema still validates and the tool still runs
    leaf: Any = "x"
    for _ in range(levels - 1):
        leaf = {"p0": leaf, "p9": leaf}
    async with tool:
        result = await tool.ainvoke({"p3": leaf})
    assert result["data"]["json"] == {"p3": leaf}


def test_yaml_alias_bomb_is_refused() -> None:
    pytest.importorskip("yaml")
    lines = ["openapi: 3.0.3", "servers: [{url: 'https://api.example.com'}]", 'a0: &a0 ["x"]']
    for n in range(1, 12):
        lines.append(f"a{n}: &a{n} [{', '.join([f'*a{n - 1}'] * 10)}]")
    lines.append("paths: {}")
    text = "\n".join(lines) + "\n"
    assert len(text) < 1500
    started = time.monotonic()
    with pytest.raises(ToolCardError, match="expands to more than"):
        tools_from_openapi(text)
    assert time.monotonic() - started < 30  # hang guard


def test_long_ref_chain_is_followed_without_recursion(base: str) -> None:
    schemas: dict[str, Any] = {
        f"S{n}": {"$ref": f"#/components/schemas/S{n + 1}"} for n in range(3000)
    }
    schemas["S3000"] = {"type": "object", "properties": {"name": {"type": "string"}}}
    doc = _ref_bomb(1, 1)
    doc["components"]["schemas"] = schemas
    doc["paths"]["/echo/bomb"]["post"]["requestBody"]["content"]["application/json"] = {
        "schema": {"$ref": "#/components/schemas/S0"}
    }
    (tool,) = tools_from_openapi(doc, base_url=base)
    assert tool.card.input_params["properties"]["name"]["location"] == "body"


def test_documents_nested_too_deeply_are_a_card_error() -> None:
    depth = 5000
    deep = '{"type":"object","properties":{"x":' * depth + '{"type":"string"}' + "}}" * depth
    doc = json.dumps(_ref_bomb(1, 1)).replace('{"type": "string"}', deep)
    with pytest.raises(ToolCardError, match="nested too deeply"):
        tools_from_openapi(doc, base_url="https://a.example")


def test_json_text_of_100k_brackets_is_a_card_error() -> None:
    with pytest.raises(ToolCardError, match="nested too deeply"):
        tools_from_openapi('{"a":' + "[" * 100_000 + "]" * 100_000 + "}")


def test_yaml_alias_cycle_is_refused() -> None:
    pytest.importorskip("yaml")
    text = 'openapi: 3.0.3\na0: &a0 ["x"]\na1: &a1 [*a0, *a0, *a1]\npaths: {}\n'  # found by fuzzing
    with pytest.raises(ToolCardError, match="contains itself"):
        tools_from_openapi(text, base_url="https://api.example.com")


@pytest.mark.parametrize(
    "doc",
    [
        {"openapi": "3.0.3", "paths": True},
        {"openapi": "3.0.3", "paths": {"/x": {"get": {"parameters": "p"}}}},
        {"openapi": "3.0.3", "paths": {"/x": {"post": {"requestBody": {"content": []}}}}},
    ],
)
def test_malformed_documents_are_a_card_error(doc: dict[str, Any]) -> None:
    try:
        tools_from_openapi(doc, base_url="https://api.example.com")
    except ToolCardError:
        pass
