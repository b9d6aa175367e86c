"""The ASGI app (Starlette) serving a `ToolService` with a model on both protocols, and
the `toolweave web` page."""

from __future__ import annotations

import contextlib
import json
import secrets
import threading
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from ag_ui.encoder import EventEncoder
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from ..chat import AiMessage, ChatModel, ChatRequestParameters, SystemMessage, UserMessage
from ..chat.scripted import ScriptedChatModel
from ..errors import ToolweaveError
from ..execution import ToolExecutionRequest, ToolExecutionResult
from ..service import Approve, ChatStatus, Deny, InvalidConversationStateError, ToolService
from ._ag_ui import ag_ui_events, ag_ui_request
from ._ai_sdk import AI_SDK_HEADERS, _jsonable, ai_sdk_chunks, ai_sdk_request, ai_sdk_sse
from ._common import ChatInput, ProtocolRequestError, media

if TYPE_CHECKING:
    from ..durable.ops import ConversationClient

__all__ = ["call_tool", "create_app", "tool_listing"]

STATIC = Path(__file__).resolve().parent / "static"
_R = TypeVar("_R")


def tool_listing(service: ToolService) -> list[dict[str, Any]]:
    """Every tool of `service`: name, description, JSON schema of its arguments, and
    whether it asks for approval (`"always"`, `"sometimes"` (a policy) or `"never"`)."""
    tools = []
    for card in service.tool_cards:
        policy = card.requires_approval
        approval = "sometimes" if callable(policy) else "always" if policy else "never"
        tools.append(
            {
                "name": card.name,
                "description": card.description,
                "parameters": card.input_params,
                "approval": approval,
            }
        )
    return tools


async def call_tool(
    service: ToolService, name: str, arguments: dict[str, Any]
) -> ToolExecutionResult:
    """Run one tool of `service` by hand, as the model's call would run (validation, error
    handlers, limits, MCP and HTTP tools alike). The person calling it decides, so a tool
    that requires approval runs; a deferred tool is a `ToolweaveError`."""
    request = ToolExecutionRequest(id="by_hand", name=name, arguments=json.dumps(arguments))
    script = ScriptedChatModel([AiMessage(tool_execution_requests=[request]), AiMessage("")])
    result = await service.achat(script, None, [UserMessage(f"(calling {name} by hand)")])
    if result.status is ChatStatus.PENDING and result.state is not None:
        if any(c.reason == "deferred" for c in result.pending):
            raise ToolweaveError(f"{name!r} is a deferred tool: its caller answers it")
        decisions: dict[str, Any] = {c.id: Approve() for c in result.pending}
        result = await service.achat(script, None, result.state, decisions=decisions)
    return result.tool_executions[-1].result


def _result_json(result: ToolExecutionResult) -> dict[str, Any]:
    return {
        "text": result.result_text(),
        "isError": result.is_error,
        "structured": _jsonable(result.structured),
        "media": media(result),
    }


def create_app(
    service: ToolService,
    model: ChatModel,
    *,
    parameters: ChatRequestParameters | None = None,
    key: str | bytes | None = None,
    system: str | None = None,
    output_type: Any = None,
    eager: bool = False,
    web: bool = False,
    middleware: Sequence[Any] = (),
    description: str | None = None,
    durable: ConversationClient | None = None,
) -> Starlette:
    """An ASGI app answering chat requests with `service` and `model`.

    Routes: `POST /api/chat` (the AI SDK UI message stream, what `useChat` posts to) and
    `POST /api/ag-ui` (AG-UI, what `HttpAgent` posts to). `key` signs the paused
    conversations the streams carry to the client (a fresh random key by default, valid
    as long as the app lives: give your own to resume across processes). `system` is put
    first in a conversation that has no system message. With `web=True` the app also
    serves the `toolweave web` page (`/`) and its tool API (`GET /api/tools`,
    `POST /api/tools/{name}`, which runs a tool by hand) and, given a `durable` client, the
    calls waiting for a decision in its durable conversations (`GET /api/durable/pending`,
    `POST /api/durable/decide`: approve or deny one, through `ConversationClient.decide`).
    `middleware` wraps the app (Starlette `Middleware` entries)."""
    signing_key = key if key is not None else secrets.token_bytes(32)

    def prepare(chat_input: ChatInput) -> Any:
        conversation = chat_input.conversation
        if not isinstance(conversation, list) or system is None:
            return conversation
        if conversation and isinstance(conversation[0], SystemMessage):
            return conversation
        return [SystemMessage(system), *conversation]

    def stream(chat_input: ChatInput) -> AsyncGenerator[Any]:
        # achat_stream is an async generator (typed as an iterator): aclosing() closes it
        return service.achat_stream(  # type: ignore[return-value]
            model,
            parameters,
            prepare(chat_input),
            decisions=chat_input.decisions or None,
            standing_decisions=chat_input.standing or None,
            output_type=output_type,
            eager=eager,
        )

    async def body_of(request: Request) -> Any:
        try:
            return json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError) as e:
            raise ProtocolRequestError(f"the body is not JSON: {e}") from None

    def refused(error: Exception) -> Response:
        return JSONResponse({"error": str(error)}, status_code=400)

    async def ai_sdk(request: Request) -> Response:
        try:
            chat_input = ai_sdk_request(await body_of(request), key=signing_key)
        except (ProtocolRequestError, InvalidConversationStateError) as e:
            return refused(e)

        async def body() -> AsyncIterator[str]:
            async with contextlib.aclosing(stream(chat_input)) as events:
                chunks = ai_sdk_chunks(events, key=signing_key, chat_input=chat_input)
                async for text in ai_sdk_sse(chunks):
                    yield text

        return StreamingResponse(body(), headers=AI_SDK_HEADERS)

    async def ag_ui(request: Request) -> Response:
        try:
            run, chat_input = ag_ui_request(await body_of(request), key=signing_key)
        except (ProtocolRequestError, InvalidConversationStateError) as e:
            return refused(e)
        encoder = EventEncoder(accept=request.headers.get("accept") or "")

        async def body() -> AsyncIterator[str]:
            async with contextlib.aclosing(stream(chat_input)) as events:
                async for event in ag_ui_events(
                    events, run, key=signing_key, chat_input=chat_input
                ):
                    yield encoder.encode(event)

        headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
        return StreamingResponse(body(), media_type=encoder.get_content_type(), headers=headers)

    routes: list[Any] = [
        Route("/api/chat", ai_sdk, methods=["POST"]),
        Route("/api/ag-ui", ag_ui, methods=["POST"]),
    ]
    if web:

        async def index(request: Request) -> Response:
            return FileResponse(STATIC / "index.html", headers={"cache-control": "no-store"})

        async def info(request: Request) -> Response:
            return JSONResponse(
                {"model": description or type(model).__name__, "durable": durable is not None}
            )

        async def tools(request: Request) -> Response:
            return JSONResponse(tool_listing(service))

        async def call(request: Request) -> Response:
            name = request.path_params["name"]
            if name not in service:
                return JSONResponse({"error": f"no tool named {name!r}"}, status_code=404)
            try:
                arguments = await body_of(request)
            except ProtocolRequestError as e:
                return refused(e)
            if not isinstance(arguments, dict):
                return refused(ProtocolRequestError("the arguments must be a JSON object"))
            try:
                result = await call_tool(service, name, arguments)
            except ToolweaveError as e:
                return refused(e)
            return JSONResponse(_result_json(result))

        routes += [
            Route("/", index, methods=["GET"]),
            Route("/api/info", info, methods=["GET"]),
            Route("/api/tools", tools, methods=["GET"]),
            Route("/api/tools/{name:str}", call, methods=["POST"]),
            *_durable_routes(durable, body_of),
            Mount("/static", StaticFiles(directory=STATIC), name="static"),
        ]
    return Starlette(routes=routes, middleware=list(middleware))


def _durable_routes(client: ConversationClient | None, body_of: Callable[..., Any]) -> list[Route]:
    """The pending approvals of durable conversations, for the page: listed, and decided."""
    # the client is synchronous (each database operation bounded): its calls run in a
    # worker thread, one at a time
    lock = threading.Lock()

    async def run(operation: Callable[..., _R], *args: Any, **kwargs: Any) -> _R:
        def locked() -> _R:
            with lock:
                return operation(*args, **kwargs)

        return await run_in_threadpool(locked)

    def unavailable(error: ToolweaveError) -> Response:
        # DurableDatabaseError: the database cannot be used now
        return JSONResponse({"error": error.message}, status_code=503)

    async def pending(request: Request) -> Response:
        if client is None:
            return JSONResponse({"enabled": False, "calls": []})
        from ..durable.service import DurableDatabaseError

        try:
            waiting = await run(client.pending)
        except DurableDatabaseError as e:
            return unavailable(e)
        calls = [{"conversation_id": cid, **call.model_dump(mode="json")} for cid, call in waiting]
        return JSONResponse({"enabled": True, "calls": calls})

    async def decide(request: Request) -> Response:
        if client is None:
            error = "no durable conversations here: start toolweave web with --durable-db"
            return JSONResponse({"error": error}, status_code=404)
        from ..durable.service import DurableDatabaseError

        try:
            body = await body_of(request)
        except ProtocolRequestError as e:
            return JSONResponse({"error": str(e)}, status_code=400)
        if not isinstance(body, dict):
            return JSONResponse({"error": "the body must be a JSON object"}, status_code=400)
        cid, call_id, kind = body.get("conversation_id"), body.get("call_id"), body.get("decision")
        reason = body.get("reason")
        if not (isinstance(cid, str) and isinstance(call_id, str)) or kind not in (
            "approve",
            "deny",
        ):
            error = 'needs "conversation_id", "call_id" and "decision" ("approve" or "deny")'
            return JSONResponse({"error": error}, status_code=400)
        decision: Approve | Deny = (
            Approve() if kind == "approve" else Deny(reason) if reason else Deny()
        )
        try:
            recorded = await run(client.decide, cid, call_id, decision, decided_by="toolweave web")
        except DurableDatabaseError as e:
            return unavailable(e)
        except ToolweaveError as e:
            # not waiting, decided otherwise already (DecisionConflictError), or not fitting
            return JSONResponse({"error": e.message}, status_code=409)
        return JSONResponse({"recorded": recorded})

    return [
        Route("/api/durable/pending", pending, methods=["GET"]),
        Route("/api/durable/decide", decide, methods=["POST"]),
    ]
