"""Multi-round-trip requests (MCP 2026-07-28, SEP-2322) for served tools and prompts.

On a 2026-07-28 connection a server may not send the client requests of its own while it
answers one; a tool's questions (`ToolContext.aelicit`, ``asample``, ``alist_roots``) travel
instead in an *input-required result*: ``{"resultType": "input_required", "inputRequests":
{key: request}, "requestState": ...}``. The client answers them and sends the same request
again with ``inputResponses`` (and the state echoed); the tool then **runs again from the
start**, and each question it asks that has an answer is answered at once. So on 2026-07-28 a
tool body may run more than once: do side effects after the questions.

The answers of earlier rounds ride the request state, which the SDK's
`RequestStateBoundary` seals (AES-256-GCM, bound to the method, the tool or prompt and its
arguments, with an expiry): a client can neither read nor alter it (a changed state is
refused with -32602). The key comes from ``TOOLWEAVE_MCP_STATE_KEYS`` (comma-separated
secrets of at least 32 bytes, the first one sealing: every worker of one deployment must
share them), else it is made per process. An answer is used only for the very question it
answered (a digest of the rendered request is kept with it), and a question whose answer
does not fit it (not an elicitation result, content outside the schema) is asked again.

A question needing a capability the client did not declare is refused with -32021
(`ToolNotSupportedError` carrying the capability, as on the older path).
"""

from __future__ import annotations

import base64
import contextvars
import hashlib
import json
import os
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any

import mcp_types
import pydantic
from mcp.server.request_state import RequestStateBoundary, RequestStateSecurity, compact_json
from mcp.shared.exceptions import MCPError
from mcp_types import MISSING_REQUIRED_CLIENT_CAPABILITY
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

from ..context import ElicitationResult, Root, current_input_key
from ..errors import ToolNotSupportedError

__all__ = ["InputRound", "current_round", "install_request_state", "with_input_rounds"]

STATE_KEYS_ENV = "TOOLWEAVE_MCP_STATE_KEYS"
_STATE_VERSION = 1
_REQUIRED_KEY = "required_capabilities"  # as `server._REQUIRED_KEY`: read by `call_tool`

_ROUND: contextvars.ContextVar[InputRound | None] = contextvars.ContextVar(
    "toolweave_input_round", default=None
)


class _InputRequired(Exception):
    """Raised at a question that has no answer yet: the tool stops, its questions go out."""


def current_round() -> InputRound | None:
    """The 2026-07-28 request round in force, when a served tool or prompt runs in one."""
    return _ROUND.get()


def _digest(request: Any) -> str:
    params = _dump(request.params)  # None for roots/list
    raw = hashlib.sha256(compact_json(params, sort_keys=True).encode()).digest()[:16]
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _dump(value: Any) -> Any:
    if isinstance(value, pydantic.BaseModel):
        return value.model_dump(mode="json", by_alias=True, exclude_none=True)
    return value


class InputRound:
    """One round of a 2026-07-28 request: the answers it came with (recorded in the request
    state by earlier rounds, or in ``inputResponses``) and the questions still open."""

    def __init__(self, session: Any, params: Any) -> None:
        self.session = session
        state = _read_state(getattr(params, "request_state", None))
        self.recorded: dict[str, dict[str, Any]] = state.get("answers", {})
        self.last_asked: dict[str, str] = state.get("asked", {})
        responses = getattr(params, "input_responses", None) or {}
        self.responses: dict[str, Any] = {k: _dump(v) for k, v in responses.items()}
        self.kept: dict[str, dict[str, Any]] = {}
        self.asked: dict[str, Any] = {}
        self._asked_digests: dict[str, str] = {}
        self._count = 0

    # the questions ----------------------------------------------------------------------
    async def elicit(self, message: str, schema: dict[str, Any]) -> ElicitationResult:
        """A form elicitation's answer, or the question added to this round's."""
        self._require(
            mcp_types.ClientCapabilities(elicitation=mcp_types.ElicitationCapability()),
            mcp_types.ClientCapabilities(
                elicitation=mcp_types.ElicitationCapability(
                    form=mcp_types.FormElicitationCapability()
                )
            ),
            "elicitation",
        )
        request = mcp_types.ElicitRequest(
            params=mcp_types.ElicitRequestFormParams(message=message, requested_schema=schema)
        )
        answer = self._ask(request, lambda raw: _elicit_answer(raw, schema))
        return ElicitationResult(
            action=answer.action,
            content=dict(answer.content) if answer.content is not None else None,
        )

    async def sample(self, params: mcp_types.CreateMessageRequestParams) -> str:
        """A sampling answer's text, or the question added to this round's."""
        self._require(
            mcp_types.ClientCapabilities(sampling=mcp_types.SamplingCapability()), None, "sampling"
        )
        request = mcp_types.CreateMessageRequest(params=params)
        answer = self._ask(request, mcp_types.CreateMessageResult.model_validate)
        blocks = answer.content if isinstance(answer.content, list) else [answer.content]
        return "".join(getattr(b, "text", "") for b in blocks)

    async def list_roots(self) -> list[Root]:
        """The client's roots, or the question added to this round's."""
        self._require(
            mcp_types.ClientCapabilities(roots=mcp_types.RootsCapability()), None, "roots"
        )
        answer = self._ask(mcp_types.ListRootsRequest(), mcp_types.ListRootsResult.model_validate)
        return [Root(uri=str(r.uri), name=r.name) for r in answer.roots]

    def _require(
        self,
        capability: mcp_types.ClientCapabilities,
        required: mcp_types.ClientCapabilities | None,
        what: str,
    ) -> None:
        if self.session.check_client_capability(capability):
            return
        needed = (required or capability).model_dump(by_alias=True, mode="json", exclude_none=True)
        raise ToolNotSupportedError(
            f"{what} is not available: the MCP client does not offer it",
            details={_REQUIRED_KEY: needed},
        )

    def _ask(self, request: Any, parse: Callable[[Any], Any]) -> Any:
        given = current_input_key()
        if given is None:
            self._count += 1
            key = f"input_{self._count}"
        else:
            key = given
        digest = _digest(request)
        if self._asked_digests.get(key, digest) != digest or (
            key in self.kept and self.kept[key]["q"] != digest
        ):
            raise ValueError(f"two different questions were asked under the key {key!r}")
        entry = self.recorded.get(key)
        if entry is not None and entry.get("q") == digest:
            answer = _parsed(parse, entry.get("r"))
            if answer is not None:
                self.kept[key] = entry
                return answer
        # An answer in inputResponses counts for the question asked last round under its key
        # (or for any, on a retry that carries no state: the client answers its own user).
        if key in self.responses and self.last_asked.get(key, digest) == digest:
            answer = _parsed(parse, self.responses[key])
            if answer is not None:
                self.kept[key] = {"q": digest, "r": self.responses[key]}
                return answer
        self.asked[key] = request
        self._asked_digests[key] = digest
        raise _InputRequired(key)

    # the answer ---------------------------------------------------------------------------
    def result(self) -> mcp_types.InputRequiredResult:
        """This round's questions, with the answers so far as the (to be sealed) state."""
        state = {"v": _STATE_VERSION, "answers": self.kept, "asked": self._asked_digests}
        return mcp_types.InputRequiredResult(
            input_requests=dict(self.asked), request_state=compact_json(state)
        )

    @contextmanager
    def active(self) -> Iterator[None]:
        """Make this the round the served tool's or prompt's questions go to."""
        token = _ROUND.set(self)
        try:
            yield
        finally:
            _ROUND.reset(token)


def _parsed(parse: Callable[[Any], Any], raw: Any) -> Any:
    try:
        return parse(raw)
    except (pydantic.ValidationError, ValueError, TypeError):
        return None


def _elicit_answer(raw: Any, schema: dict[str, Any]) -> mcp_types.ElicitResult:
    answer = mcp_types.ElicitResult.model_validate(raw)
    if answer.action == "accept":
        import jsonschema

        try:
            jsonschema.validate(dict(answer.content or {}), schema)
        except jsonschema.ValidationError as e:
            raise ValueError(f"the answer does not fit the form: {e.message}") from e
    return answer


def _read_state(state: str | None) -> dict[str, Any]:
    """The plaintext state (the boundary has verified and unsealed it); drift within one's
    own deployment (another version's state) counts as no answers yet."""
    if not state:
        return {}
    try:
        found = json.loads(state)
    except ValueError:
        return {}
    if not isinstance(found, dict) or found.get("v") != _STATE_VERSION:
        return {}
    answers, asked = found.get("answers"), found.get("asked")
    return {
        "answers": answers if isinstance(answers, dict) else {},
        "asked": asked if isinstance(asked, dict) else {},
    }


def _is_modern(ctx: Any) -> bool:
    return getattr(ctx.session, "protocol_version", None) in MODERN_PROTOCOL_VERSIONS


def with_input_rounds(
    handler: Callable[[Any, Any], Awaitable[Any]],
) -> Callable[[Any, Any], Awaitable[Any]]:
    """`handler` (``tools/call`` or ``prompts/get``) answering an input-required result on
    2026-07-28 connections when what it runs asked a question that has no answer yet."""

    async def handle(ctx: Any, params: Any) -> Any:
        if not _is_modern(ctx):
            return await handler(ctx, params)
        round_ = InputRound(ctx.session, params)
        with round_.active():
            try:
                result = await handler(ctx, params)
            except _InputRequired:
                result = None
            except MCPError as e:
                # A question the client cannot answer refuses the request, asked ones or not.
                if not round_.asked or e.error.code == MISSING_REQUIRED_CLIENT_CAPABILITY:
                    raise
                result = None  # wrapped (a prompt's failure): the questions answer it
            except Exception:
                if not round_.asked:
                    raise
                result = None
        # Asked questions win over the result: the tool may have caught the stop.
        return round_.result() if round_.asked else result

    return handle


def state_security(keys: str | None = None) -> RequestStateSecurity:
    """The request-state policy: the keys in ``TOOLWEAVE_MCP_STATE_KEYS`` (or `keys`),
    comma-separated, the first sealing; else a key of this process only."""
    found = keys if keys is not None else os.environ.get(STATE_KEYS_ENV)
    ring = [k.strip() for k in (found or "").split(",") if k.strip()]
    return RequestStateSecurity(keys=ring) if ring else RequestStateSecurity.ephemeral()


def install_request_state(server: Any, name: str) -> None:
    """Seal and verify ``requestState`` at `server`'s boundary (the SDK's middleware)."""
    server.middleware.append(RequestStateBoundary(state_security(), default_audience=name))
