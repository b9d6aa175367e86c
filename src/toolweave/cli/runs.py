"""`toolweave runs list|show|cancel|resume|pending|approve|deny|standing|revoke`: operate
durable conversations.

`runs_app` is a `typer.Typer`; the main `toolweave` CLI mounts it as `runs` when DBOS is
installed, and `toolweave.durable` is imported only when one of these commands runs (DBOS
takes a third of a second to import). The database comes from `--db` or
`TOOLWEAVE_DURABLE_DB`; `--app` (or `TOOLWEAVE_DURABLE_APP`, default "toolweave") must match
the workers' app name.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated, Any

import typer

if TYPE_CHECKING:
    from ..durable.ops import ConversationClient, ConversationInfo

__all__ = ["runs_app"]

runs_app = typer.Typer(
    name="runs",
    help="List, inspect, cancel and resume durable conversations; decide waiting tool calls.",
    no_args_is_help=True,
)

Db = Annotated[
    str,
    typer.Option(
        "--db", envvar="TOOLWEAVE_DURABLE_DB", help="PostgreSQL URL of the DBOS database."
    ),
]
App = Annotated[
    str,
    typer.Option("--app", envvar="TOOLWEAVE_DURABLE_APP", help="The workers' DBOS app name."),
]
AsJson = Annotated[bool, typer.Option("--json", help="Print JSON instead of text.")]


@contextlib.contextmanager
def _client(db: str, app: str) -> Iterator[ConversationClient]:
    """A client, closed at the end; a database that cannot be used (unreachable, or not
    answering within the client's bounds) ends the command with exit status 2."""
    from ..durable.ops import ConversationClient
    from ..durable.service import DurableDatabaseError

    try:
        client = ConversationClient(db, app_name=app)
    except DurableDatabaseError as e:
        typer.echo(f"error: cannot open the database: {e.message}", err=True)
        raise typer.Exit(2) from e
    except Exception as e:
        typer.echo(f"error: cannot open the database: {e}", err=True)
        raise typer.Exit(2) from e
    try:
        with client:
            yield client
    except DurableDatabaseError as e:
        typer.echo(f"error: {e.message}", err=True)
        raise typer.Exit(2) from e


def _row(info: ConversationInfo) -> str:
    return (
        f"{info.conversation_id:<40} {info.status:<10} {info.service:<16} "
        f"{info.updated_at or '':<32} {info.executor_id or ''}"
    )


@runs_app.command("list")
def list_runs(
    db: Db,
    app: App = "toolweave",
    status: Annotated[
        list[str] | None, typer.Option("--status", help="Only these statuses (repeatable).")
    ] = None,
    service: Annotated[str | None, typer.Option("--service", help="Only this service.")] = None,
    limit: Annotated[int, typer.Option("--limit", min=1)] = 50,
    as_json: AsJson = False,
) -> None:
    """List conversations, newest first."""
    with _client(db, app) as client:
        found = client.list(status=status or None, service=service, limit=limit)
    if as_json:
        typer.echo(json.dumps([i.to_json() for i in found], indent=2))
        return
    typer.echo(f"{'CONVERSATION':<40} {'STATUS':<10} {'SERVICE':<16} {'UPDATED':<32} EXECUTOR")
    for info in found:
        typer.echo(_row(info))


def _show_text(info: ConversationInfo) -> None:
    typer.echo(f"conversation  {info.conversation_id}")
    typer.echo(f"service       {info.service}")
    typer.echo(f"status        {info.status}")
    typer.echo(f"created       {info.created_at}")
    typer.echo(f"updated       {info.updated_at}")
    typer.echo(f"executor      {info.executor_id}")
    if info.error:
        typer.echo(f"error         {info.error}")
    typer.echo(f"messages      {info.message_count}  tool results {info.tool_calls}")
    if info.unknown_outcomes:
        typer.echo(f"UNKNOWN OUTCOMES  {', '.join(info.unknown_outcomes)}")
    if info.final_text is not None:
        typer.echo(f"answer        {info.final_text}")
    for standing in info.standing_decisions:
        typer.echo(f"standing      {_standing_line(standing)}")
    for step in info.steps or ():
        child = f" -> {step.child_workflow_id}" if step.child_workflow_id else ""
        error = f"  ERROR {step.error}" if step.error else ""
        typer.echo(f"  step {step.step_id:>3} {step.name}{child}{error}")


@runs_app.command("show")
def show_run(
    conversation_id: Annotated[str, typer.Argument(help="The conversation (workflow) id.")],
    db: Db,
    app: App = "toolweave",
    as_json: AsJson = False,
) -> None:
    """Show one conversation: status, history so far, recorded steps."""
    with _client(db, app) as client:
        try:
            info = client.show(conversation_id)
        except KeyError as e:
            typer.echo(f"error: {e.args[0]}", err=True)
            raise typer.Exit(1) from e
    if as_json:
        typer.echo(json.dumps(info.to_json(), indent=2))
    else:
        _show_text(info)


def _control(conversation_id: str, db: str, app: str, action: str) -> None:
    with _client(db, app) as client:
        try:
            client.show(conversation_id, steps=False)
        except KeyError as e:
            typer.echo(f"error: {e.args[0]}", err=True)
            raise typer.Exit(1) from e
        operation: Any = client.cancel if action == "cancel" else client.resume
        operation(conversation_id)
        status = client.show(conversation_id, steps=False).status
    typer.echo(json.dumps({"conversation_id": conversation_id, "action": action, "status": status}))


@runs_app.command("cancel")
def cancel_run(
    conversation_id: Annotated[str, typer.Argument(help="The conversation (workflow) id.")],
    db: Db,
    app: App = "toolweave",
) -> None:
    """Cancel a conversation (a step already running finishes; nothing new starts)."""
    _control(conversation_id, db, app, "cancel")


@runs_app.command("resume")
def resume_run(
    conversation_id: Annotated[str, typer.Argument(help="The conversation (workflow) id.")],
    db: Db,
    app: App = "toolweave",
) -> None:
    """Resume a cancelled or failed conversation from its last recorded step."""
    _control(conversation_id, db, app, "resume")


@runs_app.command("pending")
def pending_calls(
    db: Db,
    app: App = "toolweave",
    conversation_id: Annotated[
        str | None, typer.Argument(help="Only this conversation (default: every one).")
    ] = None,
    as_json: AsJson = False,
) -> None:
    """List the tool calls waiting for a decision (approval, or a deferred result)."""
    with _client(db, app) as client:
        waiting = client.pending(conversation_id)
    if as_json:
        typer.echo(
            json.dumps(
                [{"conversation_id": cid, **call.model_dump()} for cid, call in waiting], indent=2
            )
        )
        return
    typer.echo(f"{'CONVERSATION':<40} {'CALL':<24} {'REASON':<9} TOOL(ARGUMENTS)")
    for cid, call in waiting:
        why = f"  {json.dumps(call.message)}" if call.message else ""  # escaped: from a tool
        typer.echo(
            f"{cid:<40} {call.id:<24} {call.reason:<9} {call.tool_name}({call.arguments}){why}"
        )


def _standing_line(standing: dict[str, Any]) -> str:
    what = "always approve" if standing.get("decision") == "approve" else "always deny"
    when = standing.get("when")
    limit = f" when {json.dumps(when, ensure_ascii=True)}" if when is not None else ""
    return f"{standing.get('id')}  {what} {standing.get('tool_name')}{limit}"


def _pattern(when: str | None) -> dict[str, Any] | None:
    """`--when` as an argument pattern (exit status 2 when it is not one)."""
    if when is None:
        return None
    from ..service.approvals import check_pattern

    try:
        return check_pattern(json.loads(when))
    except (TypeError, ValueError) as e:
        typer.echo(f"error: --when is not an argument pattern (a JSON object): {e}", err=True)
        raise typer.Exit(2) from e


Always = Annotated[
    bool,
    typer.Option(
        "--always",
        help="A standing decision: also for this tool's later calls in this conversation.",
    ),
]
When = Annotated[
    str | None,
    typer.Option(
        "--when",
        help="With --always: only for arguments matching this JSON pattern, e.g. "
        '\'{"amount": {"$max": 100}}\'.',
    ),
]


def _decide(
    db: str, app: str, conversation_id: str, call_id: str, decision: Any, command: str
) -> None:
    from ..durable.service import DurableDatabaseError
    from ..errors import ToolweaveError

    with _client(db, app) as client:
        try:
            recorded = client.decide(
                conversation_id, call_id, decision, decided_by=f"toolweave runs {command}"
            )
        except DurableDatabaseError:
            raise
        except ToolweaveError as e:
            typer.echo(f"error: {e.message}", err=True)
            raise typer.Exit(1) from e
    kind = type(decision).__name__.lower()
    out: dict[str, Any] = {"conversation_id": conversation_id, "call_id": call_id, "decision": kind}
    if not recorded:
        out["repeat"] = True  # decided so already: nothing new was sent
    typer.echo(json.dumps(out))


@runs_app.command("approve")
def approve_call(
    conversation_id: Annotated[str, typer.Argument(help="The conversation (workflow) id.")],
    call_id: Annotated[str, typer.Argument(help="The waiting tool call's id.")],
    db: Db,
    app: App = "toolweave",
    arguments: Annotated[
        str | None,
        typer.Option("--arguments", help="Run the call with these arguments instead (JSON)."),
    ] = None,
    always: Always = False,
    when: When = None,
) -> None:
    """Approve a waiting tool call: the conversation runs it and goes on.

    The first decision for a call wins: approving it again is a no-op, and a call already
    denied (or approved with other arguments) is refused with exit status 1. With
    --always, the tool's later calls in this conversation (those matching --when) run
    without asking (`runs standing`, `runs revoke`)."""
    from ..service.approvals import Approve

    if when is not None and not always:
        typer.echo("error: --when limits a standing decision: add --always", err=True)
        raise typer.Exit(2)
    if always and arguments is not None:
        typer.echo("error: a standing approval (--always) cannot edit the arguments", err=True)
        raise typer.Exit(2)

    if arguments is not None:
        try:
            value = json.loads(arguments)
        except ValueError as e:
            typer.echo(f"error: --arguments is not JSON: {e}", err=True)
            raise typer.Exit(2) from e
        if not isinstance(value, dict):
            typer.echo(
                f"error: --arguments must be a JSON object, not a {type(value).__name__}",
                err=True,
            )
            raise typer.Exit(2)
    decision = Approve(arguments, always=always, when=_pattern(when))
    _decide(db, app, conversation_id, call_id, decision, "approve")


@runs_app.command("deny")
def deny_call(
    conversation_id: Annotated[str, typer.Argument(help="The conversation (workflow) id.")],
    call_id: Annotated[str, typer.Argument(help="The waiting tool call's id.")],
    db: Db,
    app: App = "toolweave",
    message: Annotated[
        str | None, typer.Option("--message", help="What the model is told instead.")
    ] = None,
    always: Always = False,
    when: When = None,
) -> None:
    """Deny a waiting tool call: it does not run; the model is told why.

    The first decision for a call wins: denying it again (same message) is a no-op, and a
    call already approved is refused with exit status 1. With --always, the tool's later
    calls in this conversation (those matching --when) are denied without asking."""
    from ..service.approvals import Deny

    if when is not None and not always:
        typer.echo("error: --when limits a standing decision: add --always", err=True)
        raise typer.Exit(2)
    pattern = _pattern(when)
    decision = (
        Deny(message, always=always, when=pattern) if message else Deny(always=always, when=pattern)
    )
    _decide(db, app, conversation_id, call_id, decision, "deny")


@runs_app.command("standing")
def standing_decisions(
    conversation_id: Annotated[str, typer.Argument(help="The conversation (workflow) id.")],
    db: Db,
    app: App = "toolweave",
    as_json: AsJson = False,
) -> None:
    """List a conversation's standing decisions (approve/deny --always)."""
    with _client(db, app) as client:
        found = client.standing(conversation_id)
    if as_json:
        typer.echo(json.dumps([s.model_dump(mode="json") for s in found], indent=2))
        return
    for standing in found:
        typer.echo(_standing_line(standing.model_dump(mode="json")))


@runs_app.command("revoke")
def revoke_standing(
    conversation_id: Annotated[str, typer.Argument(help="The conversation (workflow) id.")],
    standing_id: Annotated[str, typer.Argument(help="The standing decision's id.")],
    db: Db,
    app: App = "toolweave",
) -> None:
    """Revoke a standing decision: the conversation drops it before it gates its next
    calls (a person is asked again)."""
    with _client(db, app) as client:
        try:
            revoked = client.revoke(conversation_id, standing_id)
        except KeyError as e:
            typer.echo(f"error: {e.args[0]}", err=True)
            raise typer.Exit(1) from e
    typer.echo(
        json.dumps({"conversation_id": conversation_id, "revoked": revoked.model_dump(mode="json")})
    )
