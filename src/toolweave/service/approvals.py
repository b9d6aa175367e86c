"""Human approval and deferred tool calls: what a paused conversation holds, and the
decisions that resume it (docs/approvals.md).

A call pauses the loop when its tool requires approval (`requires_approval` on the card,
the registration or an MCP server) or is deferred (its result comes from the caller). The
other calls of the round run as usual; then the loop stops with a `ToolChatResult` whose
`status` is `PENDING`, whose `pending` lists the calls waiting, and whose `state` is a
`ConversationState`: JSON-serialisable, resumed later (in another process too) by passing
it as the conversation with `decisions={call_id: Approve() | Deny(...) | DeferredResult(...)}`.
"""

from __future__ import annotations

import fnmatch
import hashlib
import hmac
import json
import math
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, field_validator, model_validator

from .._utils.jsondepth import nested_deeper_than
from ..chat.messages import AiMessage, ChatMessage, ToolExecutionResultMessage
from ..errors import ToolweaveError
from ..execution.requests import ToolExecutionRequest
from ..schema.arguments import parse_arguments
from ..tools.approval import ApprovalPolicy

__all__ = [
    "ApprovalPolicy",
    "ApprovalRequired",
    "Approve",
    "ArgumentPattern",
    "CallAlreadyDecidedError",
    "ChatStatus",
    "ConversationState",
    "Decision",
    "DeferredResult",
    "Deny",
    "InvalidConversationStateError",
    "InvalidStandingDecisionsError",
    "PendingCall",
    "StandingDecision",
    "matches_pattern",
    "sign_standing",
    "verify_standing",
]


STATE_VERSION = 1


class ChatStatus(StrEnum):
    """Whether the loop reached an answer or stopped for calls that wait."""

    COMPLETED = "completed"
    PENDING = "pending"
    """Some calls wait for approval or for a deferred result (`ToolChatResult.pending`)."""


class PendingCall(BaseModel):
    """A call waiting: `reason` is `"approval"` or `"deferred"`. A call whose tool paused
    itself (`NeedsApproval`, `CallDeferred`) has `raised` set, the tool's `message` and
    `metadata`, and runs again when approved (or answered); `ask` counts its pauses."""

    model_config = ConfigDict(frozen=True)

    id: str
    tool_name: str
    arguments: str
    reason: Literal["approval", "deferred"]
    raised: bool = False
    """The tool raised the pause itself (it runs again, seeing the decision)."""
    message: str | None = None
    """Why the tool paused (`NeedsApproval(reason)`), if it said."""
    metadata: dict[str, Any] | None = None
    """What the tool attached to its pause (JSON data)."""
    ask: int = Field(default=0, ge=0)
    """How many times this call paused before (its run after a decision paused again)."""

    @property
    def request(self) -> ToolExecutionRequest:
        """The call as the model made it."""
        return ToolExecutionRequest(id=self.id, name=self.tool_name, arguments=self.arguments)

    def arguments_as_dict(self) -> dict[str, Any]:
        """The arguments parsed (repaired like any arguments; `{}` when they cannot be)."""
        try:
            value = parse_arguments(self.arguments, tool_name=self.tool_name)
        except ToolweaveError:
            return {}
        return value if isinstance(value, dict) else {}


class InvalidConversationStateError(ToolweaveError, ValueError):
    """A `ConversationState` that does not match its own history (stale or tampered), or a
    decision for a call that is not pending."""


class InvalidStandingDecisionsError(InvalidConversationStateError):
    """Signed standing decisions (`sign_standing`) that were changed, signed with another
    key, not signed, or signed for another conversation (memory id)."""


class CallAlreadyDecidedError(InvalidConversationStateError):
    """A decision for a call of a pause that was decided before, through this state or any
    other derived from the same pause (in this process, or, for a `DurableToolService`, in
    any process sharing its database). An approved call runs at most once, and a decided call
    is never decided differently later: a call approved once cannot be approved again nor
    denied, and a denied (answered) call cannot be approved; a denied call may be denied
    again, and a deferred call answered again (nothing runs). Raised before anything of the
    resume runs.

    `call_id` names the call, `decided` what it got first (`"approve"`, `"deny"` or
    `"result"`), `attempted` what this resume asked, `pause_id` the pause; `decided_at` and
    `decided_by` (when known: a durable claim records them) say when and by which worker."""

    def __init__(
        self,
        message: str,
        *,
        call_id: str,
        tool_name: str,
        decided: str,
        attempted: str,
        pause_id: str,
        decided_at: str | None = None,
        decided_by: str | None = None,
    ) -> None:
        super().__init__(
            message,
            details={
                "call_id": call_id,
                "tool_name": tool_name,
                "decided": decided,
                "attempted": attempted,
                "pause_id": pause_id,
                "decided_at": decided_at,
                "decided_by": decided_by,
            },
        )
        self.call_id = call_id
        self.tool_name = tool_name
        self.decided = decided
        self.attempted = attempted
        self.pause_id = pause_id
        self.decided_at = decided_at
        self.decided_by = decided_by

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild_decided, (self.message, self.details))


def _rebuild_decided(message: str, details: dict[str, Any]) -> CallAlreadyDecidedError:
    return CallAlreadyDecidedError(message, **details)


def claim_key(call: PendingCall) -> str:
    """The key a decision for `call` is claimed by within its pause: its id, and for a call
    that paused again after a decision, the number of that pause (each gets one decision)."""
    return call.id if call.ask == 0 else f"{call.id}\0{call.ask}"


_DECISION_WORDS = {"approve": "approved (and run)", "deny": "denied", "result": "answered"}


def decision_kind(decision: Decision) -> Literal["approve", "deny", "result"]:
    """What a decision does to its call: `"approve"` (it runs), `"deny"` or `"result"`."""
    if isinstance(decision, Approve):
        return "approve"
    return "deny" if isinstance(decision, Deny) else "result"


def repeat_allowed(decided: str, attempted: str) -> bool:
    """Whether a call of a pause decided `decided` may get `attempted` now: only another
    denial of a denied call, or another answer to an answered deferred call (nothing runs);
    never a second approval, nor a different kind of decision."""
    return decided == attempted and decided != "approve"


def already_decided(
    *,
    call_id: str,
    tool_name: str,
    decided: str,
    attempted: str,
    pause_id: str,
    decided_at: str | None = None,
    decided_by: str | None = None,
) -> CallAlreadyDecidedError:
    """The `CallAlreadyDecidedError` for `call_id`, with a message that says what happened."""
    when = f" at {decided_at}" if decided_at else ""
    where = f" by worker {decided_by}" if decided_by else ""
    if decided == "approve" and attempted == "approve":
        what = "approving it again would run it twice"
    else:
        what = f"it cannot now be {_DECISION_WORDS.get(attempted, attempted)}"
    return CallAlreadyDecidedError(
        f"call {call_id!r} ({tool_name}) of this pause was already "
        f"{_DECISION_WORDS.get(decided, decided)}{when}{where}, through this state or another "
        f"resumed from the same pause; {what}. Continue from the state (or result) that "
        "the earlier resume returned",
        call_id=call_id,
        tool_name=tool_name,
        decided=decided,
        attempted=attempted,
        pause_id=pause_id,
        decided_at=decided_at,
        decided_by=decided_by,
    )


ArgumentPattern = Mapping[str, Any]
"""A serialisable limit on the arguments a standing decision or a rule covers: argument
name to condition, every condition must hold (on the validated arguments, defaults filled
in). A condition is a JSON value the argument must equal (same type: `1` is not `1.0` nor
`true`), or one operator: `{"$in": [values]}`, `{"$glob": "shell-style pattern"}` (strings,
case-sensitive), `{"$min": n}` / `{"$max": n}` (numbers, inclusive). An argument that is
missing matches nothing."""

_OPERATORS = frozenset({"$in", "$glob", "$min", "$max"})


def check_pattern(pattern: Any) -> dict[str, Any]:
    """`pattern` as plain JSON data, or a `TypeError` / `ValueError` saying what is wrong."""
    if not isinstance(pattern, Mapping) or not pattern:
        raise TypeError(
            "an argument pattern is a non-empty mapping of argument name to condition, "
            f"not {type(pattern).__name__}"
        )
    try:
        data: dict[str, Any] = json.loads(
            json.dumps(dict(pattern), ensure_ascii=False, allow_nan=False)
        )
    except (TypeError, ValueError) as e:
        raise TypeError(f"an argument pattern must be JSON data: {e}") from None
    for name, condition in data.items():
        if isinstance(condition, dict) and any(k.startswith("$") for k in condition):
            if len(condition) != 1 or next(iter(condition)) not in _OPERATORS:
                raise ValueError(
                    f"the condition on {name!r} must be one of {sorted(_OPERATORS)} (or a "
                    f"value to equal), not {sorted(condition)}"
                )
            ((op, operand),) = condition.items()
            if op == "$in" and not isinstance(operand, list):
                raise ValueError(f"$in on {name!r} takes a list of values")
            if op == "$glob" and not isinstance(operand, str):
                raise ValueError(f"$glob on {name!r} takes a str")
            if op in ("$min", "$max") and not _number(operand):
                raise ValueError(f"{op} on {name!r} takes a number")
    return data


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _canonical(value: Any) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=repr)


def _holds(condition: Any, value: Any) -> bool:
    if isinstance(condition, dict) and len(condition) == 1:
        ((op, operand),) = condition.items()
        if op == "$in":
            return any(_canonical(value) == _canonical(v) for v in operand)
        if op == "$glob":
            return isinstance(value, str) and fnmatch.fnmatchcase(value, operand)
        if op == "$min":
            return _number(value) and value >= operand
        if op == "$max":
            return _number(value) and value <= operand
    return _canonical(value) == _canonical(condition)


def matches_pattern(pattern: ArgumentPattern, arguments: Mapping[str, Any]) -> bool:
    """Whether `arguments` (validated, defaults filled in) satisfy every condition of
    `pattern` (see `ArgumentPattern`)."""
    return all(name in arguments and _holds(c, arguments[name]) for name, c in pattern.items())


class StandingDecision(BaseModel):
    """A decision that stands for the later calls of one tool in one conversation
    (`Approve(always=True)`, `Deny(always=True)`): `when` (a pattern) limits it to matching
    arguments. Kept in the `ConversationState` (signed with it) and in a durable
    conversation; `ConversationState.revoke(id)` removes it. A decision limited by a
    function (`when=callable`) holds in this process only: a state holding one cannot be
    written with `to_json` (write the limit as a pattern)."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=lambda: uuid.uuid4().hex[:12], min_length=1)
    tool_name: str
    decision: Literal["approve", "deny"]
    message: str | None = None
    """What the model is told for a denied call."""
    when: dict[str, Any] | None = None
    """The argument pattern it is limited to (None: any arguments)."""
    call_id: str | None = None
    """The call it was made on."""
    _predicate: Callable[[dict[str, Any]], Any] | None = PrivateAttr(default=None)

    @field_validator("when")
    @classmethod
    def _valid_pattern(cls, value: Any) -> Any:
        return None if value is None else check_pattern(value)

    @property
    def in_process(self) -> bool:
        """Whether it is limited by a function (it cannot be written to JSON)."""
        return self._predicate is not None

    def covers(self, tool_name: str, arguments: Mapping[str, Any] | None) -> bool:
        """Whether it applies to a call of `tool_name` with `arguments` (validated; None
        when they are not valid: a limited decision then covers nothing)."""
        if tool_name != self.tool_name:
            return False
        if self.when is None and self._predicate is None:
            return True
        if arguments is None:
            return False
        if self.when is not None and not matches_pattern(self.when, arguments):
            return False
        if self._predicate is not None:
            try:
                return self._predicate(dict(arguments)) is True
            except Exception:  # a failing limit covers nothing: a person is asked
                return False
        return True

    def describe(self) -> str:
        """One line: what it decides, for which tool and arguments."""
        what = "always approve" if self.decision == "approve" else "always deny"
        limit = ""
        if self.when is not None:
            limit = f" when {json.dumps(self.when, ensure_ascii=False)}"
        if self._predicate is not None:
            limit += " when <function, this process only>"
        return f"{self.id}: {what} {self.tool_name}{limit}"


def standing_from(call: PendingCall, decision: Decision) -> StandingDecision | None:
    """The standing decision `decision` makes on `call` (None unless `always`)."""
    if not isinstance(decision, Approve | Deny) or not decision.always:
        return None
    when = decision.when
    kind = "approve" if isinstance(decision, Approve) else "deny"
    # the same on every replay of a durable conversation (a revocation names it)
    limit = "function" if callable(when) else _canonical(None if when is None else dict(when))
    made = f"{call.id}\0{call.ask}\0{call.tool_name}\0{kind}\0{limit}"
    standing = StandingDecision(
        id=hashlib.sha256(made.encode("utf-8", "surrogatepass")).hexdigest()[:12],
        tool_name=call.tool_name,
        decision=kind,
        message=decision.message if isinstance(decision, Deny) else None,
        when=None if when is None or callable(when) else dict(when),
        call_id=call.id,
    )
    if callable(when):
        standing._predicate = when
    return standing


class ConversationState(BaseModel):
    """A paused conversation: the history so far, the calls waiting and the tool rounds
    used. Serialise with `to_json()` and restore with `ConversationState.from_json(text)`;
    a later process with the same tools registered can resume it."""

    model_config = ConfigDict(frozen=True)

    version: int = STATE_VERSION
    id: str = Field(default_factory=lambda: uuid.uuid4().hex)
    """This state (each resume that leaves calls waiting returns a new one)."""
    pause_id: str = Field(default="", min_length=1)  # "" (or none): the state's own id
    """The pause this state belongs to: set when the loop stops, and kept by every state
    derived from it (a resume that leaves calls waiting), through `to_json` / `from_json`.
    A call of one pause runs at most once, whatever state reaches it: decisions are claimed
    by (pause id, call id). A state written without one (older toolweave) is its own pause."""
    messages: tuple[ChatMessage, ...]
    pending: tuple[PendingCall, ...]
    rounds: int = Field(ge=0)
    """Tool rounds already used (the round-trip limit holds across a pause)."""
    standing_decisions: tuple[StandingDecision, ...] = ()
    """The conversation's standing decisions (`Approve(always=True)`, `Deny(always=True)`),
    oldest first; `revoke` removes one."""

    def revoke(self, which: str) -> ConversationState:
        """This state without the standing decision whose id is `which` (or every one for
        the tool named `which`): a new state of the same pause. Continue from it (an older
        copy of the state still holds the decision). `KeyError` when none matches."""
        kept = tuple(s for s in self.standing_decisions if which not in (s.id, s.tool_name))
        if len(kept) == len(self.standing_decisions):
            raise KeyError(f"no standing decision {which!r} in this state")
        return self.model_copy(update={"standing_decisions": kept, "id": uuid.uuid4().hex})

    @model_validator(mode="before")
    @classmethod
    def _own_pause_by_default(cls, data: Any) -> Any:
        """A state made without a pause id starts a pause of its own (its id is the pause's)."""
        if isinstance(data, Mapping) and not data.get("pause_id"):
            data = dict(data)
            state_id = data.get("id")
            if state_id is None:
                state_id = data["id"] = uuid.uuid4().hex
            data["pause_id"] = state_id
        return data

    def to_json(self, *, key: str | bytes | None = None) -> str:
        """The state as JSON text. With `key` (a secret of your application: `bytes` or
        `str`, at least 16 bytes) the text is signed (HMAC-SHA256): `from_json(text,
        key=key)` then refuses any edit. Any other key is a `TypeError` / `ValueError`."""
        secret = None if key is None else signing_key(key)
        kept_here = [s.id for s in self.standing_decisions if s.in_process]
        if kept_here:
            raise TypeError(
                f"standing decisions {kept_here} are limited by a function, which cannot be "
                "written to JSON (a text without it would widen the decision): limit them "
                "with an argument pattern (when={...}) instead, or keep the state in process"
            )
        text = self.model_dump_json()
        if secret is None:
            return text
        return json.dumps({_SIGNED: text, _SIGNATURE: _sign(text, secret)})

    @classmethod
    def from_json(cls, text: str | bytes, *, key: str | bytes | None = None) -> ConversationState:
        """Restore a state; one that does not match its history is an
        `InvalidConversationStateError`. With `key`, the text must be signed with it (see
        `to_json`; a key that is not `bytes` / `str` of at least 16 bytes is a `TypeError` /
        `ValueError`, whatever the text); without, a signed text is refused rather than read
        unchecked."""
        text = _verified(text, None if key is None else signing_key(key))
        try:
            state = cls.model_validate_json(text)
        except ValueError as e:
            raise InvalidConversationStateError(f"not a conversation state: {e}") from None
        state.check()
        return state

    def check(self) -> None:
        """Raise `InvalidConversationStateError` unless every pending call is a call of the
        last model turn (same id, tool and arguments) that has no result yet."""
        if self.version != STATE_VERSION:
            raise InvalidConversationStateError(
                f"conversation state version {self.version} is not supported "
                f"(this toolweave writes version {STATE_VERSION})"
            )
        if not self.pending:
            raise InvalidConversationStateError("the conversation state has no pending calls")
        ids = [p.id for p in self.pending]
        if len(set(ids)) != len(ids):  # each would be run once per entry
            raise InvalidConversationStateError(
                f"the conversation state lists a pending call twice ({sorted(ids)})"
            )
        last = next(
            (
                (i, m)
                for i, m in reversed(list(enumerate(self.messages)))
                if isinstance(m, AiMessage)
            ),
            None,
        )
        if last is None:
            raise InvalidConversationStateError("the conversation state has no model turn")
        position, turn = last
        stray = [
            m
            for m in self.messages[position + 1 :]
            if not isinstance(m, ToolExecutionResultMessage)
        ]
        if stray:
            raise InvalidConversationStateError(
                f"a {stray[0].type} message follows the model turn whose calls are pending "
                "(only their results may): the state was changed"
            )
        calls = {c.id: c for c in turn.tool_execution_requests}
        answered = {
            m.id for m in self.messages[position + 1 :] if isinstance(m, ToolExecutionResultMessage)
        }
        for pending in self.pending:
            call = calls.get(pending.id)
            if (
                call is None
                or call.name != pending.tool_name
                or call.arguments != pending.arguments
            ):
                raise InvalidConversationStateError(
                    f"pending call {pending.id!r} ({pending.tool_name}) does not match the last "
                    "model turn of the history: the state is stale or was changed"
                )
            if pending.id in answered:
                raise InvalidConversationStateError(
                    f"pending call {pending.id!r} already has a result in the history"
                )
        unanswered = set(calls) - answered - {p.id for p in self.pending}
        if unanswered:
            raise InvalidConversationStateError(
                f"calls {sorted(unanswered)} of the last model turn have neither a result nor "
                "a pending entry: the state is stale or was changed"
            )


_SIGNED = "signed_state"
_SIGNATURE = "hmac_sha256"
MIN_KEY_BYTES = 16
"""The shortest signing key accepted (a `str` key counts its UTF-8 bytes)."""


def signing_key(key: object) -> bytes:
    """The secret bytes of a signing key: `bytes`, or a `str` (its UTF-8 encoding), at least
    `MIN_KEY_BYTES` long. Anything else is the caller's mistake, refused with a clear
    `TypeError` (not bytes or str: an int would silently become that many zero bytes) or
    `ValueError` (empty, too short, or a str that is not encodable text)."""
    if isinstance(key, str):
        try:
            secret = key.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(
                f"the signing key is not valid text: it holds a lone surrogate "
                f"({key[e.start]!r} at position {e.start}), which has no UTF-8 encoding; use "
                "bytes, or a str of real characters"
            ) from None
    elif isinstance(key, bytes):
        secret = bytes(key)
    else:
        raise TypeError(
            f"the signing key must be bytes or str, not {type(key).__name__} (an application "
            f"secret of at least {MIN_KEY_BYTES} bytes, e.g. from the environment)"
        )
    if not secret:
        raise ValueError(
            f"the signing key is empty: give a secret of at least {MIN_KEY_BYTES} bytes"
        )
    if len(secret) < MIN_KEY_BYTES:
        raise ValueError(
            f"the signing key is too short ({len(secret)} bytes): give a secret of at least "
            f"{MIN_KEY_BYTES} bytes (a str counts its UTF-8 bytes), e.g. 32 random bytes"
        )
    return secret


def _sign(text: str, secret: bytes) -> str:
    # surrogatepass: a hostile envelope may hold a lone surrogate; it must fail the check,
    # not raise UnicodeEncodeError
    return hmac.new(secret, text.encode("utf-8", "surrogatepass"), hashlib.sha256).hexdigest()


def _verified(text: str | bytes, key: bytes | None) -> str | bytes:
    """The state's JSON text: unwrapped from its signature, which is checked."""
    if key is None:
        head = text[:64].lstrip()
        if (head.decode("utf-8", "replace") if isinstance(head, bytes) else head).startswith(
            '{"' + _SIGNED
        ):
            raise InvalidConversationStateError(
                "the conversation state is signed: pass the key (from_json(text, key=...))"
            )
        return text
    try:
        envelope = None if nested_deeper_than(text) else json.loads(text)
    except ValueError:
        envelope = None
    if not (isinstance(envelope, dict) and set(envelope) == {_SIGNED, _SIGNATURE}):
        raise InvalidConversationStateError(
            "the conversation state is not signed, but a key was given: it was written "
            "without one, or its signature was removed"
        )
    inner, signature = envelope[_SIGNED], envelope[_SIGNATURE]
    if not (
        isinstance(inner, str)
        and isinstance(signature, str)
        and signature.isascii()
        and hmac.compare_digest(_sign(inner, key), signature)
    ):
        raise InvalidConversationStateError(
            "the conversation state's signature does not match: it was changed, or signed "
            "with another key"
        )
    return inner


_STANDING_SIGNED = "signed_standing"
_STANDING_KIND = "toolweave.standing/1"


def _standing_inner(memory_id: Any) -> str:
    if memory_id is None:
        raise ValueError(
            "signed standing decisions are bound to one conversation: give its memory_id "
            "(a str or int that names the conversation; None would fit every conversation)"
        )
    return _canonical(memory_id)


def _sign_standing_text(text: str, secret: bytes) -> str:
    # domain-separated from a state's signature: one is never accepted as the other
    return _sign(_STANDING_KIND + "\0" + text, secret)


def sign_standing(
    decisions: Sequence[StandingDecision], *, key: str | bytes, memory_id: Any
) -> str:
    """The standing decisions as signed JSON text (HMAC-SHA256 with `key`, the same kind of
    application secret as `ConversationState.to_json(key=...)`), bound to the conversation
    `memory_id`: hand it to a client and read it back with `verify_standing`. A decision
    limited by a function cannot be written (`TypeError`): the text would widen it."""
    secret = signing_key(key)
    conversation = _standing_inner(memory_id)
    kept_here = [s.id for s in decisions if s.in_process]
    if kept_here:
        raise TypeError(
            f"standing decisions {kept_here} are limited by a function, which cannot be "
            "written to JSON (a text without it would widen the decision): limit them "
            "with an argument pattern (when={...}) instead, or keep them in process"
        )
    inner = json.dumps(
        {
            "kind": _STANDING_KIND,
            "memory_id": conversation,
            "decisions": [s.model_dump(mode="json") for s in decisions],
        },
        ensure_ascii=False,
    )
    return json.dumps({_STANDING_SIGNED: inner, _SIGNATURE: _sign_standing_text(inner, secret)})


def verify_standing(
    text: str | bytes, *, key: str | bytes, memory_id: Any
) -> tuple[StandingDecision, ...]:
    """The standing decisions `sign_standing` wrote for the conversation `memory_id`, to
    pass as `chat(..., standing_decisions=...)`. Anything changed, unsigned, signed with
    another key or for another conversation is an `InvalidStandingDecisionsError`."""
    secret = signing_key(key)
    conversation = _standing_inner(memory_id)
    try:
        envelope = None if nested_deeper_than(text) else json.loads(text)
    except ValueError:
        envelope = None
    if not (isinstance(envelope, dict) and set(envelope) == {_STANDING_SIGNED, _SIGNATURE}):
        raise InvalidStandingDecisionsError(
            "not signed standing decisions (sign_standing writes them): refused"
        )
    inner, signature = envelope[_STANDING_SIGNED], envelope[_SIGNATURE]
    if not (
        isinstance(inner, str)
        and isinstance(signature, str)
        and signature.isascii()
        and hmac.compare_digest(_sign_standing_text(inner, secret), signature)
    ):
        raise InvalidStandingDecisionsError(
            "the standing decisions' signature does not match: they were changed, or signed "
            "with another key"
        )
    data = json.loads(inner)
    if (
        not isinstance(data, dict)
        or data.get("kind") != _STANDING_KIND
        or data.get("memory_id") != conversation
    ):
        raise InvalidStandingDecisionsError(
            "these standing decisions were signed for another conversation (memory id): refused"
        )
    try:
        return tuple(StandingDecision.model_validate(d) for d in data["decisions"])
    except (ValueError, KeyError, TypeError) as e:  # signed by us: only a foreign writer
        raise InvalidStandingDecisionsError(f"not standing decisions: {e}") from None


def check_given_standing(given: Any) -> list[StandingDecision]:
    """`chat(standing_decisions=...)`: StandingDecision objects only (a dict or text from a
    client would be unverified: `verify_standing` turns signed text into them)."""
    if isinstance(given, str | bytes | Mapping) or not isinstance(given, Sequence):
        raise TypeError(
            "standing_decisions takes a sequence of StandingDecision (from "
            "result.standing_decisions in process, or verify_standing(text, key=..., "
            f"memory_id=...) for text a client sent back), not {type(given).__name__}"
        )
    out = list(given)
    for s in out:
        if not isinstance(s, StandingDecision):
            raise TypeError(
                "standing_decisions takes StandingDecision objects, not "
                f"{type(s).__name__} (unverified data would widen what a person decided: "
                "use verify_standing for signed text)"
            )
    return out


@dataclass(frozen=True, slots=True)
class Approve:
    """Run the call; with `arguments` (a dict or JSON text), run it with these instead
    (validated again, like the model's own). `always=True` also approves the later calls
    of this tool in this conversation, those whose arguments match `when` if given (an
    `ArgumentPattern`, or a function of the arguments: in process only)."""

    arguments: Mapping[str, Any] | str | None = None
    always: bool = field(default=False, kw_only=True)
    when: ArgumentPattern | Callable[[dict[str, Any]], Any] | None = field(
        default=None, kw_only=True
    )


@dataclass(frozen=True, slots=True)
class Deny:
    """Do not run the call; the model sees `message` as the call's (error) result.
    `always=True` also denies the later calls of this tool in this conversation (those
    whose arguments match `when`, if given), without asking."""

    message: str = "The user did not approve this tool call."
    always: bool = field(default=False, kw_only=True)
    when: ArgumentPattern | Callable[[dict[str, Any]], Any] | None = field(
        default=None, kw_only=True
    )


@dataclass(frozen=True, slots=True)
class DeferredResult:
    """The result of a deferred call, produced by the caller: `text` for the model, `result`
    the raw value (kept in `ToolExecution`), `is_error` when it failed."""

    text: str
    result: Any = None
    is_error: bool = False


Decision = Approve | Deny | DeferredResult
"""What the caller decided for one pending call."""


@dataclass(frozen=True, slots=True)
class ApprovalRequired:
    """The stream's event when the loop stops for pending calls (a `ChatCompleted` whose
    result has status `PENDING` follows, and the stream ends)."""

    pending: tuple[PendingCall, ...]
    state: ConversationState


def decision_message(call_id: str, decision: Decision) -> dict[str, Any]:
    """`decision` for `call_id` as plain JSON data (sent to a durable conversation)."""
    if isinstance(decision, Approve | Deny):
        if isinstance(decision, Approve):
            arguments = decision.arguments
            if arguments is not None and not isinstance(arguments, str):
                arguments = dict(arguments)
            message: dict[str, Any] = {
                "call_id": call_id,
                "decision": "approve",
                "arguments": arguments,
            }
        else:
            message = {"call_id": call_id, "decision": "deny", "message": decision.message}
        if decision.always:
            if callable(decision.when):
                raise TypeError(
                    f"the standing decision for {call_id!r} is limited by a function, which "
                    "cannot be sent to another process: limit it with an argument pattern"
                )
            message["always"] = True
            message["when"] = None if decision.when is None else check_pattern(decision.when)
        return message
    return {
        "call_id": call_id,
        "decision": "result",
        "text": decision.text,
        "result": decision.result,
        "is_error": decision.is_error,
    }


def read_decision(message: Any) -> tuple[str, Decision] | None:
    """The (call id, decision) in a `decision_message`; None for anything else."""
    if not isinstance(message, Mapping) or not isinstance(message.get("call_id"), str):
        return None
    kind = message.get("decision")
    always = message.get("always") is True
    when = message.get("when") if always else None
    if when is not None:
        try:
            when = check_pattern(when)
        except (TypeError, ValueError):
            return None  # a limit that cannot be read must not become "any arguments"
    decision: Decision
    if kind == "approve":
        decision = Approve(message.get("arguments"), always=always, when=when)
    elif kind == "deny":
        text = message.get("message")
        decision = (
            Deny(str(text), always=always, when=when) if text else Deny(always=always, when=when)
        )
    elif kind == "result":
        decision = DeferredResult(
            str(message.get("text", "")),
            result=message.get("result"),
            is_error=bool(message.get("is_error")),
        )
    else:
        return None
    return message["call_id"], decision


def check_decisions(state: ConversationState, decisions: Mapping[str, Decision]) -> None:
    """Every decision names a pending call and fits its kind (checked before anything runs:
    a bad decision must not leave a round half-resumed)."""
    if not isinstance(decisions, Mapping):
        raise TypeError(
            f"decisions must be a mapping of call id to decision, not a {type(decisions).__name__}"
        )
    pending = {p.id: p for p in state.pending}
    for call_id, decision in decisions.items():
        _check_fields(call_id, decision)
        call = pending.get(call_id)
        if call is None:
            raise InvalidConversationStateError(
                f"a decision for {call_id!r}, which is not a pending call "
                f"(pending: {', '.join(pending) or 'none'})"
            )
        check_decision_kind(call, decision)


def check_decision_kind(call: PendingCall, decision: Any) -> None:
    """`decision` is a decision, of a kind that answers `call` (approval or deferred)."""
    if not isinstance(decision, Approve | Deny | DeferredResult):
        raise TypeError(
            f"the decision for {call.id!r} is a {type(decision).__name__}: use Approve, "
            "Deny or DeferredResult"
        )
    if call.reason == "deferred" and isinstance(decision, Approve):
        raise InvalidConversationStateError(
            f"{call.id!r} is a deferred call: answer it with DeferredResult (or Deny)"
        )
    if call.reason == "approval" and isinstance(decision, DeferredResult):
        raise InvalidConversationStateError(
            f"{call.id!r} waits for approval: answer it with Approve or Deny"
        )
    if isinstance(decision, Approve | Deny) and decision.always and call.reason != "approval":
        raise InvalidConversationStateError(
            f"{call.id!r} is a deferred call: a standing decision (always=True) is for calls "
            "that wait for approval"
        )


def _check_fields(call_id: str, decision: Any) -> None:
    """A decision's fields have the types they promise."""
    if isinstance(decision, Approve | Deny):
        check_standing_fields(call_id, decision)
    if isinstance(decision, Approve):
        arguments = decision.arguments
        if arguments is None or isinstance(arguments, str):
            return
        if not isinstance(arguments, Mapping):
            raise TypeError(
                f"Approve.arguments for {call_id!r} is a {type(arguments).__name__}: give a "
                "dict or JSON text"
            )
        try:
            json.dumps(dict(arguments), ensure_ascii=False)
        except (TypeError, ValueError) as e:
            raise TypeError(f"Approve.arguments for {call_id!r} is not JSON data: {e}") from None
    elif isinstance(decision, Deny) and not isinstance(decision.message, str):
        raise TypeError(f"Deny.message for {call_id!r} must be a str")
    elif isinstance(decision, DeferredResult) and not isinstance(decision.text, str):
        raise TypeError(f"DeferredResult.text for {call_id!r} must be a str")


def check_standing_fields(call_id: str, decision: Approve | Deny) -> None:
    """`always` is a bool; `when` only with it, a pattern or a function; a standing
    approval does not edit the arguments (it would stand for calls it never saw)."""
    if not isinstance(decision.always, bool):
        raise TypeError(f"always for {call_id!r} must be a bool")
    if decision.when is not None:
        if not decision.always:
            raise TypeError(f"when for {call_id!r} limits a standing decision: add always=True")
        if not callable(decision.when):
            check_pattern(decision.when)
    if isinstance(decision, Approve) and decision.always and decision.arguments is not None:
        raise TypeError(
            f"Approve for {call_id!r}: a standing approval (always=True) cannot edit the "
            "arguments; approve the edited call alone, or limit the standing one with when="
        )
