"""A validating layer in front of the SDK's stdio server transport.

The SDK drops a line it cannot validate (it only logs it), and reads a request whose id is
not a string or an integer as a notification: a client waiting for the answer to a batch, a
request with a string as `params`, an object as id or nesting deeper than the SDK's parser
follows would wait forever. `checked_stdio_server` answers each such line itself, with the
JSON-RPC error the specification names (-32700 parse error, -32600 invalid request), and
hands only well-formed lines on to the SDK. A lone surrogate escape (`"\\ud800"`), which
the SDK's parser refuses without an answer, reaches it as U+FFFD. A line over
`max_message_bytes` is not read into memory whole: it is skipped to its end and answered
with -32600 (the id taken from its first bytes, if it is there), and the session goes on.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import sys
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

import anyio
import mcp_types
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage

from .._utils.unicode import has_surrogate_escape, scrub_surrogates

__all__ = ["DEFAULT_MAX_MESSAGE_BYTES", "check_message", "checked_stdio_server"]

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
DEFAULT_MAX_MESSAGE_BYTES = 4 * 1024 * 1024
"""The longest request a served client may send (a stdio line, an HTTP body): the SDK's
own HTTP default, for every transport."""
_ID_SCAN_BYTES = 4096
"""How much of a refused line is looked at for its id."""
_SKIP_CHUNK = 1024 * 1024
MAX_DEPTH = 200
"""The deepest nesting (objects and arrays, the message itself counted) the SDK's parser
accepts; deeper messages are answered here."""

_STRING = r'"(?:[^"\\]|\\.)*"'
_TOKEN = re.compile(rf"{_STRING}|[\[\]{{}}]")
_ID_VALUE = re.compile(rf"\s*:\s*({_STRING}|-?\d+)\s*[,}}]")


@dataclass(frozen=True, slots=True)
class Problem:
    """Why a line is refused: the JSON-RPC error code, its message and the id to answer."""

    code: int
    message: str
    id: str | int | None = None


def _valid_id(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))


def _depth(value: Any) -> int:
    deepest = 0
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > deepest:
            deepest = depth
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values() if isinstance(v, dict | list))
        elif isinstance(node, list):
            stack.extend((v, depth + 1) for v in node if isinstance(v, dict | list))
    return deepest


def _top_level_id(text: str) -> str | int | None:
    """The `id` member of the outermost object of `text`, found without parsing it (for a
    message nested too deeply to parse); None when there is none of a valid type."""
    depth = 0
    for match in _TOKEN.finditer(text):
        token = match.group()
        if token in "[{":
            depth += 1
        elif token in "]}":
            depth -= 1
        elif depth == 1 and token == '"id"':
            value = _ID_VALUE.match(text, match.end())
            if value is not None:
                found = json.loads(value.group(1))
                return found if _valid_id(found) else None
    return None


def check_message(line: str) -> Problem | None:
    """The problem with one line of the wire, or None when the SDK can take it. Responses
    and notifications are never answered (JSON-RPC), so only requests are checked in depth.
    """
    try:
        message = json.loads(line)
    except RecursionError:
        return Problem(INVALID_REQUEST, "Invalid request: nested too deeply", _top_level_id(line))
    except ValueError:
        return Problem(PARSE_ERROR, "Parse error: not valid JSON")
    if isinstance(message, list):
        return Problem(INVALID_REQUEST, "Invalid request: batches are not supported")
    if not isinstance(message, dict):
        return Problem(INVALID_REQUEST, "Invalid request: not a JSON-RPC message object")
    if "id" not in message:
        return None  # a notification: never answered
    msg_id = message["id"]
    if "method" not in message and ("result" in message or "error" in message):
        return None  # a response to one of our requests
    if not _valid_id(msg_id):
        return Problem(INVALID_REQUEST, "Invalid request: id must be a string or an integer")
    if message.get("jsonrpc") != "2.0":
        return Problem(INVALID_REQUEST, 'Invalid request: jsonrpc must be "2.0"', msg_id)
    if not isinstance(message.get("method"), str):
        return Problem(INVALID_REQUEST, "Invalid request: method must be a string", msg_id)
    params = message.get("params")
    if params is not None and not isinstance(params, dict):
        return Problem(INVALID_REQUEST, "Invalid request: params must be an object", msg_id)
    # Counting brackets is cheap and nearly always settles it; walk only when it may not.
    if line.count("[") + line.count("{") > MAX_DEPTH and _depth(message) > MAX_DEPTH:
        return Problem(INVALID_REQUEST, "Invalid request: nested too deeply", msg_id)
    return None


def _without_surrogates(line: str) -> str:
    """`line` with lone surrogates in its strings replaced by U+FFFD (re-encoded only when
    it escapes one; `check_message` has accepted it, so it parses)."""
    if not has_surrogate_escape(line):
        return line
    return json.dumps(scrub_surrogates(json.loads(line)), ensure_ascii=False)


def _reply(problem: Problem) -> SessionMessage:
    error = mcp_types.ErrorData(code=problem.code, message=problem.message)
    return SessionMessage(mcp_types.JSONRPCError(jsonrpc="2.0", id=problem.id, error=error))


class _CheckedLines:
    """The wire's lines for the SDK's reader, minus the refused ones (answered instead)."""

    def __init__(self, wire: BinaryIO, max_message_bytes: int) -> None:
        self._wire = wire
        self._limit = max_message_bytes
        self._write: Any = None
        self._ready = anyio.Event()

    def reply_with(self, write: Any) -> None:
        self._write = write
        self._ready.set()

    def __aiter__(self) -> _CheckedLines:
        return self

    async def _readline(self, size: int) -> bytes:
        return await anyio.to_thread.run_sync(self._wire.readline, size)

    async def _too_long(self, head: bytes) -> Problem:
        """Skip the rest of a line over the limit (a chunk at a time, never held whole)."""
        chunk = head
        while chunk and not chunk.endswith(b"\n"):
            chunk = await self._readline(_SKIP_CHUNK)
        text = head[:_ID_SCAN_BYTES].decode("utf-8", "replace")
        return Problem(
            INVALID_REQUEST,
            f"Invalid request: a message over {self._limit} bytes (max_message_bytes); "
            "it was dropped",
            _top_level_id(text),
        )

    async def __anext__(self) -> str:
        while True:
            data = await self._readline(self._limit + 1)
            if not data:
                raise StopAsyncIteration
            if len(data) > self._limit and not data.endswith(b"\n"):
                problem = await self._too_long(data)
            else:
                line = data.decode("utf-8", "replace")
                if not line.strip():
                    continue
                checked = check_message(line)
                if checked is None:
                    return _without_surrogates(line)
                problem = checked
            await self._ready.wait()
            await self._write.send(_reply(problem))


@contextlib.contextmanager
def _wire_stdin() -> Iterator[BinaryIO]:
    """Standard input as a private stream, with fd 0 pointed at the null device while
    serving (a tool or its child process reading stdin must not eat the wire), as the SDK
    does for the stdin it opens itself; restored on exit. In place when that cannot be."""
    try:
        import fcntl

        if sys.stdin.buffer.fileno() != 0:
            raise OSError("stdin is not fd 0")
        private = fcntl.fcntl(0, fcntl.F_DUPFD_CLOEXEC, 3)
    except (ImportError, AttributeError, OSError, ValueError):
        yield sys.stdin.buffer
        return
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    try:
        # closefd=False: a worker thread may still be blocked reading it after we return.
        yield os.fdopen(private, "rb", closefd=False)
    finally:
        with contextlib.suppress(OSError):
            os.dup2(private, 0)


@contextlib.asynccontextmanager
async def checked_stdio_server(
    max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
) -> AsyncIterator[tuple[Any, Any]]:
    """`mcp.server.stdio.stdio_server()` with malformed requests, and lines over
    `max_message_bytes`, answered (see the module)."""
    with _wire_stdin() as wire:
        lines = _CheckedLines(wire, max_message_bytes)
        async with stdio_server(stdin=lines) as (read, write):  # type: ignore[arg-type]
            lines.reply_with(write)
            yield read, write
