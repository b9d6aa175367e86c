"""The `toolweave` command line (typer + rich)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import logging
import os
import re
import shlex
import signal
import sys
import threading
import time
import traceback
import urllib.parse
from collections.abc import Callable, Iterable, Iterator
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.syntax import Syntax

from .. import dialects
from ..chat import ChatMessage, ChatRequestParameters, SystemMessage, UserMessage
from ..errors import ToolArgumentsError, ToolweaveError
from ..execution import DefaultToolExecutor, ToolExecutionRequest
from ..providers.constrained import ConstrainedToolCalling
from ..service import ToolExecutionFinished, ToolService
from ..service.approvals import StandingDecision
from ..tools import Tool
from ._approve import ask_decisions
from ._load import CliError, load_tools
from ._models import open_model, pick_provider
from ._render import render_stream, result_display
from ._safe import TerminalStream, markup_safe, terminal_safe
from .web import add_web_command

__all__ = ["app", "main"]

app = typer.Typer(
    name="toolweave",
    help=(
        "Turn Python functions into LLM tools: print their schemas in any provider's "
        "dialect, call them, chat with a model that uses them, or serve them over MCP."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode="rich",
)
mcp_app = typer.Typer(help="Expose tools as an MCP server.", no_args_is_help=True)
app.add_typer(mcp_app, name="mcp")

if importlib.util.find_spec("dbos") is not None:  # durable conversations (extra `durable`)
    from .runs import runs_app

    app.add_typer(runs_app, name="runs")

# soft_wrap: text is never cut into 80-column lines when the output is a pipe or a file;
# emoji off: a model's or a server's `:name:` is shown as it is
out = Console(highlight=False, soft_wrap=True, emoji=False)
err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)


def _debug() -> bool:
    return bool(os.environ.get("TOOLWEAVE_DEBUG"))


def _human_type(self: Any, ctx: Any) -> str | None:
    """The help's type column: the metavar, nothing for flags, else click's own name
    (TEXT, INTEGER, [a|b]) rather than typer's Python types (`<bool>`, `<list[str]>`)."""
    if isinstance(self, typer.core.TyperArgument):
        return None  # its metavar is the name column already
    if self.metavar is not None:
        return str(self.metavar)
    if getattr(self, "is_flag", False) or getattr(self, "count", False):
        return None
    label = str(self.display_type(ctx)).removeprefix("<").removesuffix(">")
    label = label.removeprefix("list[").removesuffix("]")  # a repeatable option: its item
    return _TYPE_NAMES.get(label, label.upper())


_TYPE_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN"}


typer.core.TyperOption.display_type_rich = _human_type  # type: ignore[method-assign]
typer.core.TyperArgument.display_type_rich = _human_type  # type: ignore[method-assign]

E = TypeVar("E", bound=StrEnum)


def _choice(kind: type[E]) -> Callable[[str], E]:
    """Parse an option value into `kind`, with a plain message for a bad one (typer's own
    reads `Value error, 'x' is not one of ...`)."""

    def parse(value: str) -> E:
        try:
            return kind(value)
        except ValueError:
            allowed = ", ".join(member.value for member in kind)
            raise typer.BadParameter(f"{value!r} is not one of: {allowed}") from None

    return parse


TOOLS_HELP = (
    "Where the tools are: MODULE (a dotted module name or a .py file; every @tool in it) "
    "or MODULE:OBJECT (a tool, a list of tools, a function, or a class/instance with @tool "
    "methods)."
)


@contextlib.contextmanager
def _errors() -> Iterator[None]:
    """Report errors in one line and exit 1 (set TOOLWEAVE_DEBUG=1 for the traceback)."""
    try:
        yield
    except (typer.Exit, typer.Abort, KeyboardInterrupt, SystemExit):
        raise
    except Exception as e:
        if _debug():
            raise  # with the tool's own exception chained, when a tool failed
        message = (
            str(e) if isinstance(e, (CliError, ToolweaveError)) else f"{type(e).__name__}: {e}"
        )
        lines = [line.strip().removeprefix("- ") for line in message.splitlines() if line.strip()]
        one_line = "; ".join(lines).replace(":;", ":") if lines else type(e).__name__
        err.print(f"[bold red]error:[/] {markup_safe(one_line)}", soft_wrap=True)
        raise typer.Exit(1) from None


class Dialect(StrEnum):
    """Provider dialects of a tool declaration."""

    openai = "openai"
    openai_strict = "openai-strict"
    responses = "responses"
    anthropic = "anthropic"
    gemini = "gemini"


def declaration(tool: Tool, dialect: Dialect) -> dict[str, Any]:
    """`tool`'s declaration in `dialect`."""
    card = tool.card
    if dialect is Dialect.openai:
        return dialects.openai_tool(card)
    if dialect is Dialect.openai_strict:
        return dialects.openai_tool(card, strict=True)
    if dialect is Dialect.responses:
        return dialects.openai_responses_tool(card)
    if dialect is Dialect.anthropic:
        return dialects.anthropic_tool(card)
    return dialects.gemini_function_declaration(card)


def _print_json(value: Any) -> None:
    text = json.dumps(value, indent=2, ensure_ascii=False)
    if out.is_terminal:
        out.print(Syntax(text, "json", background_color="default"))
    else:
        sys.stdout.write(text + "\n")


@app.command()
def schema(
    tools: Annotated[str, typer.Argument(metavar="MODULE[:OBJECT]", help=TOOLS_HELP)],
    dialect: Annotated[
        Dialect,
        typer.Option(
            "--dialect",
            "-d",
            parser=_choice(Dialect),
            metavar="|".join(d.value for d in Dialect),
            help="Which provider's format.",
        ),
    ] = Dialect.openai,
) -> None:
    """Print the tools' declarations (a JSON list) in a provider's dialect."""
    with _errors():
        loaded = load_tools(tools)
        _print_json([declaration(t, dialect) for t in loaded])


@app.command()
def call(
    tools: Annotated[str, typer.Argument(metavar="MODULE[:OBJECT]", help=TOOLS_HELP)],
    tool_name: Annotated[str, typer.Argument(metavar="TOOL", help="The tool's name.")],
    arguments: Annotated[
        str, typer.Argument(metavar="JSON", help="The arguments, a JSON object.")
    ] = "{}",
) -> None:
    """Run one tool with JSON arguments and print its result."""
    with _errors():
        loaded = {t.card.name: t for t in load_tools(tools)}
        target = loaded.get(tool_name)
        if target is None:
            raise CliError(
                f"no tool named {tool_name!r} in {tools}; available: {', '.join(sorted(loaded))}"
            )
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError as e:
            raise CliError(f"invalid JSON arguments: {e}") from None
        if not isinstance(parsed, dict):
            raise CliError(f"the arguments must be a JSON object, got {type(parsed).__name__}")
        request = ToolExecutionRequest(name=tool_name, arguments=json.dumps(parsed))
        try:
            result = DefaultToolExecutor(target).execute_with_result(request)
        except ToolArgumentsError as e:
            raise CliError(_arguments_problem(target, e)) from e
        if isinstance(result.error, ToolArgumentsError):
            raise CliError(_arguments_problem(target, result.error)) from result.error
        if result.is_error:
            raise CliError(f"tool {tool_name!r} failed: {result.result_text()}") from result.error
        sys.stdout.write(result_display(result) + "\n")


def _type_name(spec: Any) -> str:
    if not isinstance(spec, dict):
        return "any"
    if spec.get("type"):
        return str(spec["type"])
    if "$ref" in spec:
        return str(spec["$ref"]).rsplit("/", 1)[-1]
    return "enum" if "enum" in spec else "any"


def _arguments_problem(tool: Tool, error: ToolArgumentsError) -> str:
    """Invalid arguments, said to the person at the shell (the model's version ends with
    instructions for the model)."""
    problems = []
    for item in error.errors:
        where = ".".join(str(p) for p in item.get("loc", ())) or "the arguments"
        what = str(item.get("msg", "invalid value")).removeprefix("Value error, ")
        if "input" in item and item.get("type") != "missing":
            what += f" (got {json.dumps(item['input'], ensure_ascii=False, default=repr)})"
        problems.append(f"{where}: {what}")
    detail = "; ".join(problems) or error.message
    schema = tool.card.input_params or {}
    required = set(schema.get("required") or ())
    params = [
        f"{name}: {_type_name(spec)}" + ("" if name in required else " (optional)")
        for name, spec in (schema.get("properties") or {}).items()
    ]
    return f"invalid arguments for {tool.card.name}: {detail}. Its parameters: " + (
        ", ".join(params) or "none"
    )


@app.command()
def chat(
    tools: Annotated[
        str | None, typer.Option("--tools", "-t", metavar="MODULE[:OBJECT]", help=TOOLS_HELP)
    ] = None,
    mcp: Annotated[
        list[str] | None,
        typer.Option(
            "--mcp",
            metavar="COMMAND_OR_URL",
            help="An MCP server whose tools the model may use (repeatable): the command line "
            "that starts it (stdio), or its http(s) URL (streamable HTTP; a URL ending in /sse: "
            "SSE). What it asks the user (elicitation) is asked in the terminal.",
        ),
    ] = None,
    provider: Annotated[
        str,
        typer.Option(
            "--provider",
            "-p",
            help="openai, openai-responses, azure, azure-responses (--model is the deployment, "
            "--base-url the endpoint), anthropic, gemini, bedrock, local (llama-server, built on "
            "first use), auto (a cloud provider whose API key is set, else local), or "
            "MODULE:OBJECT naming a ChatModel.",
        ),
    ] = "auto",
    model: Annotated[
        str | None, typer.Option("--model", "-m", help="Model name (provider default if unset).")
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option(
            "--base-url",
            help="Endpoint: an OpenAI-compatible server, or the Azure OpenAI resource.",
        ),
    ] = None,
    system: Annotated[str | None, typer.Option("--system", help="A system prompt.")] = None,
    message: Annotated[
        list[str] | None,
        typer.Option(
            "--message", "-M", help="Send this message instead of prompting (repeatable)."
        ),
    ] = None,
    temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
    max_rounds: Annotated[int, typer.Option(help="Tool rounds allowed per message.")] = 10,
) -> None:
    """Chat with a model that can call the tools; tool calls and results show as they happen.

    Interactive unless --message is given; an empty line, `exit` or Ctrl-D ends it. A tool
    that requires approval asks before it runs (y / always / n / never / edit its
    arguments). Tools come from --tools, --mcp servers, or both.
    """
    with _errors(), _terminal_log(), contextlib.ExitStack() as servers:
        _check_model_name(model)
        if not tools and not mcp:
            raise CliError("no tools: give --tools MODULE[:OBJECT] and/or --mcp COMMAND_OR_URL")
        loaded = load_tools(tools) if tools else []
        listings, samplers = _connect_mcp(mcp or [], servers)
        service = ToolService(max_tool_calling_round_trips=max_rounds).tools(*loaded, *listings)
        # unset unless given: an explicit None would override the model's own default (the
        # local model's greedy temperature=0)
        params = ChatRequestParameters(
            **({} if temperature is None else {"temperature": temperature})
        )
        history: list[ChatMessage] = [SystemMessage(system)] if system else []
        # "always" / "never" answers: they stand for the rest of the session, every turn
        standing: tuple[StandingDecision, ...] = ()
        with open_model(provider, model, console=err, base_url=base_url) as (chat_model, what):
            for sampler in samplers:
                sampler.model = chat_model
            names = ", ".join(c.name for c in service.tool_cards)
            err.print(f"[dim]{markup_safe(what)} · tools: {markup_safe(names)}[/]", soft_wrap=True)
            _report_probe(chat_model)
            inputs: Iterator[str] = iter(message) if message else _prompt()
            for text in inputs:
                if message:  # interactive input is already on screen
                    out.print(f"[bold blue]user>[/] {markup_safe(text)}")
                history.append(UserMessage(text))
                conversation: Any = history
                decisions: dict[str, Any] | None = None
                while True:
                    with _tool_warnings() as pending:
                        stream = service.chat_stream(
                            chat_model,
                            params,
                            conversation,
                            decisions=decisions,
                            # a paused state carries them itself
                            standing_decisions=None if decisions is not None else standing,
                        )
                        result = render_stream(_in_order(stream, pending), out)
                    if result is None or result.state is None:
                        break
                    # calls wait for approval (or a deferred result): ask, then go on
                    conversation = result.state
                    decisions = ask_decisions(result.pending, out)
                if result is not None:
                    history = list(result.messages)
                    standing = result.standing_decisions


class _SamplingInTerminal:
    """Answers one server's sampling requests with the chat's model (`model`, set once it
    is open), each after the user says yes in the terminal."""

    def __init__(self, server_name: str) -> None:
        self.server_name = server_name
        self.model: Any = None

    async def achat(self, request: Any) -> Any:
        from ..mcp import SamplingDeclined
        from ._elicit import ask_sampling

        if self.model is None:
            raise RuntimeError("the chat's model is not open yet")
        if not await asyncio.to_thread(ask_sampling, self.server_name, request, out):
            raise SamplingDeclined("the user declined to send the request to the model")
        return await self.model.achat(request)


def _connect_mcp(
    specs: list[str], stack: contextlib.ExitStack
) -> tuple[list[Any], list[_SamplingInTerminal]]:
    """Connect to each `--mcp` server (closed with `stack`); their tool listings, which keep
    the service in step with each server's tool list, and their sampling hooks. Elicitation
    and sampling are asked in the terminal."""
    if not specs:
        return [], []
    try:
        from ..mcp import SyncMcpClient
    except ImportError as e:
        raise CliError(str(e)) from None
    from ._elicit import ask_elicitation

    async def elicit(request: Any) -> Any:
        return await asyncio.to_thread(ask_elicitation, request, out)

    # a stdio server's stderr is shown too, but terminal-safe (it would write to it directly)
    errlog: Any = TerminalStream(err)

    taken: set[str] = set()
    listings: list[Any] = []
    samplers: list[_SamplingInTerminal] = []
    for spec in specs:
        config = _mcp_config(spec, taken)
        sampler = _SamplingInTerminal(config.server_name)
        client = stack.enter_context(
            SyncMcpClient(config, errlog=errlog, elicitation=elicit, sampling=sampler)  # type: ignore[arg-type]
        )
        listings.append(client.list_tools())
        samplers.append(sampler)
    return listings, samplers


def _mcp_config(spec: str, taken: set[str]) -> Any:
    """`--mcp` COMMAND_OR_URL as a server configuration, named after the command or host."""
    from ..mcp import McpServerConfig

    spec = spec.strip()
    if re.match(r"https?://", spec, re.IGNORECASE):
        url = urllib.parse.urlsplit(spec)
        name = url.hostname or "mcp"
        sse = url.path.rstrip("/").endswith("/sse")
        kind = "sse" if sse else "streamable-http"
        params: dict[str, Any] = {"url": spec}
    else:
        try:
            argv = shlex.split(spec)
        except ValueError as e:
            raise CliError(f"--mcp {spec!r}: {e}") from None
        if not argv:
            raise CliError("--mcp needs the command line that starts a server, or its URL")
        name = Path(argv[0]).stem or "mcp"
        kind, params = "stdio", {"command": argv[0], "args": argv[1:]}
    unique, n = name, 1
    while unique in taken:
        n += 1
        unique = f"{name}_{n}"
    taken.add(unique)
    return McpServerConfig(server_name=unique, client_type=kind, params=params)  # type: ignore[arg-type]


def _check_model_name(model: str | None) -> None:
    """`-m` is the model, `-M` the message: a model name has no spaces."""
    if model is not None and (" " in model.strip() or model.rstrip().endswith("?")):
        raise CliError(
            f"-m/--model takes a model name, got {model!r}; "
            "to send a message, use -M/--message (capital M)"
        )


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextlib.contextmanager
def _tool_warnings() -> Iterator[list[logging.LogRecord]]:
    """Hold toolweave's warnings (e.g. "tool 'x' failed") while a conversation streams: a
    tool runs before its `tool call` line is printed, so its warning would come first."""
    logger = logging.getLogger("toolweave")
    handler = _Collect()
    logger.addHandler(handler)
    propagate, logger.propagate = logger.propagate, False
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.propagate = propagate
        _flush(handler.records)


class _ToTerminal(logging.Handler):
    """Warnings and errors of any logger, printed terminal-safe (instead of Python's last
    resort handler, which writes a record's message as it is)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            _flush([record])
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def _terminal_log() -> Iterator[None]:
    """While a chat or the demo runs, log records (which may hold a server's text) reach
    the terminal terminal-safe."""
    handler = _ToTerminal()
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield
    finally:
        root.removeHandler(handler)


def _flush(pending: list[logging.LogRecord]) -> None:
    while pending:
        record = pending.pop(0)
        err.print(f"[yellow]warning:[/] {markup_safe(record.getMessage())}", soft_wrap=True)


def _in_order(events: Iterable[Any], pending: list[logging.LogRecord]) -> Iterator[Any]:
    """The events; after each has been printed, the warnings logged so far (so a failing
    tool's warning follows its `tool call` line), and with TOOLWEAVE_DEBUG the failing
    tool's own traceback."""
    for event in events:
        yield event  # printed by the consumer before it asks for the next one
        _flush(pending)
        if _debug() and isinstance(event, ToolExecutionFinished):
            error = event.execution.result.error
            if error is not None:
                text = "".join(traceback.format_exception(error))
                err.print(terminal_safe(text), markup=False, highlight=False, end="", style="dim")


def _report_probe(chat_model: Any) -> None:
    """For an OpenAI-compatible model in "auto" mode: probe it now and say what was found."""
    from ..providers import OpenAIChatModel, probe_capabilities

    if not isinstance(chat_model, OpenAIChatModel) or chat_model.tool_calling != "auto":
        return
    note = "probing the model's tool calling (a few short requests)…"
    if err.is_terminal:
        with err.status(f"[dim]{note}[/]"):
            caps = probe_capabilities(chat_model)
    else:
        err.print(f"[dim]{note}[/]")
        caps = probe_capabilities(chat_model)

    def yn(flag: bool) -> str:
        return "yes" if flag else "no"

    err.print(
        f"[dim]probe: native tool calls {yn(caps.native_tool_calls)}, tool_choice=required "
        f"{yn(caps.tool_choice_required)}, parallel {yn(caps.parallel_tool_calls)}, streamed "
        f"tool deltas {yn(caps.streaming_tool_calls)}, json_schema {yn(caps.json_schema)} "
        f"→ {caps.recommended_tool_calling} tool calling[/]"
    )


def _prompt() -> Iterator[str]:
    piped = not sys.stdin.isatty()
    while True:
        try:
            text = out.input("[bold blue]user>[/] ")
        except EOFError:
            out.print()
            return
        if piped:  # the line was not echoed: show it and end the prompt's line
            out.print(terminal_safe(text), markup=False, highlight=False)
        if text.strip() in ("", "exit", "quit"):
            return
        yield text


class Transport(StrEnum):
    """MCP transports."""

    stdio = "stdio"
    http = "http"
    sse = "sse"


@mcp_app.command("serve")
def mcp_serve(
    tools: Annotated[
        str | None, typer.Argument(metavar="[MODULE[:OBJECT]]", help=TOOLS_HELP)
    ] = None,
    transport: Annotated[
        Transport,
        typer.Option(
            help="stdio (for a client that starts this process), http (streamable "
            "HTTP at /mcp) or sse."
        ),
    ] = Transport.stdio,
    host: Annotated[str, typer.Option(help="HTTP bind address.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="HTTP port.")] = 8000,
    path: Annotated[str | None, typer.Option(help="HTTP path (/mcp or /sse by default).")] = None,
    name: Annotated[str, typer.Option(help="The server's name.")] = "toolweave",
    proxy: Annotated[
        list[str] | None,
        typer.Option(
            help="Serve another MCP server's tools, resources and prompts too (a gateway; "
            "repeatable): [NAME=]COMMAND or [NAME=]URL; its tools and prompts are named "
            "NAME_TOOL (NAME: the script's or host's name by default).",
        ),
    ] = None,
    log_requests: Annotated[
        bool,
        typer.Option(
            help="Log each request (method, name, client, ms, outcome) to stderr.",
            rich_help_panel="Middleware",
        ),
    ] = False,
    mask_errors: Annotated[
        bool,
        typer.Option(
            help="Send clients a reference instead of internal error text (logged).",
            rich_help_panel="Middleware",
        ),
    ] = False,
    rate_limit: Annotated[
        str | None,
        typer.Option(
            metavar="N/PERIOD",
            help="Tool calls allowed per client (its token's principal, else its session), "
            "e.g. 60/min.",
            rich_help_panel="Middleware",
        ),
    ] = None,
    cache_ttl: Annotated[
        float | None,
        typer.Option(
            help="Cache idempotent tools' results per client for this many seconds.",
            rich_help_panel="Middleware",
        ),
    ] = None,
    middleware: Annotated[
        list[str] | None,
        typer.Option(
            metavar="MODULE:OBJECT",
            help="Middleware of your own (or a list of them), innermost (repeatable).",
            rich_help_panel="Middleware",
        ),
    ] = None,
    max_message_bytes: Annotated[
        int,
        typer.Option(
            min=1,
            help="The longest request a client may send (a stdio line, an HTTP body); "
            "a longer one is refused unread.",
        ),
    ] = 4 * 1024 * 1024,
    auth: Annotated[
        str | None,
        typer.Option(
            help="HTTP only: require OAuth bearer tokens, verified as JWTs (jwt), by token "
            "introspection (introspection, secret in $TOOLWEAVE_AUTH_CLIENT_SECRET), or by "
            "an McpAuth object (MODULE:OBJECT).",
            rich_help_panel="Auth",
        ),
    ] = None,
    auth_resource: Annotated[
        str | None,
        typer.Option(
            help="This server's URL as clients reach it (tokens must be issued for it); "
            "http://HOST:PORT/PATH by default on loopback.",
            rich_help_panel="Auth",
        ),
    ] = None,
    auth_issuer: Annotated[
        str | None, typer.Option(help="The authorization server (iss).", rich_help_panel="Auth")
    ] = None,
    auth_audience: Annotated[
        str | None,
        typer.Option(
            help="The audience tokens must name (default: the resource).", rich_help_panel="Auth"
        ),
    ] = None,
    auth_jwks_url: Annotated[
        str | None,
        typer.Option(
            help="Where the signing keys are (JWKS; default: the issuer's metadata says).",
            rich_help_panel="Auth",
        ),
    ] = None,
    auth_key_file: Annotated[
        str | None,
        typer.Option(
            help="A static verification key: PEM, JWK or JWK Set.", rich_help_panel="Auth"
        ),
    ] = None,
    auth_introspection_url: Annotated[
        str | None, typer.Option(help="The RFC 7662 endpoint.", rich_help_panel="Auth")
    ] = None,
    auth_client_id: Annotated[
        str | None,
        typer.Option(help="The client id for introspection.", rich_help_panel="Auth"),
    ] = None,
    auth_scope: Annotated[
        list[str] | None,
        typer.Option(help="A scope every request needs (repeatable).", rich_help_panel="Auth"),
    ] = None,
    workers: Annotated[
        int,
        typer.Option(
            min=1,
            help="HTTP only: serve with this many worker processes (stateless; the request "
            "state is sealed with $TOOLWEAVE_MCP_STATE_KEYS, else a key made for this run).",
            rich_help_panel="Deployment",
        ),
    ] = 1,
    stateless: Annotated[
        bool,
        typer.Option(
            help="HTTP only: no sessions (always so with --workers above 1).",
            rich_help_panel="Deployment",
        ),
    ] = False,
    store: Annotated[
        str | None,
        typer.Option(
            metavar="sqlite:PATH",
            help="Where --rate-limit counts and --cache-ttl results are kept, shared by "
            "every worker (default: memory; with --workers, a SQLite file of this run).",
            rich_help_panel="Deployment",
        ),
    ] = None,
) -> None:
    """Serve the tools (and, with --proxy, other MCP servers') as an MCP server until stopped."""
    from ._serve_workers import ServeOptions, load_served, serve_workers

    with _errors():
        options = ServeOptions(
            tools=tools,
            transport=transport.value,
            host=host,
            port=port,
            path=path,
            name=name,
            proxy=list(proxy or []),
            log_requests=log_requests,
            mask_errors=mask_errors,
            rate_limit=rate_limit,
            cache_ttl=cache_ttl,
            middleware=list(middleware or []),
            max_message_bytes=max_message_bytes,
            store=store,
            stateless=stateless or workers > 1,
            auth=auth,
            auth_resource=auth_resource,
            auth_issuer=auth_issuer,
            auth_audience=auth_audience,
            auth_jwks_url=auth_jwks_url,
            auth_key_file=auth_key_file,
            auth_introspection_url=auth_introspection_url,
            auth_client_id=auth_client_id,
            auth_scope=list(auth_scope or []),
        )
        if options.stateless and transport is not Transport.http:
            raise CliError("--stateless and --workers are for --transport http")
        try:
            from ..mcp import serve_mcp
        except ImportError as e:
            raise CliError(str(e)) from None
        if transport is not Transport.stdio:
            shown = f"[{host}]" if ":" in host else host
            many = f", {workers} workers" if workers > 1 else ""
            err.print(
                f"[dim]MCP server {name!r} on http://{shown}:{port}{options.where} "
                f"({options.wire}{many})[/]"
            )
        if workers > 1:
            serve_workers(options, workers)
            return
        served = load_served(options)
        with contextlib.suppress(KeyboardInterrupt):
            serve_mcp(
                served.tools,
                options.wire,  # type: ignore[arg-type]
                host=host,
                port=port,
                path=path,
                name=name,
                features=served.features,
                max_message_bytes=max_message_bytes,
                proxy=served.proxy,
                middleware=served.middleware,
                auth=served.auth,
                stateless=options.stateless,
            )


@app.command()
def demo(
    provider: Annotated[
        str,
        typer.Option(
            "--provider",
            "-p",
            help="auto: a cloud provider whose API key is set (OPENAI_API_KEY, "
            "ANTHROPIC_API_KEY, GEMINI_API_KEY), else the local model.",
        ),
    ] = "auto",
    model: Annotated[str | None, typer.Option("--model", "-m", help="Model name.")] = None,
    question: Annotated[str | None, typer.Option(help="Ask something else.")] = None,
) -> None:
    """The weather example end to end: a real model calls get_weather and answers."""
    from ._demo import LOCAL_QUESTION, SEED_QUESTION, get_weather

    with _errors(), _terminal_log():
        _check_model_name(model)
        chosen = pick_provider(provider)
        ask = question or (LOCAL_QUESTION if chosen == "local" else SEED_QUESTION)
        service = ToolService(max_tool_calling_round_trips=4).tools(get_weather)
        params = ChatRequestParameters(temperature=0)
        # the weather question needs one tool round: then the small local model must answer
        one_round = {"constrained": ConstrainedToolCalling(max_tool_rounds=1)}
        with open_model(
            chosen, model, console=err, model_options=one_round if chosen == "local" else None
        ) as (chat_model, what):
            out.print(f"[dim]model: {markup_safe(what)}[/]", soft_wrap=True)
            _report_probe(chat_model)
            out.print("[dim]tool:[/] get_weather(city: str)")
            out.print(f"[bold blue]user>[/] {markup_safe(ask)}")
            started = time.monotonic()
            result = render_stream(service.chat_stream(chat_model, params, [UserMessage(ask)]), out)
            if result is None:
                raise CliError("the conversation ended without a result")
            usage = result.token_usage
            tokens = f", {usage.total_tokens} tokens" if usage and usage.total_tokens else ""
            out.print(
                f"[dim]{len(result.tool_executions)} tool call(s), "
                f"{len(result.messages)} messages, {time.monotonic() - started:.1f} s{tokens}[/]"
            )
            if not result.tool_executions:
                raise CliError("the model answered without calling get_weather")


add_web_command(app, errors=_errors, connect_mcp=_connect_mcp, tools_help=TOOLS_HELP)


def main() -> None:
    """The `toolweave` entry point."""
    # `kill` / `timeout` end the command like Ctrl-C does: exit handlers run, so a local
    # llama-server it started is stopped instead of left running
    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGTERM, _terminated)
    app()


def _terminated(signum: int, frame: Any) -> None:
    raise SystemExit(128 + signum)
