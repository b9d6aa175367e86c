"""A Chat Completions server for the load test: it answers each conversation by its state.

``python fault_load_server.py PORT``. A request whose last message is a user message gets
one round of three parallel tool calls (``weather``, ``clock``, ``news``; ids derived from
the conversation name, the first user message); a request whose last message is a tool
result gets the final answer ``"done <conversation>"``. ``GET /stats`` returns the request
count. Runs in its own process, so the client's sockets and memory are measured alone.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

STATS = {"requests": 0}


def _answer(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-load",
        "object": "chat.completion",
        "created": 1,
        "model": "load",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


async def completions(request: Request) -> Response:
    STATS["requests"] += 1
    body = json.loads(await request.body())
    messages = body["messages"]
    conversation = next(m["content"] for m in messages if m["role"] == "user")
    if messages[-1]["role"] == "tool":
        answered = sorted(m["tool_call_id"] for m in messages if m["role"] == "tool")
        text = f"done {conversation} ({len(answered)} results)"
        return JSONResponse(_answer({"role": "assistant", "content": text}, "stop"))
    calls = [
        {
            "id": f"{conversation}-{name}",
            "type": "function",
            "function": {"name": name, "arguments": json.dumps({"topic": conversation})},
        }
        for name in ("weather", "clock", "news")
    ]
    message = {"role": "assistant", "content": None, "tool_calls": calls}
    return JSONResponse(_answer(message, "tool_calls"))


async def stats(request: Request) -> Response:
    return JSONResponse(STATS)


app = Starlette(
    routes=[
        Route("/v1/chat/completions", completions, methods=["POST"]),
        Route("/stats", stats),
    ]
)

if __name__ == "__main__":
    uvicorn.run(
        app,
        host="127.0.0.1",
        port=int(sys.argv[1]),
        log_level="warning",
        access_log=False,
        backlog=2048,
        timeout_keep_alive=30,
    )
