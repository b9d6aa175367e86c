"""Scripted models for `toolweave chat --mcp` tests: each calls one tool of server-everything
and then reports, on one line, what the server said it received."""

from __future__ import annotations

import json

from toolweave import AiMessage, ScriptedChatModel, ToolExecutionRequest
from toolweave.chat.request import ChatRequest


def _calling(name: str, arguments: str = "{}") -> ScriptedChatModel:
    def script(request: ChatRequest) -> AiMessage:
        results = [m for m in request.messages if m.type == "tool_result"]
        if not results:
            call = ToolExecutionRequest(id="e1", name=name, arguments=arguments)
            return AiMessage(tool_execution_requests=[call])
        text = results[-1].text  # type: ignore[union-attr]
        raw = text.split("Raw result:", 1)[-1].strip()
        try:
            raw = json.dumps(json.loads(raw), sort_keys=True)
        except ValueError:
            raw = " ".join(raw.split())
        return AiMessage("SERVER GOT: " + raw)

    return ScriptedChatModel(script)


def form_model() -> ScriptedChatModel:
    """Calls server-everything's form elicitation tool."""
    return _calling("trigger-elicitation-request")


def url_model() -> ScriptedChatModel:
    """Calls server-everything's URL elicitation tool."""
    return _calling("trigger-url-elicitation", '{"url": "https://example.com/login"}')


def sampling_model() -> ScriptedChatModel:
    """Calls server-everything's sampling tool; answers the server's sampling request (the
    one with the server's system prompt) itself."""
    chat = _calling("trigger-sampling-request", '{"prompt": "a haiku", "maxTokens": 50}')

    def script(request: ChatRequest) -> AiMessage:
        if any(m.type == "system" for m in request.messages):  # the server's request
            asked = " ".join(str(getattr(m, "text", "")) for m in request.messages)
            return AiMessage(f"SAMPLED ({request.parameters.max_tokens} tokens) for: {asked}")
        return chat.chat(request).ai_message

    return ScriptedChatModel(script)
