"""`toolweave web`'s "Always allow" is a standing approval of the service: the resumed turn
ends with the standing decisions signed and bound to the chat id (a
`data-toolweave-standing` part), which the page sends back with its messages; the next turn
of that chat runs the tool without asking, another chat id is refused, and without them
the tool is asked for again."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest, ToolService, tool
from toolweave.chat.request import ChatRequest
from toolweave.ui import ai_sdk_request, create_app
from toolweave.ui._ai_sdk import STANDING_PART

KEY = "a test signing key of 32 bytes!!"
SEARCHED: list[str] = []


@tool(requires_approval=True)
def search_web(query: str) -> str:
    """Search the web."""
    SEARCHED.append(query)
    return f"results for {query}"


def _model() -> ScriptedChatModel:
    """Searches once per user message (the call id numbers it), then answers."""

    def script(request: ChatRequest) -> AiMessage:
        last = request.messages[-1]
        if last.type == "user":
            turn = sum(1 for m in request.messages if m.type == "user")
            call = ToolExecutionRequest(
                id=f"s{turn}", name="search_web", arguments='{"query": "q"}'
            )
            return AiMessage(tool_execution_requests=[call])
        return AiMessage("found")

    return ScriptedChatModel(script)


def _post(asgi: Any, body: Any) -> httpx.Response:
    async def go() -> httpx.Response:
        transport = httpx.ASGITransport(app=asgi)
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as client:
            return await client.post("/api/chat", json=body)

    return asyncio.run(go())


def _chunks(response: httpx.Response) -> list[dict[str, Any]]:
    assert response.status_code == 200, response.text
    lines = [line[6:] for line in response.text.splitlines() if line.startswith("data: ")]
    return [json.loads(x) for x in lines[:-1]]


def _user(text: str, n: int) -> dict[str, Any]:
    return {"id": f"u{n}", "role": "user", "parts": [{"type": "text", "text": text}]}


def _always_allowed_turn(asgi: Any, chat_id: str) -> list[dict[str, Any]]:
    """Turn 1: the search waits; "Always allow" answers it. The messages after it."""
    user = _user("search", 1)
    paused = _chunks(_post(asgi, {"id": chat_id, "messages": [user]}))
    state = next(c for c in paused if c["type"] == "data-toolweave-state")
    parts: list[dict[str, Any]] = [
        {"type": "tool-search_web", "toolCallId": "s1", "state": "approval-responded",
         "input": {"query": "q"}, "approval": {"id": "s1", "approved": True, "always": True}},
        {"type": state["type"], "id": state["id"], "data": state["data"]},
    ]  # fmt: skip
    assistant = {"id": "m1", "role": "assistant", "parts": parts}
    done = _chunks(_post(asgi, {"id": chat_id, "messages": [user, assistant]}))
    standing = [c for c in done if c["type"] == STANDING_PART]
    assert len(standing) == 1 and SEARCHED == ["q"]
    parts.append({"type": STANDING_PART, "id": "standing", "data": standing[0]["data"]})
    return [user, assistant]


def test_always_allow_holds_in_the_next_turn_of_the_same_chat() -> None:
    SEARCHED.clear()
    asgi = create_app(ToolService().tools(search_web), _model(), key=KEY)
    history = _always_allowed_turn(asgi, "chat-1")
    chunks = _chunks(_post(asgi, {"id": "chat-1", "messages": [*history, _user("again", 2)]}))
    kinds = [c["type"] for c in chunks]
    assert "tool-approval-request" not in kinds and "tool-output-available" in kinds
    assert SEARCHED == ["q", "q"]
    assert STANDING_PART in kinds  # still in force, for the turn after


def test_another_chat_or_an_edited_text_is_refused_and_without_it_asked() -> None:
    SEARCHED.clear()
    asgi = create_app(ToolService().tools(search_web), _model(), key=KEY)
    history = _always_allowed_turn(asgi, "chat-1")
    turn_two = [*history, _user("again", 2)]
    assert _post(asgi, {"id": "chat-2", "messages": turn_two}).status_code == 400
    part = history[1]["parts"][-1]["data"]
    signed = part["standing"]
    part["standing"] = signed.replace("search_web", "search_wep")
    assert _post(asgi, {"id": "chat-1", "messages": turn_two}).status_code == 400
    history[1]["parts"].pop()  # the page sent them no more: asked again
    chunks = _chunks(_post(asgi, {"id": "chat-1", "messages": turn_two}))
    assert "tool-approval-request" in [c["type"] for c in chunks]
    assert SEARCHED == ["q"]


def test_always_is_read_as_a_standing_approval_never_with_edited_arguments() -> None:
    SEARCHED.clear()
    asgi = create_app(ToolService().tools(search_web), _model(), key=KEY)
    user = _user("search", 1)
    paused = _chunks(_post(asgi, {"id": "c", "messages": [user]}))
    state = next(c for c in paused if c["type"] == "data-toolweave-state")
    part = {"type": "tool-search_web", "toolCallId": "s1", "state": "approval-responded",
            "input": {"query": "other"}, "approval": {"id": "s1", "approved": True, "always": True}}  # fmt: skip
    message = {"id": "m1", "role": "assistant", "parts": [part, state]}
    (decision,) = ai_sdk_request(
        {"id": "c", "messages": [user, message]}, key=KEY
    ).decisions.values()
    assert decision.arguments == {"query": "other"} and not decision.always  # type: ignore[union-attr]
    part["input"] = {"query": "q"}
    (decision,) = ai_sdk_request(
        {"id": "c", "messages": [user, message]}, key=KEY
    ).decisions.values()
    assert decision.always and decision.arguments is None  # type: ignore[union-attr]
