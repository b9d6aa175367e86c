"""Every kind of tool result part through every provider: the conversation completes and
the next request carries each part as docs/providers.md ("Tool results: content parts")
says, in shapes the official SDK types accept."""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from servers.provider_server import ProviderServer
from toolweave import (
    AudioContent,
    EmbeddedResource,
    FileContent,
    ImageContent,
    ResourceLink,
    TextContent,
)
from toolweave.chat import UserMessage
from toolweave.execution import StructuredText
from toolweave.execution.results import USER_ONLY_TEXT
from toolweave.providers import (
    AnthropicChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    OpenAIResponsesChatModel,
)
from toolweave.service import ToolService
from toolweave.tools import LocalFunction, ToolCard

from .conftest import (
    SECRET,
    check_anthropic_request,
    check_gemini_request,
    check_openai_request,
    no_sleep,
)
from .test_openai_responses import _call, _message, _response, check_responses_request

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 40).decode()
PDF = base64.b64encode(b"%PDF-1.4\n%%EOF\n").decode()
WAV = base64.b64encode(b"RIFF....WAVEfmt ").decode()
NOTES = "line one\nline two"

RESULTS: dict[str, Any] = {
    "image_inline": [TextContent(text="a chart"), ImageContent(data=PNG, mime_type="image/png")],
    "image_url": ImageContent(url="https://img.example/cat.jpg", mime_type="image/jpeg"),
    "audio": AudioContent(data=WAV, mime_type="audio/wav"),
    "pdf": FileContent(data=PDF, mime_type="application/pdf", name="report.pdf"),
    "text_file": FileContent.from_bytes(NOTES.encode(), "text/plain", name="notes.txt"),
    "binary_file": FileContent.from_bytes(b"\x00\x01\x02", "application/zip", name="a.zip"),
    "resource_link": ResourceLink(
        uri="file:///docs/readme.md", name="readme", mime_type="text/markdown", size=1200
    ),
    "embedded_text": EmbeddedResource(uri="memo://today", mime_type="text/plain", text="buy milk"),
    "structured": StructuredText('{"temp":21}', {"temp": 21}),
}
NAMES = list(RESULTS)


def _tools() -> list[LocalFunction]:
    def make(name: str) -> LocalFunction:
        def fn() -> Any:
            return RESULTS[name]

        return LocalFunction(ToolCard(name=name, description=f"returns {name}"), fn)

    return [make(n) for n in NAMES]


Calls = list[tuple[str, str]]
ALL: Calls = [(n, "{}") for n in NAMES]


def _openai_turns(wanted: Calls = ALL) -> list[dict[str, Any]]:
    calls = [
        {"id": f"c_{n}", "type": "function", "function": {"name": n, "arguments": a}}
        for n, a in wanted
    ]
    first = {"role": "assistant", "content": None, "tool_calls": calls}
    return [
        {"json": _chat_completion(first, "tool_calls")},
        {"json": _chat_completion({"role": "assistant", "content": "done"}, "stop")},
    ]


def _chat_completion(message: dict[str, Any], reason: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1,
        "model": "gpt-4o",
        "choices": [{"index": 0, "finish_reason": reason, "message": message}],
    }


def _anthropic_turns(wanted: Calls = ALL) -> list[dict[str, Any]]:
    def message(content: list[dict[str, Any]], reason: str) -> dict[str, Any]:
        return {
            "json": {
                "id": "msg_1",
                "type": "message",
                "role": "assistant",
                "model": "claude-sonnet-4-5",
                "content": content,
                "stop_reason": reason,
                "stop_sequence": None,
                "usage": {"input_tokens": 1, "output_tokens": 1},
            }
        }

    uses = [
        {"type": "tool_use", "id": f"toolu_{n}", "name": n, "input": json.loads(a)}
        for n, a in wanted
    ]
    return [message(uses, "tool_use"), message([{"type": "text", "text": "done"}], "end_turn")]


def _gemini_turns(wanted: Calls = ALL) -> list[dict[str, Any]]:
    def answer(parts: list[dict[str, Any]]) -> dict[str, Any]:
        return {
            "json": {
                "candidates": [
                    {"content": {"role": "model", "parts": parts}, "finishReason": "STOP"}
                ]
            }
        }

    calls = [
        {"functionCall": {"name": n, "args": json.loads(a), "id": f"fc_{n}"}} for n, a in wanted
    ]
    return [answer(calls), answer([{"text": "done"}])]


def _responses_turns(wanted: Calls = ALL) -> list[dict[str, Any]]:
    calls = [_call(f"call_{n}", n, a, f"fc_{n}") for n, a in wanted]
    return [{"json": _response(calls)}, {"json": _response([_message("done")])}]


def _converse(server: ProviderServer, model: Any, turns: list[dict[str, Any]]) -> dict[str, Any]:
    server.enqueue(*turns)
    no_sleep(model)
    with model:
        result = ToolService().tools(_tools()).chat(model, None, [UserMessage("use every tool")])
    assert result.text == "done"
    assert [e.request.name for e in result.tool_executions] == NAMES
    assert not any(e.has_failed for e in result.tool_executions)
    structured = result.tool_executions[-1]
    assert structured.structured == {"temp": 21} and structured.result_text == '{"temp":21}'
    assert len(server.requests) == 2
    body = server.bodies[1]
    assert isinstance(body, dict)
    return body


def test_openai_chat(server: ProviderServer) -> None:
    model = OpenAIChatModel("gpt-4o", api_key=SECRET, base_url=f"{server.url}/v1")
    body = _converse(server, model, _openai_turns())
    check_openai_request(body)
    messages = body["messages"]
    tools = {m["tool_call_id"][2:]: m["content"] for m in messages if m["role"] == "tool"}
    assert list(tools) == NAMES
    follow = messages[-1]
    assert follow["role"] == "user" and messages[-2]["role"] == "tool"
    assert tools["image_inline"].startswith("a chart\n[attachment 1: image (image/png")
    assert "[attachment 1: image (image/jpeg, https://img.example/cat.jpg)" in tools["image_url"]
    assert "[attachment 1: file report.pdf (application/pdf" in tools["pdf"]
    assert "not shown, gpt-4o takes no audio input" in tools["audio"]
    assert tools["text_file"].endswith(f"]\n{NOTES}")
    assert "not shown" in tools["binary_file"] and "application/zip" in tools["binary_file"]
    assert "file:///docs/readme.md" in tools["resource_link"]
    assert tools["embedded_text"].endswith("]\nbuy milk")
    assert tools["structured"] == '{"temp":21}'
    assert [p["type"] for p in follow["content"]] == [
        "text",
        "image_url",
        "text",
        "image_url",
        "text",
        "file",
    ]
    assert (
        follow["content"][0]["text"] == "[attachment 1 of tool call c_image_inline (image_inline)]"
    )
    assert follow["content"][1]["image_url"]["url"] == f"data:image/png;base64,{PNG}"
    assert follow["content"][3]["image_url"]["url"] == "https://img.example/cat.jpg"
    assert follow["content"][5]["file"] == {
        "file_data": f"data:application/pdf;base64,{PDF}",
        "filename": "report.pdf",
    }


def test_openai_chat_audio_model_gets_input_audio(server: ProviderServer) -> None:
    model = OpenAIChatModel("gpt-4o-audio-preview", api_key=SECRET, base_url=f"{server.url}/v1")
    body = _converse(server, model, _openai_turns())
    check_openai_request(body)
    parts = body["messages"][-1]["content"]
    assert {"type": "input_audio", "input_audio": {"data": WAV, "format": "wav"}} in parts


def test_anthropic(server: ProviderServer) -> None:
    model = AnthropicChatModel("claude-sonnet-4-5", api_key=SECRET, base_url=server.url)
    body = _converse(server, model, _anthropic_turns())
    check_anthropic_request(body)
    turn = body["messages"][-1]
    results = {b["tool_use_id"][6:]: b["content"] for b in turn["content"]}
    assert list(results) == NAMES
    assert results["image_inline"] == [
        {"type": "text", "text": "a chart"},
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": PNG}},
    ]
    assert results["image_url"] == [
        {"type": "image", "source": {"type": "url", "url": "https://img.example/cat.jpg"}}
    ]
    assert results["pdf"] == [
        {
            "type": "document",
            "source": {"type": "base64", "media_type": "application/pdf", "data": PDF},
            "title": "report.pdf",
        }
    ]
    assert results["text_file"] == [
        {
            "type": "document",
            "source": {"type": "text", "media_type": "text/plain", "data": NOTES},
            "title": "notes.txt",
        }
    ]
    assert results["embedded_text"][0]["source"]["data"] == "buy milk"
    for name in ("audio", "binary_file"):
        [block] = results[name]
        assert block["type"] == "text" and "not shown" in block["text"]
    [link] = results["resource_link"]
    assert link["type"] == "text" and "file:///docs/readme.md" in link["text"]
    assert results["structured"] == '{"temp":21}'


@pytest.mark.parametrize("name", ["gemini-2.5-flash", "gemini-3-pro-preview"])
def test_gemini(server: ProviderServer, name: str) -> None:
    model = GeminiChatModel(name, api_key=SECRET, base_url=server.url)
    body = _converse(server, model, _gemini_turns())
    check_gemini_request(body)
    parts = body["contents"][-1]["parts"]
    responses = {
        p["functionResponse"]["name"]: p["functionResponse"]
        for p in parts
        if "functionResponse" in p
    }
    assert list(responses) == NAMES
    follow = parts[len(NAMES) :]
    inside = name.startswith("gemini-3")
    media_inside = {n: r.get("parts") for n, r in responses.items() if r.get("parts")}
    if inside:
        assert media_inside == {
            "image_inline": [
                {
                    "inlineData": {
                        "mimeType": "image/png",
                        "data": PNG,
                        "displayName": "fc_image_inline_1",
                    }
                }
            ],
            "image_url": [
                {
                    "fileData": {
                        "mimeType": "image/jpeg",
                        "fileUri": "https://img.example/cat.jpg",
                        "displayName": "fc_image_url_1",
                    }
                }
            ],
            "pdf": [
                {
                    "inlineData": {
                        "mimeType": "application/pdf",
                        "data": PDF,
                        "displayName": "fc_pdf_1",
                    }
                }
            ],
        }
        assert follow == [
            {"text": "[attachment 1 of tool call fc_audio (audio)]"},
            {"inlineData": {"mimeType": "audio/wav", "data": WAV}},
        ]
    else:
        assert media_inside == {}
        kinds = [next(iter(p)) for p in follow]
        # image inline, image URL, audio, PDF: each after its label
        assert kinds == ["text", "inlineData", "text", "fileData"] + ["text", "inlineData"] * 2
    text = {n: r["response"]["result"] for n, r in responses.items()}
    assert text["text_file"].endswith(f"]\n{NOTES}")
    assert "not shown" in text["binary_file"]
    assert "file:///docs/readme.md" in text["resource_link"]
    assert text["embedded_text"].endswith("]\nbuy milk")
    assert responses["structured"]["response"] == {
        "result": '{"temp":21}',
        "structuredContent": {"temp": 21},
    }


def test_openai_responses(server: ProviderServer) -> None:
    model = OpenAIResponsesChatModel("gpt-5-mini", api_key=SECRET, base_url=f"{server.url}/v1")
    body = _converse(server, model, _responses_turns())
    check_responses_request(body)
    outputs = {
        i["call_id"][5:]: i["output"]
        for i in body["input"]
        if i.get("type") == "function_call_output"
    }
    assert list(outputs) == NAMES
    assert outputs["image_inline"] == [
        {"type": "input_text", "text": "a chart"},
        {"type": "input_image", "image_url": f"data:image/png;base64,{PNG}", "detail": "auto"},
    ]
    assert outputs["image_url"] == [
        {"type": "input_image", "image_url": "https://img.example/cat.jpg", "detail": "auto"}
    ]
    assert outputs["pdf"] == [
        {
            "type": "input_file",
            "file_data": f"data:application/pdf;base64,{PDF}",
            "filename": "report.pdf",
        }
    ]
    [audio] = outputs["audio"]
    assert audio["type"] == "input_text" and "not shown" in audio["text"]
    assert outputs["text_file"][0]["text"].endswith(f"]\n{NOTES}")
    assert outputs["structured"] == '{"temp":21}'


def _bedrock_turns(wanted: Calls = ALL) -> list[dict[str, Any]]:
    from .test_bedrock import converse

    uses = [
        {"toolUse": {"toolUseId": f"tooluse_{n}", "name": n, "input": json.loads(a)}}
        for n, a in wanted
    ]
    return [
        {"json": converse(uses, "tool_use")},
        {"json": converse([{"text": "done"}], "end_turn")},
    ]


def _bedrock_model(server: ProviderServer) -> Any:
    from toolweave.providers import BedrockChatModel

    from .test_bedrock import AKID, MODEL, REGION, SECRET_KEY

    return BedrockChatModel(
        MODEL,
        region=REGION,
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET_KEY,
        base_url=server.url,
        max_tokens=512,
    )


def _check_bedrock(body: dict[str, Any]) -> None:
    from .test_bedrock import check_body

    check_body(body, stream=False)


def test_bedrock(server: ProviderServer) -> None:
    pytest.importorskip("botocore")
    body = _converse(server, _bedrock_model(server), _bedrock_turns())
    _check_bedrock(body)
    turn = body["messages"][-1]
    results = {
        b["toolResult"]["toolUseId"][8:]: b["toolResult"]["content"] for b in turn["content"]
    }
    assert list(results) == NAMES
    assert results["image_inline"][1] == {"image": {"format": "png", "source": {"bytes": PNG}}}
    assert results["pdf"][0]["document"]["format"] == "pdf"
    assert "file:///docs/readme.md" in results["resource_link"][0]["text"]
    assert results["embedded_text"][0]["text"].endswith("]\nbuy milk")
    assert "not shown" in results["audio"][0]["text"]
    assert results["structured"] == [{"text": '{"temp":21}'}]


# a real MCP server from npm ---------------------------------------------------------------
EVERYTHING = "@modelcontextprotocol/server-everything"
EVERYTHING_VERSION = "2026.8.31"
EVERYTHING_PIN = f"{EVERYTHING}@{EVERYTHING_VERSION}"
EVERYTHING_CALLS: Calls = [
    ("get-tiny-image", "{}"),
    ("get-resource-links", '{"count": 2}'),
    ("get-resource-reference", '{"resourceType": "Text", "resourceId": 1}'),
    ("get-annotated-message", '{"messageType": "error", "includeImage": true}'),
    ("get-structured-content", '{"location": "Chicago"}'),
]


@pytest.fixture(scope="module")
def everything_script() -> Path:
    """server-everything installed (pinned) into toolweave's cache, not vendored."""
    npm = shutil.which("npm")
    if npm is None:
        pytest.skip("npm is not installed")
    cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "toolweave"
    prefix = cache / f"npm-server-everything-{EVERYTHING_VERSION}"
    script = prefix / "node_modules" / EVERYTHING / "dist" / "index.js"
    if not script.exists():
        subprocess.run(
            [npm, "install", "--no-audit", "--no-fund", "--prefix", str(prefix), EVERYTHING_PIN],
            check=True,
            capture_output=True,
            timeout=600,
        )
    return script


@pytest.fixture
def everything_tools(everything_script: Path) -> Iterator[list[Any]]:
    from toolweave.mcp import McpClient, McpServerConfig

    config = McpServerConfig(
        server_name="everything",
        client_type="stdio",
        params={"command": shutil.which("node") or "node", "args": [str(everything_script)]},
        connect_timeout=60.0,
    )
    with McpClient.connect_sync(config) as client:
        yield client.list_tools()


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "responses", "bedrock"])
def test_server_everything_through_every_provider(
    server: ProviderServer, everything_tools: list[Any], provider: str
) -> None:
    by_name = {t.card.tool_name_on_server: t for t in everything_tools}
    wanted: Calls = [(by_name[n].name, a) for n, a in EVERYTHING_CALLS]
    if provider == "bedrock":
        pytest.importorskip("botocore")
    model, turns, check = {
        "openai": (
            OpenAIChatModel("gpt-4o", api_key=SECRET, base_url=f"{server.url}/v1"),
            _openai_turns,
            check_openai_request,
        ),
        "anthropic": (
            AnthropicChatModel("claude-sonnet-4-5", api_key=SECRET, base_url=server.url),
            _anthropic_turns,
            check_anthropic_request,
        ),
        "gemini": (
            GeminiChatModel("gemini-3-pro-preview", api_key=SECRET, base_url=server.url),
            _gemini_turns,
            check_gemini_request,
        ),
        "responses": (
            OpenAIResponsesChatModel("gpt-5-mini", api_key=SECRET, base_url=f"{server.url}/v1"),
            _responses_turns,
            check_responses_request,
        ),
        "bedrock": (
            _bedrock_model(server) if provider == "bedrock" else None,
            _bedrock_turns,
            _check_bedrock,
        ),
    }[provider]
    server.enqueue(*turns(wanted))
    no_sleep(model)
    with model:
        result = ToolService().tools(everything_tools).chat(model, None, [UserMessage("go")])
    assert result.text == "done"
    executions = result.tool_executions
    assert not any(e.has_failed for e in executions), [e.result_text for e in executions]
    kinds = {e.request.name: [p.type for p in e.contents] for e in executions}
    assert "image" in kinds[by_name["get-tiny-image"].name]
    assert "resource_link" in kinds[by_name["get-resource-links"].name]
    assert "resource" in kinds[by_name["get-resource-reference"].name]
    annotated = next(
        e for e in executions if e.request.name == by_name["get-annotated-message"].name
    )
    assert any(p.annotations is not None for p in annotated.contents)
    structured = next(
        e for e in executions if e.request.name == by_name["get-structured-content"].name
    )
    assert structured.structured["temperature"] is not None
    body = server.bodies[1]
    assert isinstance(body, dict)
    check(body)


def test_constrained_tool_calling_sends_parts_as_text() -> None:
    from toolweave.chat import AiMessage, ToolExecutionResultMessage
    from toolweave.execution import ToolExecutionRequest
    from toolweave.providers.constrained import ConstrainedPlan, ConstrainedToolCalling

    plan = ConstrainedPlan(settings=ConstrainedToolCalling(), tools=(), mode="both")
    result = ToolExecutionResultMessage(
        id="c1", tool_name="shot", text="a chart", contents=tuple(RESULTS["image_inline"])
    )
    messages = plan.messages(
        [
            UserMessage("chart?"),
            AiMessage(tool_execution_requests=[ToolExecutionRequest(id="c1", name="shot")]),
            result,
        ]
    )
    text = messages[-1].text
    assert "a chart\n[image (image/png, 48 B): not shown, tool results go as text here]" in text


USER_ONLY_CALLS: Calls = [
    ("get-annotated-message", '{"messageType": "success", "includeImage": true}'),
    ("get-annotated-message", '{"messageType": "debug", "includeImage": false}'),
]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "gemini", "responses", "bedrock"])
def test_parts_for_the_user_only_are_kept_but_not_sent_to_the_model(
    server: ProviderServer, everything_tools: list[Any], provider: str
) -> None:
    """server-everything's annotated message: "success" text and the image are for
    `audience: ["user"]`, "debug" text for `["assistant"]`. The model gets the debug text
    only; the executions keep every part with its annotations."""
    if provider == "bedrock":
        pytest.importorskip("botocore")
    by_name = {t.card.tool_name_on_server: t for t in everything_tools}
    name = by_name["get-annotated-message"].name
    wanted = [(name, arguments) for _, arguments in USER_ONLY_CALLS]
    model = {
        "openai": lambda: OpenAIChatModel("gpt-4o", api_key=SECRET, base_url=f"{server.url}/v1"),
        "anthropic": lambda: AnthropicChatModel(
            "claude-sonnet-4-5", api_key=SECRET, base_url=server.url
        ),
        "gemini": lambda: GeminiChatModel(
            "gemini-3-pro-preview", api_key=SECRET, base_url=server.url
        ),
        "responses": lambda: OpenAIResponsesChatModel(
            "gpt-5-mini", api_key=SECRET, base_url=f"{server.url}/v1"
        ),
        "bedrock": lambda: _bedrock_model(server),
    }[provider]()
    turns = {
        "openai": _openai_turns,
        "anthropic": _anthropic_turns,
        "gemini": _gemini_turns,
        "responses": _responses_turns,
        "bedrock": _bedrock_turns,
    }[provider](wanted)
    server.enqueue(*turns)
    no_sleep(model)
    with model:
        result = ToolService().tools(everything_tools).chat(model, None, [UserMessage("go")])
    assert result.text == "done"
    sent = server.requests[1].raw.decode("utf-8")
    assert "Debug: Cache hit ratio" in sent
    assert "Operation completed successfully" not in sent
    success, debug = result.tool_executions
    assert [(p.type, p.for_model) for p in success.contents] == [
        ("text", False),
        ("image", False),
    ]
    assert success.contents[0].annotations.audience == ("user",)  # type: ignore[union-attr]
    # every part for the user: the model is told so rather than sent an empty result
    assert success.result_text == USER_ONLY_TEXT
    assert json.dumps(USER_ONLY_TEXT)[1:-1] in sent
    assert debug.result_text == "Debug: Cache hit ratio 0.95, latency 150ms"
    image = success.contents[1]
    assert isinstance(image, ImageContent) and image.data and image.data[:40] not in sent
    check = {
        "openai": check_openai_request,
        "anthropic": check_anthropic_request,
        "gemini": check_gemini_request,
        "responses": check_responses_request,
        "bedrock": _check_bedrock,
    }[provider]
    check(server.bodies[1])
