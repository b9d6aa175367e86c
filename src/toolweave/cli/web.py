"""`toolweave web`: the browser UI (toolweave.ui), served on loopback behind an access token."""

import contextlib
import ipaddress
import os
import secrets
import socket
import webbrowser
from collections.abc import Callable
from typing import Annotated, Any

import typer
from rich.console import Console

from ..chat import ChatRequestParameters
from ..service import ToolService
from ._load import CliError, load_tools
from ._models import open_model
from ._safe import markup_safe

__all__ = ["add_web_command", "is_loopback"]


def is_loopback(host: str) -> bool:
    """Whether binding to `host` keeps the server reachable from this machine only."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def add_web_command(
    app: typer.Typer,
    *,
    errors: Callable[[], contextlib.AbstractContextManager[None]],
    connect_mcp: Callable[[list[str], contextlib.ExitStack], tuple[list[Any], list[Any]]],
    tools_help: str,
) -> None:
    """Register `web` on `app`, with the CLI's error reporting and `--mcp` connection (passed
    in, so this module does not import the one that registers it)."""
    err = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)

    @app.command()
    def web(
        tools: Annotated[
            str | None, typer.Option("--tools", "-t", metavar="MODULE[:OBJECT]", help=tools_help)
        ] = None,
        mcp: Annotated[
            list[str] | None,
            typer.Option(
                "--mcp",
                metavar="COMMAND_OR_URL",
                help="An MCP server whose tools the model may use (repeatable), as for chat.",
            ),
        ] = None,
        provider: Annotated[
            str,
            typer.Option(
                "--provider", "-p", help="As for chat: a provider, local, auto or MODULE:OBJECT."
            ),
        ] = "auto",
        model: Annotated[str | None, typer.Option("--model", "-m", help="Model name.")] = None,
        base_url: Annotated[str | None, typer.Option("--base-url", help="As for chat.")] = None,
        system: Annotated[str | None, typer.Option("--system", help="A system prompt.")] = None,
        temperature: Annotated[float | None, typer.Option(help="Sampling temperature.")] = None,
        max_rounds: Annotated[int, typer.Option(help="Tool rounds allowed per message.")] = 10,
        host: Annotated[
            str, typer.Option(help="Interface to bind: loopback unless --allow-remote.")
        ] = "127.0.0.1",
        port: Annotated[int, typer.Option(help="Port (0: any free port).")] = 8765,
        allow_remote: Annotated[
            bool,
            typer.Option(
                "--allow-remote",
                help="Allow a --host beyond loopback: anyone who can reach it and has the "
                "token can run the tools.",
            ),
        ] = False,
        allowed_host: Annotated[
            list[str] | None,
            typer.Option(
                "--allowed-host", help="A further host name the browser may use (repeatable)."
            ),
        ] = None,
        token: Annotated[
            str | None,
            typer.Option(
                envvar="TOOLWEAVE_WEB_TOKEN",
                help="The access token (at least 16 characters; random by default).",
            ),
        ] = None,
        open_browser: Annotated[
            bool, typer.Option("--open/--no-open", help="Open the page in a browser.")
        ] = False,
        durable_db: Annotated[
            str | None,
            typer.Option(
                "--durable-db",
                envvar="TOOLWEAVE_DURABLE_DB",
                help="PostgreSQL URL of the DBOS database of durable conversations: the page "
                "lists their calls waiting for a decision, to approve or deny (as `toolweave "
                "runs pending`).",
            ),
        ] = None,
        durable_app: Annotated[
            str,
            typer.Option(
                "--durable-app", envvar="TOOLWEAVE_DURABLE_APP", help="The workers' DBOS app name."
            ),
        ] = "toolweave",
    ) -> None:
        """Chat with a model in the browser: tool calls as cards, approval buttons, and a form
        to call each tool by hand. Binds 127.0.0.1; every request needs the printed token."""
        with errors(), contextlib.ExitStack() as servers:
            if not is_loopback(host) and not allow_remote:
                raise CliError(
                    f"--host {host} is reachable beyond this machine, and the page runs tools: "
                    "add --allow-remote to bind it anyway"
                )
            secret = token or secrets.token_urlsafe(24)
            if len(secret) < 16:
                raise CliError("--token needs at least 16 characters")
            try:
                from starlette.middleware import Middleware

                from ..ui import LocalGuard, create_app
            except ImportError as e:
                raise CliError(str(e)) from None
            import uvicorn

            durable = _durable_client(durable_db, durable_app, servers) if durable_db else None
            loaded = load_tools(tools) if tools else []
            listings, samplers = connect_mcp(mcp or [], servers)
            service = ToolService(max_tool_calling_round_trips=max_rounds).tools(*loaded, *listings)
            # unset unless given: an explicit None would override the model's own default
            # (the local model's greedy temperature=0)
            params = ChatRequestParameters(
                **({} if temperature is None else {"temperature": temperature})
            )
            family = socket.AF_INET6 if ":" in host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                sock.bind((host.strip("[]"), port))
            except OSError as e:
                raise CliError(f"cannot listen on {host}:{port}: {e.strerror}") from None
            servers.callback(sock.close)
            sock.listen(128)  # connections wait in the backlog until uvicorn accepts them
            bound = sock.getsockname()[1]
            with open_model(provider, model, console=err, base_url=base_url) as (chat_model, what):
                for sampler in samplers:
                    sampler.model = chat_model
                guard = Middleware(
                    LocalGuard,
                    token=secret,
                    allowed_hosts=allowed_host or (),
                    allow_remote=allow_remote,
                    cookie_name=f"toolweave_token_{bound}",
                )
                asgi = create_app(
                    service,
                    chat_model,
                    parameters=params,
                    system=system,
                    web=True,
                    middleware=[guard],
                    description=what,
                    durable=durable,
                )
                shown = f"[{host}]" if ":" in host else host
                url = f"http://{shown}:{bound}/?token={secret}"
                scope = (
                    "loopback only: this machine"
                    if is_loopback(host)
                    else "beyond loopback (--allow-remote)"
                )
                names = ", ".join(c.name for c in service.tool_cards) or "none"
                err.print(f"[dim]{markup_safe(what)} · tools: {markup_safe(names)}[/]")
                if durable is not None:
                    err.print(
                        f"[dim]durable conversations of app {markup_safe(durable_app)}: "
                        "their pending approvals are in the page[/]"
                    )
                err.print(f"[dim]{scope}; every request needs the token of this URL[/]")
                err.print(f"toolweave web on {markup_safe(url)} (Ctrl-C stops it)")
                if open_browser and not os.environ.get("CI"):
                    webbrowser.open(url)
                config = uvicorn.Config(asgi, log_level="warning", lifespan="off", access_log=False)
                uvicorn.Server(config).run(sockets=[sock])

    del web


def _durable_client(db: str, app: str, stack: contextlib.ExitStack) -> Any:
    """A `ConversationClient` on `db`, closed with `stack`; a database that cannot be
    opened is a `CliError`."""
    try:
        from ..durable.ops import ConversationClient
        from ..durable.service import DurableDatabaseError
    except ImportError as e:
        raise CliError(f"--durable-db needs the durable extra (dbos): {e}") from None
    try:
        client = ConversationClient(db, app_name=app)
    except DurableDatabaseError as e:
        raise CliError(f"cannot open the durable database: {e.message}") from None
    except Exception as e:
        raise CliError(f"cannot open the durable database: {e}") from None
    stack.callback(client.close)
    return client
