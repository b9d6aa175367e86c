"""A hand-written stdio "MCP server" that sends what a well-behaved one never would.

Tools: ``big`` (a text result of ``size`` bytes, on one line), ``surrogate`` (text with a
lone surrogate escape, ``"\\ud800"``), ``family`` (starts a sleeping child process and
returns both pids). With ``stubborn`` as argument the server ignores SIGTERM and never exits
when its stdin closes (so a client has to kill it).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

TOOLS = ["big", "surrogate", "family"]


def reply(msg_id: object, body: str) -> None:
    sys.stdout.write(f'{{"jsonrpc":"2.0","id":{json.dumps(msg_id)},"result":{body}}}\n')
    sys.stdout.flush()


def main() -> None:
    stubborn = "stubborn" in sys.argv[1:]
    if stubborn:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin:
        message = json.loads(line)
        if "id" not in message or "method" not in message:
            continue
        method, msg_id = message["method"], message["id"]
        if method == "initialize":
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
