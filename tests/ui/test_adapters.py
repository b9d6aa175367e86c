"""The adapters on their own: what each toolweave event becomes, and what a request that
does not fit is refused with."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx
import pytest

from toolweave import (
    AiMessage,
    ScriptedChatModel,
    ToolContext,
    ToolExecutionRequest,
    ToolService,
    tool,
)
from toolweave.execution import ImageContent, TextContent, ToolExecutionResult
from toolweave.service import Approve, Deny
from toolweave.ui import ProtocolRequestError, ai_sdk_request, create_app

from .scenario import KEY, app


@tool
async def slow(ctx: ToolContext) -> str:
    """Reports progress."""
    ctx.report_progress(1, 2, "half")
    return "done"


@tool
def picture() -> ToolExecutionResult:
    """Returns an image."""
    return ToolExecutionResult(
        text="a dot",
        contents=(
            TextContent(text="a dot"),
            ImageContent(data="iVBORw0KGgo=", mime_type="image/png"),
        ),
    )


@tool
def broken() -> str:
    """Fails."""
    raise RuntimeError("the disk is full")


def _calls(*names: str) -> ScriptedChatModel:
    calls = [ToolExecutionRequest(id=f"c{i}", name=n) for i, n in enumerate(names)]
    return ScriptedChatModel([AiMessage(tool_execution_requests=calls), AiMessage("ok")])


def _post(asgi: Any, path: str, body: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.post(path, json=body)

    import asyncio

    return asyncio.run(go())


def _chunks(response: httpx.Response) -> list[dict[str, Any]]:
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    assert lines[-1] == "[DONE]"
    return [json.loads(x) for x in lines[:-1]]


USER = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "go"}]}


def test_progress_images_and_errors_have_their_chunks() -> None:
    service = ToolService().tools(slow, picture, broken)
    asgi = create_app(service, _calls("slow", "picture", "broken"), key=KEY)
    chunks = _chunks(_post(asgi, "/api/chat", {"messages": [USER]}))
    progress = [c for c in chunks if c["type"] == "data-toolweave-progress"]
    assert progress == [
        {
            "type": "data-toolweave-progress",
            "id": "progress_c0",
            "data": {"toolCallId": "c0", "progress": 1, "total": 2, "message": "half"},
        }
    ]
    outputs = {c["toolCallId"]: c for c in chunks if c["type"].startswith("tool-output")}
    assert outputs["c0"]["output"] == "done"
    assert outputs["c1"]["output"] == {
        "text": "a dot",
        "media": [
            {"type": "image", "mediaType": "image/png", "url": "data:image/png;base64,iVBORw0KGgo="}
        ],
    }
    assert (
        outputs["c2"]["type"] == "tool-output-error"
        and "the disk is full" in outputs["c2"]["errorText"]
    )
    assert chunks[-1] == {"type": "finish", "finishReason": "stop"}


def test_ag_ui_carries_images_as_parts_and_errors_as_run_error() -> None:
    asgi = create_app(ToolService().tools(picture), _calls("picture"), key=KEY)
    run = {
        "threadId": "t",
        "runId": "r",
        "messages": [{"id": "u", "role": "user", "content": "go"}],
    }
    events = [
        json.loads(x[6:])
        for x in _post(asgi, "/api/ag-ui", run).text.splitlines()
        if x.startswith("data: ")
    ]
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"][1] == {
        "type": "image",
        "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"},
    }
    # the script is used up: the model's failure ends the next run
    events = [
        json.loads(x[6:])
        for x in _post(asgi, "/api/ag-ui", run).text.splitlines()
        if x.startswith("data: ")
    ]
    assert events[-1]["type"] == "RUN_ERROR"


def _paused() -> tuple[Any, list[dict[str, Any]]]:
    asgi = app()
    user = {"id": "u", "role": "user", "parts": [{"type": "text", "text": "pay"}]}
    chunks = _chunks(_post(asgi, "/api/chat", {"messages": [user]}))
    state = next(c for c in chunks if c["type"] == "data-toolweave-state")
    parts = [
        {"type": "step-start"},
        {"type": "tool-send_money", "toolCallId": "p1", "state": "approval-responded",
         "input": {"to": "Ann", "amount": 5}, "approval": {"id": "p1", "approved": True}},
        {"type": state["type"], "id": state["id"], "data": state["data"]},
    ]  # fmt: skip
    return asgi, [user, {"id": "m", "role": "assistant", "parts": parts}]


def test_an_edited_input_is_approved_as_edited_and_a_denial_keeps_its_reason() -> None:
    _, messages = _paused()
    request = ai_sdk_request({"messages": messages}, key=KEY)
    assert request.resuming and request.decisions == {"p1": Approve()} and request.message_id == "m"
    messages[1]["parts"][1]["input"] = {"to": "Ann", "amount": 7}
    assert ai_sdk_request({"messages": messages}, key=KEY).decisions == {
        "p1": Approve({"to": "Ann", "amount": 7})
    }
    messages[1]["parts"][1]["approval"] = {"id": "p1", "approved": False, "reason": "no"}
    assert ai_sdk_request({"messages": messages}, key=KEY).decisions == {"p1": Deny("no")}


def test_an_edited_or_foreign_state_is_refused() -> None:
    asgi, messages = _paused()
    state = messages[1]["parts"][2]["data"]
    assert "Ann" in state["state"]
    state["state"] = state["state"].replace("Ann", "Eve")
    response = _post(asgi, "/api/chat", {"messages": messages})
    assert response.status_code == 400
    with pytest.raises(ProtocolRequestError):
        ai_sdk_request({"messages": "nope"}, key=KEY)
    assert _post(asgi, "/api/ag-ui", {"threadId": "t"}).status_code == 400


def test_import_toolweave_does_not_import_the_ui() -> None:
    code = "import sys, toolweave, toolweave.cli.app; print('toolweave.ui' in sys.modules, 'starlette' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]
