"""A cooperative stand-in for a cloud model, on 127.0.0.1, for running the documentation's
examples without a key (tests/test_docs.py points `OPENAI_BASE_URL` at it).

It speaks OpenAI Chat Completions (plain and streamed) and the Responses API (plain) and
behaves like a model that uses its tools: after a user message it calls the tool whose
name or description shares the most words with the message (arguments made up from the
tool's schema: capitalised words and numbers of the message, else examples); once results
came back it answers with them. With a `json_schema` response format the answer is an
instance of that schema.
"""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

__all__ = ["DocsModelServer"]


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z]{3,}", text)}


class _Values:
    """Example values for a schema, drawn from the user's message where it has some."""

    def __init__(self, text: str, root: Any = None) -> None:
        self.root = root if isinstance(root, dict) else {}
        names = re.findall(r"\b[A-Z][a-z]+\b", text)
        self.names = names[1:] if len(names) > 1 else names  # skip a capitalised first word
        self.numbers = [int(n) for n in re.findall(r"\b\d+\b", text)]

    def make(self, schema: Any, name: str = "") -> Any:
        if not isinstance(schema, dict):
            return "example"
        ref = schema.get("$ref")
        if isinstance(ref, str) and ref.startswith("#/"):
            target: Any = self.root
            for part in ref[2:].split("/"):
                target = target.get(part, {}) if isinstance(target, dict) else {}
            return self.make(target, name)
        for key in ("anyOf", "oneOf"):
            options = [s for s in schema.get(key) or () if s.get("type") != "null"]
            if options:
                return self.make(options[0], name)
        if "enum" in schema:
            return schema["enum"][0]
        if "const" in schema:
            return schema["const"]
        kind = schema.get("type")
        if isinstance(kind, list):
            kind = next((k for k in kind if k != "null"), "string")
        if kind == "object" or "properties" in schema:
            props = schema.get("properties") or {}
            required = set(schema.get("required") or props)
            return {k: self.make(v, k) for k, v in props.items() if k in required}
        if kind == "array":
            return [self.make(schema.get("items") or {}, name)]
        if kind in ("integer", "number"):
            value = self.numbers.pop(0) if self.numbers else 21
            return value if kind == "integer" else float(value)
        if kind == "boolean":
            return True
        return self.names.pop(0) if self.names else f"example {name}".strip()


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _decide(
    user: str, results: list[str], tools: list[dict[str, Any]], schema: Any, no_tools: bool
) -> tuple[dict[str, Any] | None, str]:
    """(the tool call to make, or None; else the answer text)."""
    if tools and not results and not no_tools:
        asked = _words(user)
        best = max(
            tools,
            key=lambda t: len(asked & _words(f"{t['name']} {t.get('description', '')}")),
        )
        params = best.get("parameters") or {}
        args = _Values(user, params).make(params)
        return {"name": best["name"], "arguments": json.dumps(args)}, ""
    if schema is not None:
        return None, json.dumps(_Values(f"{user} {' '.join(results)}", schema).make(schema))
    if results:
        return None, "Here is what the tools said: " + "; ".join(results)
    return None, f"You said: {user}"


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        self.server.requests.append((self.path, body))
        if self.path.endswith("/chat/completions"):
            self._chat_completions(body)
        elif self.path.endswith("/responses"):
            self._responses(body)
        else:
            self._send(404, {"error": {"message": f"no such endpoint: {self.path}"}})

    def _send(self, status: int, data: Any) -> None:
        raw = json.dumps(data).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(raw)))
        self.end_headers()
        self.wfile.write(raw)

    def _chat_completions(self, body: dict[str, Any]) -> None:
        messages = body.get("messages") or []
        last_user = max((i for i, m in enumerate(messages) if m.get("role") == "user"), default=0)
        user = _text(messages[last_user].get("content")) if messages else ""
        results = [_text(m.get("content")) for m in messages[last_user:] if m["role"] == "tool"]
        tools = [t["function"] for t in body.get("tools") or ()]
        fmt = body.get("response_format") or {}
        schema = (fmt.get("json_schema") or {}).get("schema")
        call, text = _decide(user, results, tools, schema, body.get("tool_choice") == "none")
        message: dict[str, Any] = {"role": "assistant", "content": text or None}
        if call is not None:
            message["tool_calls"] = [{"id": "call_1", "type": "function", "function": call}]
        finish = "tool_calls" if call else "stop"
        usage = {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
        base = {"id": "chatcmpl-docs", "created": 0, "model": body.get("model", "")}
        if not body.get("stream"):
            choice = {"index": 0, "message": message, "finish_reason": finish}
            self._send(200, {**base, "object": "chat.completion", "choices": [choice]})
            return
        delta: dict[str, Any] = {"role": "assistant"}
        if call is not None:
            delta["tool_calls"] = [{"index": 0, **message["tool_calls"][0]}]
        chunks = [{"index": 0, "delta": delta, "finish_reason": None}]
        chunks += [
            {"index": 0, "delta": {"content": text[i : i + 12]}, "finish_reason": None}
            for i in range(0, len(text), 12)
        ]
        chunks.append({"index": 0, "delta": {}, "finish_reason": finish})
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.end_headers()
        for choice in chunks:
            event = {**base, "object": "chat.completion.chunk", "choices": [choice]}
            self.wfile.write(f"data: {json.dumps(event)}\n\n".encode())
        last = {**base, "object": "chat.completion.chunk", "choices": [], "usage": usage}
        self.wfile.write(f"data: {json.dumps(last)}\n\ndata: [DONE]\n\n".encode())

    def _responses(self, body: dict[str, Any]) -> None:
        items = body.get("input") or []
        if isinstance(items, str):
            items = [{"role": "user", "content": items}]
        last_user = max((i for i, m in enumerate(items) if m.get("role") == "user"), default=0)
        user = _text(items[last_user].get("content")) if items else ""
        results = [
            str(m.get("output"))
            for m in items[last_user:]
            if m.get("type") == "function_call_output"
        ]
        tools = [t for t in body.get("tools") or () if t.get("type") == "function"]
        fmt = (body.get("text") or {}).get("format") or {}
        call, text = _decide(user, results, tools, fmt.get("schema"), False)
        if call is not None:
            output = [{"type": "function_call", "id": "fc_1", "call_id": "call_1", **call}]
        else:
            part = {"type": "output_text", "text": text, "annotations": []}
            output = [{"type": "message", "id": "msg_1", "role": "assistant", "content": [part]}]
        usage = {"input_tokens": 20, "output_tokens": 10, "total_tokens": 30}
        self._send(
            200,
            {"id": "resp_docs", "object": "response", "status": "completed", "output": output,
             "model": body.get("model", ""), "usage": usage},
        )  # fmt: skip


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    requests: list[tuple[str, Any]]


class DocsModelServer:
    """The stand-in model on a free loopback port: `start()`, `url` (`.../v1`), `stop()`."""

    def __init__(self) -> None:
        self._server = _Server(("127.0.0.1", 0), _Handler)
        self._server.requests = []
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """The OpenAI-style base URL, `http://127.0.0.1:<port>/v1`."""
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    @property
    def requests(self) -> list[tuple[str, Any]]:
        """(path, decoded body) of every request received."""
        return self._server.requests

    def start(self) -> DocsModelServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
