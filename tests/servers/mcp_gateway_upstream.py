"""An upstream MCP server for the gateway tests (the SDK's `MCPServer`): tools that report
progress and log, ask the client (elicitation, sampling), change the tool list, sleep until
cancelled, die; a resource, a resource template and a prompt.

Run: ``python mcp_gateway_upstream.py [stdio | streamable-http PORT]``. Environment:
``MCP_MARKER_DIR`` — where `slow` writes ``started-<tag>`` and ``cancelled-<tag>``.
"""

from __future__ import annotations

import hashlib
import os
import sys
import warnings
from pathlib import Path

import anyio
import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

warnings.simplefilter("ignore")  # logging and sampling are deprecated for 2026-07-28

server = MCPServer("upstream", log_level="WARNING")


def _marker(name: str) -> Path:
    return Path(os.environ.get("MCP_MARKER_DIR", ".")) / name


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool()
async def steps(n: int, ctx: Context) -> str:
    """Report `n` steps of progress, logging each."""
    for i in range(1, n + 1):
        await ctx.report_progress(i, n, f"step {i}")
        await ctx.log("info", f"upstream step {i}")
    return f"stepped {n}"


class Answer(BaseModel):
    text: str


@server.tool()
async def ask_user(question: str, ctx: Context) -> str:
    """Ask the user (form elicitation); answers ``action:text``."""
    result = await ctx.elicit(question, Answer)
    text = result.data.text if result.action == "accept" and result.data else ""
    return f"{result.action}:{text}"


@server.tool()
async def ask_model(prompt: str, ctx: Context) -> str:
    """Ask the client's model (sampling); answers its text."""
    result = await ctx.request_context.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=50,
        related_request_id=ctx.request_id,
    )
    content = result.content
    return f"model said: {getattr(content, 'text', '')}"


@server.tool()
async def roots_seen(ctx: Context) -> str:
    """The client's roots (their URIs, comma-separated)."""
    listed = await ctx.request_context.session.list_roots()
    return ",".join(str(r.uri) for r in listed.roots)


@server.tool()
async def ask_model_with_tools(prompt: str, ctx: Context) -> str:
    """Ask the client's model with a tool it may call; answers what it chose."""
    lookup = types.Tool(
        name="lookup",
        description="Look something up",
        input_schema={"type": "object", "properties": {"q": {"type": "string"}}},
    )
    result = await ctx.request_context.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
        max_tokens=50,
        tools=[lookup],
        related_request_id=ctx.request_id,
    )
    blocks = result.content if isinstance(result.content, list) else [result.content]
    uses = [f"{b.name}({b.input})" for b in blocks if isinstance(b, types.ToolUseContent)]
    return f"{result.stop_reason}: {', '.join(uses)}"


@server.tool()
async def slow(seconds: float, tag: str = "x") -> str:
    """Sleep, recording its start and a cancellation in marker files."""
    _marker(f"started-{tag}").write_text("started")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _marker(f"cancelled-{tag}").write_text("cancelled")
        raise
    return "done"


@server.tool()
async def die() -> str:
    """Kill the server process."""
    os._exit(3)


@server.tool()
def pid() -> int:
    """The server's process id."""
    return os.getpid()


@server.tool()
def auth_seen(ctx: Context) -> str:
    """A sha256 fingerprint (16 hex digits) of the Authorization header this request came
    with ("" without one)."""
    header = (ctx.headers or {}).get("authorization", "")
    return hashlib.sha256(header.encode()).hexdigest()[:16] if header else ""


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool `name` (answering "<name> ran"), then say the tool list changed."""

    def added() -> str:
        return f"{name} ran"

    server.add_tool(added, name=name, description=f"Added {name}")
    await ctx.request_context.session.send_tool_list_changed()
    return f"grew {name}"


@server.tool()
async def grow_extras(name: str, ctx: Context) -> str:
    """Add a resource ``memo://<name>`` and a prompt `name`, then say both lists changed."""

    def extra() -> str:
        return f"extra {name}"

    server.resource(f"memo://{name}", name=name, mime_type="text/plain")(extra)
    server.prompt(name=name)(extra)
    session = ctx.request_context.session
    await session.send_resource_list_changed()
    await session.send_prompt_list_changed()
    return f"grew extras {name}"


@server.resource("memo://readme", mime_type="text/plain")
def readme() -> str:
    """The upstream's readme."""
    return "upstream readme"


@server.resource("memo://notes/{name}", mime_type="text/plain")
def note(name: str) -> str:
    """One note."""
    return f"note {name}"


@server.prompt()
def review(code: str) -> str:
    """Ask for a review of `code`."""
    return f"Review this: {code}"


@server.completion()
async def complete(ref: object, argument: types.CompletionArgument, context: object) -> object:
    """The review prompt's code and the notes template's name complete from fixed lists."""
    if isinstance(ref, types.PromptReference) and ref.name == "review":
        options = ["print(1)", "pass"]
    elif isinstance(ref, types.ResourceTemplateReference):
        options = ["alpha", "beta"]
    else:
        options = []
    return types.Completion(values=[o for o in options if o.startswith(argument.value)])


SUBSCRIBED: set[str] = set()


async def _subscribe(ctx: object, params: types.SubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.add(str(params.uri))
    return types.EmptyResult()


async def _unsubscribe(ctx: object, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    SUBSCRIBED.discard(str(params.uri))
    return types.EmptyResult()


server._lowlevel_server.add_request_handler(
    "resources/subscribe", types.SubscribeRequestParams, _subscribe
)
server._lowlevel_server.add_request_handler(
    "resources/unsubscribe", types.UnsubscribeRequestParams, _unsubscribe
)


@server.tool()
async def touch(uri: str, ctx: Context) -> str:
    """Say `uri` changed, when a client subscribed to it."""
    if uri not in SUBSCRIBED:
        return f"nobody subscribed to {uri}"
    await ctx.request_context.session.send_resource_updated(uri)
    return f"touched {uri}"


if __name__ == "__main__":
    transport = sys.argv[1] if len(sys.argv) > 1 else "stdio"
    if transport == "stdio":
        server.run("stdio")
    else:
        server.run(transport, host="127.0.0.1", port=int(sys.argv[2]))  # type: ignore[call-overload]
