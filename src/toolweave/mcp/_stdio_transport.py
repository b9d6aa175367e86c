"""The stdio client transport: the SDK's `stdio_client`, with its reader made linear and
bounded.

The SDK's reader joins its buffer with every chunk read from the pipe (`(buffer +
chunk).split("\\n")`), so one long line costs time quadratic in its length: a 20 MB tool
result took 7 s to arrive, 50 MB a minute; and it buffers a line of any size. Here the
line's chunks are kept in a list and joined once, a line over `max_message_bytes` is
skipped (to its end) and reported as an error of that message alone, and a lone surrogate
escape (`"\\ud800"`, which the SDK's parser refuses) arrives as U+FFFD. Process start and
shutdown are the SDK's (its public helpers): a new process group, then close stdin, wait,
SIGTERM the group, SIGKILL. On Windows the SDK's own transport is used unchanged.
"""

from __future__ import annotations

import contextlib
import json
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any, TextIO

import anyio
import mcp_types
from anyio.abc import Process
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client
from mcp.os.posix.utilities import terminate_posix_process_tree
from mcp.shared.message import SessionMessage

from .._utils.unicode import has_surrogate_escape, scrub_surrogates

__all__ = ["MessageTooLargeError", "stdio_transport"]

log = logging.getLogger("toolweave.mcp")

GRACE_SECONDS = 2.0
"""How long the server has to exit by itself once its stdin is closed (the SDK's figure),
and again after SIGTERM before SIGKILL."""


class MessageTooLargeError(ValueError):
    """A line from the server longer than the transport accepts (it was skipped)."""


def _parse(line: bytes) -> SessionMessage | Exception:
    try:
        if has_surrogate_escape(text := line.decode("utf-8", "replace")):
            value = scrub_surrogates(json.loads(text))
            message = mcp_types.jsonrpc_message_adapter.validate_python(value, by_name=False)
        else:
            message = mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False)
    except (ValueError, RecursionError) as exc:
        return exc if isinstance(exc, ValueError) else ValueError("JSON nested too deeply")
    return SessionMessage(message)


async def _read_lines(
    process: Process,
    send: MemoryObjectSendStream[SessionMessage | Exception],
    max_message_bytes: int,
) -> None:
    assert process.stdout is not None
    pieces: list[bytes] = []  # the current line, joined once at its end
    size = 0
    skipping = False  # inside a line that was too long: drop bytes up to its end
    listening = True  # once the session is gone, only drain (a server blocked writing to a
    # full pipe would never see its stdin close and exit)

    async def deliver(item: SessionMessage | Exception) -> None:
        nonlocal listening
        try:
            await send.send(item)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError):
            listening = False

    def too_large() -> MessageTooLargeError:
        return MessageTooLargeError(
            f"a message over {max_message_bytes} bytes (McpServerConfig.max_message_bytes); "
            "it was dropped"
        )

    async with send:
        with contextlib.suppress(anyio.EndOfStream, anyio.ClosedResourceError, OSError):
            async for chunk in process.stdout:
                if not listening:
                    continue
                start = 0
                while (end := chunk.find(b"\n", start)) >= 0:
                    if skipping:
                        skipping = False
                    elif size + end - start > max_message_bytes:
                        await deliver(too_large())
                    else:
                        pieces.append(chunk[start:end])
                        line = b"".join(pieces)
                        if line.strip():
                            await deliver(_parse(line))
                    pieces.clear()
                    size = 0
                    start = end + 1
                if skipping or start == len(chunk):
                    continue
                size += len(chunk) - start
                if size > max_message_bytes:
                    pieces.clear()
                    size = 0
                    skipping = True
                    await deliver(too_large())
                else:
                    pieces.append(chunk[start:])


async def _write_lines(
    process: Process,
    receive: MemoryObjectReceiveStream[SessionMessage],
    read_side: MemoryObjectSendStream[SessionMessage | Exception],
) -> None:
    assert process.stdin is not None
    try:
        async with receive:
            async for item in receive:
                data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
                await process.stdin.send(data.encode("utf-8", "replace") + b"\n")
    except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
        # The server stopped reading: end the session rather than leave a request waiting.
        await read_side.aclose()


async def _exited(process: Process, seconds: float) -> bool:
    # Not process.wait(): it also waits for the pipes to close, which a grandchild that
    # inherited them can keep open after the server itself has exited.
    with anyio.move_on_after(seconds):
        while process.returncode is None:  # noqa: ASYNC110 - no event tells of the exit
            await anyio.sleep(0.01)
    return process.returncode is not None


async def _stop(process: Process) -> None:
    assert process.stdin is not None and process.stdout is not None
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdin.aclose()
    if not await _exited(process, GRACE_SECONDS):
        await terminate_posix_process_tree(process, GRACE_SECONDS)
        if not await _exited(process, GRACE_SECONDS):
            log.warning("MCP server process %d survived SIGKILL; abandoning it", process.pid)
    with contextlib.suppress(OSError, anyio.BrokenResourceError, anyio.ClosedResourceError):
        await process.stdout.aclose()


@contextlib.asynccontextmanager
async def stdio_transport(
    params: StdioServerParameters, errlog: TextIO, max_message_bytes: int
) -> AsyncIterator[tuple[Any, Any]]:
    """Start the server of `params` and yield its (read, write) message streams; the server
    is stopped on exit, also when the caller is cancelled."""
    if sys.platform == "win32":  # pragma: no cover - the SDK handles Windows' job objects
        async with stdio_client(params, errlog) as streams:
            yield streams
        return
    process = await anyio.open_process(
        [params.command, *params.args],
        env=get_default_environment() | (params.env or {}),
        stderr=errlog,
        cwd=params.cwd,
        start_new_session=True,
    )
    read_send, read_receive = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_send, write_receive = anyio.create_memory_object_stream[SessionMessage](0)
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read_lines, process, read_send, max_message_bytes)
        tg.start_soon(_write_lines, process, write_receive, read_send)
        try:
            yield read_receive, write_send
        finally:
            with anyio.CancelScope(shield=True):
                write_send.close()
                read_receive.close()
                await _stop(process)
            tg.cancel_scope.cancel()
