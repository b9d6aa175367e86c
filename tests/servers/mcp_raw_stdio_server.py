"""A hand-written stdio "MCP server" that sends what a well-behaved one never would.

Tools: ``big`` (a text result of ``size`` bytes, on one line), ``surrogate`` (text with a
lone surrogate escape, ``"\\ud800"``), ``family`` (starts a sleeping child process and
returns both pids), ``connect`` (answers JSON-RPC -32042, URL elicitation required, naming
one URL, until it was refused once; then "connected"), ``always_url`` (always -32042, with
two well-formed elicitations between malformed ones). With ``stubborn`` as argument the
server ignores SIGTERM and never exits when its stdin closes (so a client has to kill it).
With ``modern`` it speaks only 2026-07-28 (``server/discover``; ``initialize`` refused) and
its results carry no ``resultType`` (nor ``ttlMs`` / ``cacheScope``).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

TOOLS = ["big", "surrogate", "family", "connect", "always_url"]
URL = "https://auth.example.com/connect?elicitation=e1"


def reply(msg_id: object, body: str) -> None:
    sys.stdout.write(f'{{"jsonrpc":"2.0","id":{json.dumps(msg_id)},"result":{body}}}\n')
    sys.stdout.flush()


def fail(msg_id: object, code: int, message: str, data: object = None) -> None:
    error = {"code": code, "message": message, **({"data": data} if data is not None else {})}
    sys.stdout.write(json.dumps({"jsonrpc": "2.0", "id": msg_id, "error": error}) + "\n")
    sys.stdout.flush()


def url_required(msg_id: object, *elicitations: object) -> None:
    fail(msg_id, -32042, "This request requires more information.", {"elicitations": elicitations})


def elicitation(n: int, url: str = URL) -> dict[str, str]:
    return {"mode": "url", "elicitationId": f"e{n}", "url": url, "message": f"Sign in ({n})"}


def main() -> None:
    stubborn = "stubborn" in sys.argv[1:]
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    modern = "modern" in sys.argv[1:]
    refused = 0  # how often `connect` answered -32042
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        method, msg_id = message["method"], message["id"]
        if modern and method == "initialize":
            fail(msg_id, -32022, "unsupported", {"supported": ["2026-07-28"]})
        elif method == "server/discover":
            result = {"supportedVersions": ["2026-07-28"], "capabilities": {"tools": {}}}
            reply(msg_id, json.dumps(result))
        elif method == "initialize":
            result = {
                "protocolVersion": message["params"]["protocolVersion"],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "raw", "version": "1"},
            }
            reply(msg_id, json.dumps(result))
        elif method == "tools/list":
            tools = [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]
            reply(msg_id, json.dumps({"tools": tools}))
        elif method == "tools/call":
            name = message["params"]["name"]
            args = message["params"].get("arguments") or {}
            if name == "big":
                text = "x" * int(args["size"])
            elif name == "surrogate":
                reply(msg_id, '{"content":[{"type":"text","text":"a\\ud800b"}]}')
                continue
            elif name == "connect" and not refused:
                refused += 1
                url_required(msg_id, elicitation(1))
                continue
            elif name == "connect":
                text = f"connected after {refused} refusal"
            elif name == "always_url":
                second = elicitation(2, "https://pay.example.com/\nline")
                url_required(msg_id, "junk", elicitation(1), {"mode": "url"}, second)
                continue
            else:
                child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
                text = f"{os.getpid()} {child.pid}"
            reply(msg_id, json.dumps({"content": [{"type": "text", "text": text}]}))
        else:
            reply(msg_id, "{}")
    while stubborn:
        time.sleep(1)


if __name__ == "__main__":
    main()
