"""The official reference servers from npm, driven through `ToolService` with a
`ScriptedChatModel` that calls every tool they list: ``server-everything`` over stdio,
streamable HTTP and SSE (forced onto 127.0.0.1 by a ``node --require`` preload), and
``server-filesystem``. Sampling, elicitation, roots, structured content, images and
resources included; the assertions are on what the model receives."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_support import TEST_TIMEOUT, free_port, wait_for_port
from npm_support import EVERYTHING, FILESYSTEM, LOOPBACK_PRELOAD, npm_install

from toolweave import AiMessage, ImageContent, ToolExecutionRequest
from toolweave.chat.messages import ToolExecutionResultMessage
from toolweave.chat.scripted import ScriptedChatModel
from toolweave.context import ElicitationResult
from toolweave.mcp import McpClient, McpServerConfig, McpTool
from toolweave.mcp.hooks import ElicitationRequest
from toolweave.service import ToolService

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def modules() -> Path:
    return npm_install(EVERYTHING, FILESYSTEM)


def node_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ, **extra)
    env["NODE_OPTIONS"] = f"{env.get('NODE_OPTIONS', '')} --require {LOOPBACK_PRELOAD}".strip()
    return env


@pytest.fixture(params=["stdio", "streamable-http", "sse"])
def everything(request: pytest.FixtureRequest) -> Iterator[McpServerConfig]:
    script = str(modules() / "@modelcontextprotocol/server-everything/dist/index.js")
    if request.param == "stdio":
        yield McpServerConfig(
            server_name="everything",
            params={"command": "node", "args": [script, "stdio"]},
            connect_timeout=60,
        )
        return
    port = free_port()
    mode = "streamableHttp" if request.param == "streamable-http" else "sse"
    proc = subprocess.Popen(
        ["node", script, mode],
        env=node_env(PORT=str(port)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, proc)  # type: ignore[arg-type]
        path = "/mcp" if mode == "streamableHttp" else "/sse"
        yield McpServerConfig(
            server_name="everything",
            client_type=request.param,
            params={"url": f"http://127.0.0.1:{port}{path}"},
            connect_timeout=60,
        )
    finally:
        proc.terminate()
        proc.wait(10)


ARGUMENTS: dict[str, dict[str, Any]] = {
    "echo": {"message": "hello"},
    "get-sum": {"a": 2, "b": 3},
    "get-annotated-message": {"messageType": "success", "includeImage": True},
    "get-structured-content": {"location": "Chicago"},
    "get-resource-links": {"count": 2},
    "gzip-file-as-resource": {"name": "hi.gz", "data": "data:text/plain;base64,aGVsbG8="},
    "trigger-long-running-operation": {"duration": 1, "steps": 2},
    "trigger-url-elicitation": {"url": "https://example.com/consent"},
    "trigger-sampling-request": {"prompt": "say hi", "maxTokens": 20},
    "simulate-research-query": {"topic": "python", "ambiguous": True},
}


async def ask_user(request: ElicitationRequest) -> ElicitationResult:
    if request.mode != "form":
        return ElicitationResult("accept", None)
    fields = (request.schema or {}).get("properties") or {}
    # simulate-research-query asks which meaning of its topic is meant (a oneOf of consts)
    picks = {k: v["oneOf"][1]["const"] for k, v in fields.items() if "oneOf" in v}
    return ElicitationResult("accept", picks)


def results_by_tool(model: ScriptedChatModel) -> dict[str, ToolExecutionResultMessage]:
    return {
        m.tool_name: m
        for m in model.requests[-1].messages
        if isinstance(m, ToolExecutionResultMessage)
    }


async def call_all(tools: list[McpTool]) -> dict[str, ToolExecutionResultMessage]:
    calls = [
        ToolExecutionRequest(name=t.name, arguments=json.dumps(ARGUMENTS.get(t.name, {})))
        for t in tools
    ]
    model = ScriptedChatModel([AiMessage(tool_execution_requests=tuple(calls)), AiMessage("ok")])
    answer = await ToolService().tools(tools).achat(model, messages="use every tool")
    assert answer.final_response is not None and answer.final_response.ai_message.text == "ok"
    return results_by_tool(model)


async def test_server_everything_every_tool(everything: McpServerConfig, tmp_path: Path) -> None:
    sampler = ScriptedChatModel(lambda request: AiMessage("a sampled greeting"))
    async with (
        asyncio.timeout(TEST_TIMEOUT),
        McpClient(everything, sampling=sampler, elicitation=ask_user, roots=[tmp_path]) as client,
    ):
        tools = await client.list_tools()
        names = {t.name for t in tools}
        # The tools that need our capabilities are offered because we declared them; the one
        # that requires a task-augmented call is called as a task.
        assert {"trigger-sampling-request", "trigger-elicitation-request"} <= names
        assert {"get-roots-list", "echo", "get-tiny-image"} <= names
        assert "simulate-research-query" in names
        got = await call_all(tools)
    assert set(got) == names
    failed = {n: r.text for n, r in got.items() if r.is_error}
    assert not failed, failed
    assert got["echo"].text == "Echo: hello"
    assert "5" in got["get-sum"].text
    image = [p for p in got["get-tiny-image"].contents or () if isinstance(p, ImageContent)]
    assert image and image[0].data
    assert got["get-structured-content"].structured is not None
    assert "a sampled greeting" in got["trigger-sampling-request"].text
    assert sampler.requests[0].messages[-1].text.endswith("say hi")  # type: ignore[union-attr]
    assert "accept" in got["trigger-elicitation-request"].text
    assert tmp_path.as_uri() in got["get-roots-list"].text
    # a task: created, polled, input_required → the elicitation hook answered → completed
    assert "# Research Report: python (snake)" in got["simulate-research-query"].text
    links = [p for p in got["get-resource-links"].contents or () if p.type == "resource_link"]
    assert len(links) == 2


async def test_server_filesystem_every_tool(tmp_path: Path) -> None:
    script = str(modules() / "@modelcontextprotocol/server-filesystem/dist/index.js")
    (tmp_path / "a.txt").write_text("alpha\n")
    (tmp_path / "sub").mkdir()
    cfg = McpServerConfig(
        server_name="files",
        params={"command": "node", "args": [script, str(tmp_path)]},
        connect_timeout=60,
    )
    a, b = str(tmp_path / "a.txt"), str(tmp_path / "b.txt")
    args: dict[str, dict[str, Any]] = {
        "read_file": {"path": a},
        "read_text_file": {"path": a},
        "read_media_file": {"path": a},
        "read_multiple_files": {"paths": [a]},
        "write_file": {"path": b, "content": "beta"},
        "edit_file": {
            "path": a,
            "edits": [{"oldText": "alpha", "newText": "ALPHA"}],
            "dryRun": True,
        },
        "create_directory": {"path": str(tmp_path / "new")},
        "list_directory": {"path": str(tmp_path)},
        "list_directory_with_sizes": {"path": str(tmp_path)},
        "directory_tree": {"path": str(tmp_path)},
        "move_file": {"source": str(tmp_path / "sub"), "destination": str(tmp_path / "moved")},
        "search_files": {"path": str(tmp_path), "pattern": "*.txt"},
        "get_file_info": {"path": a},
        "list_allowed_directories": {},
    }
    async with asyncio.timeout(TEST_TIMEOUT), McpClient(cfg, roots=[tmp_path]) as client:
        tools = await client.list_tools()
        unknown = {t.name for t in tools} - set(args)
        assert not unknown, f"new tools to cover: {unknown}"
        ARGUMENTS.update(args)
        try:
            got = await call_all(tools)
        finally:
            for name in args:
                ARGUMENTS.pop(name, None)
    failed = {n: r.text for n, r in got.items() if r.is_error and n != "read_media_file"}
    assert not failed, failed
    assert "alpha" in got["read_text_file"].text
    assert (tmp_path / "b.txt").read_text() == "beta"
    assert "a.txt" in got["list_directory"].text
    assert (tmp_path / "moved").is_dir()
