"""Issue 14, HTTP half: request building under hostile arguments, against the loopback app.
Each case fails on the code before its fix."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from toolweave.errors import ToolArgumentsError

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
