"""Content parts across MCP both ways: `serve_mcp` sends every part (annotations and
structured data kept) and `mcp_result_to_value` reads them back in order."""

from __future__ import annotations

import asyncio

import mcp_types
import pytest
from mcp.client.client import Client
from mcp_support import TEST_TIMEOUT

from toolweave import (
    AudioContent,
    EmbeddedResource,
    ImageContent,
    McpError,
    ResourceLink,
    TextContent,
    ToolExecutionResult,
    tool,
)
from toolweave.execution import Annotations, StructuredText
from toolweave.mcp import build_mcp_server, mcp_result_to_value

PNG = "iVBORw0KGgo="
NOTE = Annotations(audience=("user",), priority=0.9)
PARTS = (
    TextContent(text="first", annotations=NOTE),
    ImageContent(data=PNG, mime_type="image/png", annotations=Annotations(priority=0.2)),
    TextContent(text="between"),
    AudioContent(data="UklGRg==", mime_type="audio/wav"),
    ResourceLink(
        uri="file:///r.md", name="r", title="R", description="a readme", mime_type="text/markdown"
    ),
    EmbeddedResource(uri="memo://1", mime_type="text/plain", text="remember"),
    EmbeddedResource(uri="blob://2", mime_type="application/pdf", data="JVBERg=="),
)


@tool
def everything() -> ToolExecutionResult:
    """Every kind of part, with structured data."""
    return ToolExecutionResult(text="first\nbetween", contents=PARTS, structured={"n": 1})


@tool
def texty() -> StructuredText:
    """Text with structured data."""
    return StructuredText('{"n":2}', {"n": 2})


async def test_parts_round_trip_through_serve_mcp_in_order() -> None:
    server = build_mcp_server([everything, texty], name="tw")
    async with asyncio.timeout(TEST_TIMEOUT), Client(server, mode="legacy") as client:
        raw = await client.call_tool("everything", {})
        assert [c.type for c in raw.content] == [
            "text",
            "image",
            "text",
            "audio",
            "resource_link",
            "resource",
            "resource",
        ]
        assert raw.structured_content == {"n": 1}
        back = mcp_result_to_value(raw, "everything")
        assert isinstance(back, ToolExecutionResult)
        assert back.contents == PARTS  # order, annotations and every field kept
        # "first" is for the user only (audience ["user"]): kept above, not in the model's text
        assert back.structured == {"n": 1} and back.text == "between"

        raw = await client.call_tool("texty", {})
        value = mcp_result_to_value(raw, "texty")
        assert isinstance(value, StructuredText)
        assert value == '{"n":2}' and value.structured == {"n": 2}


def test_result_shapes() -> None:
    text = mcp_types.TextContent(type="text", text="t")
    only_structured = mcp_types.CallToolResult(content=[], structured_content={"a": 1})
    assert mcp_result_to_value(only_structured) == {"a": 1}
    plain = mcp_result_to_value(mcp_types.CallToolResult(content=[text, text]))
    assert plain == "t\n\nt" and type(plain) is str
    with pytest.raises(McpError, match="t"):
        mcp_result_to_value(mcp_types.CallToolResult(content=[text], is_error=True))
    link = mcp_types.ResourceLink(type="resource_link", uri="file:///x", name="x")
    parts = mcp_result_to_value(mcp_types.CallToolResult(content=[link, text]))
    assert parts == [ResourceLink(uri="file:///x", name="x"), TextContent(text="t")]
