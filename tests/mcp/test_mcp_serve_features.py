"""`serve_mcp` beyond plain tools, checked with the official SDK client in process: typed
returns (outputSchema + structuredContent), audio, ToolContext progress / logging /
sampling / elicitation, resources, templates, prompts and completion."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import mcp_types
import pydantic
import pytest
from mcp.client.client import Client
from mcp.server.mcpserver import ResourceSecurity
from mcp_support import TEST_TIMEOUT
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from toolweave import AudioContent, ImageContent, TextContent, ToolNotSupportedError, tool
from toolweave.context import ToolContext
from toolweave.mcp import build_mcp_server, completion, prompt, resource

# The 2026-07-28 revision deprecates logging and sampling; these tests speak 2025-11-25.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

WAV = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA="


class Weather(pydantic.BaseModel):
    city: str
    celsius: float


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Totals(TypedDict):
    count: int


@tool
def weather(city: str) -> Weather:
    """Weather as a model."""
    return Weather(city=city, celsius=21.5)


@tool
def point() -> Point:
    """A dataclass."""
    return Point(1, 2)


@tool
def totals() -> Totals:
    """A TypedDict."""
    return {"count": 3}


class Stats(pydantic.BaseModel):
    key: str
    hits: int


@tool
def stats(key: str) -> Stats:
    """Declared to return Stats; returns something else (pydantic only warns about it)."""
    return {"nope": key}  # type: ignore[return-value]


@tool
def stats_as_dict(key: str) -> Stats:
    """A dict that fits the schema, for a model: clients accept it, so it is sent."""
    return {"key": key, "hits": 2}  # type: ignore[return-value]


@tool
def counted() -> Totals:
    """A TypedDict's value without its key (pydantic's dump silently drops the rest)."""
    return {"nope": 1}  # type: ignore[typeddict-unknown-key]


@tool
def ratio() -> dict[str, float]:
    """NaN is null on the wire, not a number."""
    return {"r": float("nan")}


@tool
def plain(n: int) -> int:
    """Not an object: no outputSchema."""
    return n


@tool
def sound() -> AudioContent:
    """Audio."""
    return AudioContent(data=WAV, mime_type="audio/wav")


@tool
async def busy(ctx: ToolContext) -> str:
    """Progress and logs, async."""
    await ctx.areport_progress(1, 2, "half")
    await ctx.alog("debug", "too fine")
    await ctx.alog("warning", {"note": "careful"}, logger="busy")
    await ctx.areport_progress(2, 2, "done")
    return "ok"


@tool
def busy_sync(ctx: ToolContext) -> str:
    """Progress and logs from a sync tool (worker thread)."""
    ctx.report_progress(1, 1, "sync step")
    ctx.log("info", "from a thread")
    return "ok"


@tool
async def ask_model(question: str, ctx: ToolContext) -> str:
    """Sampling."""
    return "model said: " + await ctx.asample(question, max_tokens=50, system_prompt="be brief")


@tool
def ask_user(ctx: ToolContext) -> str:
    """Elicitation, from a sync tool."""
    answer = ctx.elicit(
        "Your name?", {"type": "object", "properties": {"name": {"type": "string"}}}
    )
    return f"{answer.action}:{(answer.content or {}).get('name')}"


@resource("docs://readme", mime_type="text/markdown", title="Read me")
def readme() -> str:
    """The read-me."""
    return "# hello"


@resource("docs://logo")
async def logo() -> bytes:
    return b"\x89PNG"


@resource("users://{user_id}/profile")
def profile(user_id: str) -> dict[str, Any]:
    """A user's profile."""
    return {"id": user_id}


@prompt
def review(code: str, language: str = "python") -> str:
    """Review a piece of code."""
    return f"Review this {language}:\n{code}"


@prompt(name="show", title="Show")
def show_picture() -> list[object]:
    return [
        {"role": "user", "content": ImageContent(data="aGk=", mime_type="image/png")},
        {"role": "assistant", "content": TextContent(text="I see it")},
    ]


@completion("review", "language")
def languages(value: str) -> list[str]:
    return [x for x in ("python", "perl", "rust") if x.startswith(value)]


TOOLS = [
    weather,
    point,
    totals,
    stats,
    stats_as_dict,
    counted,
    ratio,
    plain,
    sound,
    busy,
    busy_sync,
    ask_model,
    ask_user,
]
FEATURES = [readme, logo, profile, review, show_picture, languages]


def server() -> Any:
    return build_mcp_server(TOOLS, features=FEATURES, name="features")


async def test_typed_returns_publish_output_schema_and_structured_content() -> None:
    async with asyncio.timeout(TEST_TIMEOUT), Client(server(), mode="legacy") as client:
        listing = {t.name: t for t in (await client.list_tools()).tools}
        schema = listing["weather"].output_schema
        assert schema is not None and schema["type"] == "object"
        assert set(schema["properties"]) == {"city", "celsius"}
        assert listing["point"].output_schema is not None
        assert listing["totals"].output_schema is not None
        assert listing["plain"].output_schema is None

        result = await client.call_tool("weather", {"city": "Oslo"})
        assert result.structured_content == {"city": "Oslo", "celsius": 21.5}
        # The text is still there, for clients that read only content.
        assert '"Oslo"' in result.content[0].text  # type: ignore[union-attr]
        assert (await client.call_tool("point", {})).structured_content == {"x": 1, "y": 2}
        assert (await client.call_tool("totals", {})).structured_content == {"count": 3}
        assert (await client.call_tool("plain", {"n": 4})).structured_content is None


async def test_a_value_that_breaks_the_published_output_schema_is_an_error_result() -> None:
    """The SDK client refuses a whole result whose structuredContent breaks the tool's
    outputSchema (text included); the server answers isError, saying what broke."""
    async with asyncio.timeout(TEST_TIMEOUT), Client(server(), mode="legacy") as client:
        await client.list_tools()  # the client validates against the listed schemas
        for name, args, why in [
            ("stats", {"key": "k"}, "'key' is a required property"),
            ("counted", {}, "'count' is a required property"),
            ("ratio", {}, "r: nan is not of type 'number'"),
        ]:
            result = await client.call_tool(name, args)
            assert result.is_error, name
            assert result.structured_content is None
            text = result.content[0].text  # type: ignore[union-attr]
            assert f"The tool {name!r} broke its declared output type" in text, text
            assert why in text, text
        assert "type Stats" in (await client.call_tool("stats", {"key": "k"})).content[0].text  # type: ignore[union-attr]
        fits = await client.call_tool("stats_as_dict", {"key": "k"})
        assert not fits.is_error and fits.structured_content == {"key": "k", "hits": 2}


async def test_audio_content() -> None:
    async with asyncio.timeout(TEST_TIMEOUT), Client(server(), mode="legacy") as client:
        result = await client.call_tool("sound", {})
        block = result.content[0]
        assert isinstance(block, mcp_types.AudioContent)
        assert (block.data, block.mime_type) == (WAV, "audio/wav")


async def test_progress_and_logs_reach_the_client() -> None:
    logs: list[mcp_types.LoggingMessageNotificationParams] = []
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_log(params: mcp_types.LoggingMessageNotificationParams) -> None:
        logs.append(params)

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append((p, total, message))

    async with (
        asyncio.timeout(TEST_TIMEOUT),
        Client(server(), mode="legacy", logging_callback=on_log) as client,
    ):
        await client.set_logging_level("info")
        result = await client.call_tool("busy", {}, progress_callback=on_progress)
        assert result.content[0].text == "ok"  # type: ignore[union-attr]
        result = await client.call_tool("busy_sync", {}, progress_callback=on_progress)
        assert result.content[0].text == "ok"  # type: ignore[union-attr]
    assert progress == [(1, 2, "half"), (2, 2, "done"), (1, 1, "sync step")]
    # "debug" is below the level the client set.
    assert [(m.level, m.data, m.logger) for m in logs] == [
        ("warning", {"note": "careful"}, "busy"),
        ("info", "from a thread", None),
    ]


async def test_sampling_and_elicitation_through_the_client() -> None:
    seen: list[mcp_types.CreateMessageRequestParams] = []

    async def sampling(ctx: Any, params: mcp_types.CreateMessageRequestParams) -> Any:
        seen.append(params)
        return mcp_types.CreateMessageResult(
            role="assistant",
            content=mcp_types.TextContent(type="text", text="42"),
            model="test-model",
        )

    async def elicitation(ctx: Any, params: Any) -> Any:
        assert params.message == "Your name?"
        return mcp_types.ElicitResult(action="accept", content={"name": "Ada"})

    async with (
        asyncio.timeout(TEST_TIMEOUT),
        Client(
            server(), mode="legacy", sampling_callback=sampling, elicitation_callback=elicitation
        ) as client,
    ):
        result = await client.call_tool("ask_model", {"question": "meaning?"})
        assert result.content[0].text == "model said: 42"  # type: ignore[union-attr]
        assert seen[0].max_tokens == 50 and seen[0].system_prompt == "be brief"
        assert seen[0].messages[0].content.text == "meaning?"  # type: ignore[union-attr]
        result = await client.call_tool("ask_user", {})
        assert result.content[0].text == "accept:Ada"  # type: ignore[union-attr]


async def test_sampling_without_client_support_is_a_tool_error() -> None:
    async with asyncio.timeout(TEST_TIMEOUT), Client(server(), mode="legacy") as client:
        result = await client.call_tool("ask_model", {"question": "x"})
        assert result.is_error
        assert "sampling is not available" in result.content[0].text  # type: ignore[union-attr]


async def test_a_capability_the_2026_client_did_not_declare_is_json_rpc_32021() -> None:
    """2026-07-28: a served tool's ctx.asample / ctx.aelicit when the request declared no
    sampling / elicitation is refused with MissingRequiredClientCapabilityError, naming
    the capability as a ClientCapabilities object (2025-11-25 keeps the isError result)."""
    from mcp.shared.exceptions import MCPError

    async with asyncio.timeout(TEST_TIMEOUT), Client(server(), mode="2026-07-28") as client:
        for name, args, needed in [
            ("ask_model", {"question": "x"}, {"sampling": {}}),
            ("ask_user", {}, {"elicitation": {"form": {}}}),
        ]:
            with pytest.raises(MCPError) as info:
                await client.call_tool(name, args)
            assert info.value.code == -32021, name
            assert info.value.data == {"requiredCapabilities": needed}
            assert name in info.value.message


async def test_an_unknown_resource_is_an_error_naming_its_uri_with_the_eras_code() -> None:
    """-32002 with data.uri on 2025-11-25; -32602 with data.uri on 2026-07-28 (SEP-2164)."""
    from mcp.shared.exceptions import MCPError

    for mode, code in [("legacy", -32002), ("2026-07-28", -32602)]:
        async with asyncio.timeout(TEST_TIMEOUT), Client(server(), mode=mode) as client:  # type: ignore[arg-type]
            with pytest.raises(MCPError, match="not found") as info:
                await client.read_resource("docs://nothing")
            assert (info.value.code, info.value.data) == (code, {"uri": "docs://nothing"}), mode


async def test_tool_context_without_a_channel() -> None:
    ctx = ToolContext(tool_name="t")
    await ctx.areport_progress(1)  # no-ops
    await ctx.alog("info", "x")
    ctx.report_progress(1)
    with pytest.raises(ToolNotSupportedError, match="sampling"):
        await ctx.asample("hi")
    with pytest.raises(ToolNotSupportedError, match="elicitation"):
        ctx.elicit("hi", {})
    assert await busy.ainvoke({}) == "ok"  # a tool that reports works outside MCP too


async def test_resources_templates_prompts_and_completion() -> None:
    async with asyncio.timeout(TEST_TIMEOUT), Client(server(), mode="legacy") as client:
        caps = client.server_capabilities
        assert caps.resources is not None and caps.prompts is not None
        assert caps.completions is not None and caps.logging is not None

        resources = {r.uri: r for r in (await client.list_resources()).resources}
        assert set(resources) == {"docs://readme", "docs://logo"}
        assert resources["docs://readme"].title == "Read me"
        assert resources["docs://readme"].description == "The read-me."
        templates = (await client.list_resource_templates()).resource_templates
        assert [t.uri_template for t in templates] == ["users://{user_id}/profile"]

        text = (await client.read_resource("docs://readme")).contents[0]
        assert isinstance(text, mcp_types.TextResourceContents)
        assert (text.text, text.mime_type) == ("# hello", "text/markdown")
        blob = (await client.read_resource("docs://logo")).contents[0]
        assert isinstance(blob, mcp_types.BlobResourceContents) and blob.blob == "iVBORw=="
        filled = (await client.read_resource("users://ada/profile")).contents[0]
        assert filled.text == '{"id": "ada"}' or filled.text == '{"id":"ada"}'  # type: ignore[union-attr]
        from mcp.shared.exceptions import MCPError

        with pytest.raises(MCPError, match="not found"):
            await client.read_resource("docs://nothing")

        prompts = {p.name: p for p in (await client.list_prompts()).prompts}
        assert set(prompts) == {"review", "show"}
        args = {a.name: a.required for a in prompts["review"].arguments or []}
        assert args == {"code": True, "language": False}
        got = await client.get_prompt("review", {"code": "x = 1"})
        assert got.messages[0].role == "user"
        assert got.messages[0].content.text == "Review this python:\nx = 1"  # type: ignore[union-attr]
        shown = await client.get_prompt("show", {})
        assert [m.role for m in shown.messages] == ["user", "assistant"]
        assert isinstance(shown.messages[0].content, mcp_types.ImageContent)
        with pytest.raises(MCPError, match="code"):
            await client.get_prompt("review", {})

        done = await client.complete(
            mcp_types.PromptReference(type="ref/prompt", name="review"),
            {"name": "language", "value": "p"},
        )
        assert done.completion.values == ["python", "perl"]


# resource templates refuse path escapes by default (issue #27, item 14) ----------------------
def path_server(read: list[str]) -> Any:
    @resource("files://{path}")
    def files(path: str) -> str:
        read.append(path)
        return f"file {path}"

    @resource("git://diff/{range}", security=ResourceSecurity(exempt_params={"range"}))
    def diff(range: str) -> str:
        read.append(range)
        return f"diff {range}"

    return build_mcp_server([], features=[files, diff])


@pytest.mark.parametrize(
    "uri",
    [
        "files://..%2F..%2Fetc%2Fpasswd",  # decoded: ../../etc/passwd
        "files://%2Fetc%2Fpasswd",  # an absolute path
        "files://a%00b",  # NUL
        "files://..%5C..%5Cwindows%5Cwin.ini",  # backslashes
        "files://C%3A%5Cboot.ini",  # a drive
        "files://%2E%2E",
    ],
)
async def test_a_template_refuses_path_escapes_by_default(uri: str) -> None:
    from mcp.shared.exceptions import MCPError

    read: list[str] = []
    async with asyncio.timeout(TEST_TIMEOUT), Client(path_server(read), mode="legacy") as client:
        with pytest.raises(MCPError, match="not found") as info:
            await client.read_resource(uri)
        assert info.value.code == -32002
        assert read == []  # the function never saw the value
        ok = (await client.read_resource("files://notes%2Ftodo.txt")).contents[0]
        assert ok.text == "file notes/todo.txt"  # type: ignore[union-attr]
        # a template that opted out receives such values, decoded
        got = (await client.read_resource("git://diff/..%2F..%2Fetc")).contents[0]
        assert got.text == "diff ../../etc"  # type: ignore[union-attr]
