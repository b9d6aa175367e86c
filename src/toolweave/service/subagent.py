"""A conversation as a tool: `ToolService.as_tool(model, name=..., description=...)`.

The tool runs a sub-conversation (its own service: tools, limits, approvals; its own model)
for each call of a parent conversation, and answers the call with the sub-conversation's
final answer, or its structured output with `output_type` (docs/loop.md, "A conversation as
a tool"; its approvals: docs/approvals.md). What the parent sees of it:

- its events, when the parent streams: each wrapped in a `NestedEvent` whose `path` holds the
  ids of the tool calls it belongs to, from the top conversation down;
- its token usage, added to the parent's (`ToolChatResult.token_usage`), through the
  `SUBCONVERSATION_ATTRIBUTE` of the call's result, with its requests and tool calls; it
  runs within what is left of the parent's `UsageLimits` (`within`);
- its cancellation: cancelling the parent (or the call's `timeout`) cancels the
  sub-conversation, and with it the calls of its tools;
- its pauses: a sub-conversation that stops for calls waiting for approval (or deferred)
  pauses the call (`NeedsApproval`, its state in the pending call's metadata), so the parent
  pauses too; the parent's `result.pending` lists the sub-conversation's waiting calls as
  `NestedPendingCall`s (with their `path`), and the decisions addressed to them (by `id`, or
  by `key` when ids repeat) reach the sub-conversation when the parent resumes
  (`route_decisions`, which the loop applies to every resume), at any depth.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import BaseModel, Field

from ..chat.messages import ChatMessage, SystemMessage, UserMessage
from ..chat.model import ChatModel
from ..chat.request import ChatRequestParameters
from ..chat.response import TokenUsage
from ..context import ToolContext, current_tool_channel
from ..errors import ToolExecutionError
from ..execution.results import ToolExecutionResult
from ..policies.usage import RunUsage, UsageLimitExceeded, UsageLimits
from ..tools.base import Tool
from ..tools.card import ToolCard
from ..tools.pause import NeedsApproval
from .approvals import (
    Approve,
    ChatStatus,
    ConversationState,
    Decision,
    Deny,
    InvalidConversationStateError,
    PendingCall,
    check_decision_kind,
    decision_message,
    read_decision,
)
from .result import ChatCompleted, ToolChatResult

__all__ = [
    "STATE_KEY",
    "SUBCONVERSATION_ATTRIBUTE",
    "ConversationTool",
    "NestedDecisions",
    "NestedEvent",
    "NestedPendingCall",
    "Spent",
    "Task",
    "child_state",
    "decision_payload",
    "nested_pending",
    "read_decision_payload",
    "route_decisions",
    "route_pending",
    "subconversation_spent",
    "subconversation_usage",
    "within",
]

STATE_KEY = "toolweave.subconversation_state"
"""The key, in the `metadata` of a paused `ConversationTool` call, of its sub-conversation's
`ConversationState` (JSON data; signed with the parent's state when that is signed)."""

SUBCONVERSATION_ATTRIBUTE = "toolweave.subconversation"
"""The attribute of a `ConversationTool` call's result (and of its message in the history):
`{"usage": {...} | None, "requests": n, "tool_calls": n}`: the sub-conversation's token
usage, which the calling loop adds to its own, and the model requests it made and tool
calls it ran (since its last resume, for one that paused)."""


class Task(BaseModel):
    """The default arguments of a conversation used as a tool: the task, in full."""

    task: str = Field(description="The task, in full: nothing else of the conversation is seen.")


@dataclass(frozen=True, slots=True)
class NestedEvent:
    """An event of a sub-conversation (a `ConversationTool`'s), in the stream of the
    conversation that called it. `path` holds the ids of the tool calls it belongs to, from
    the top conversation down (one per level of nesting), `tool_names` those calls' tool
    names; `event` is the sub-conversation's own event (never itself a `NestedEvent`: a
    deeper one is flattened, its path extended)."""

    path: tuple[str, ...]
    tool_names: tuple[str, ...]
    event: Any
    """A `ServiceEvent` of the sub-conversation."""


class Spent(NamedTuple):
    """What a sub-conversation used (`subconversation_spent`)."""

    usage: TokenUsage | None
    requests: int
    tool_calls: int


def subconversation_spent(result: ToolExecutionResult) -> Spent | None:
    """What the sub-conversation of a `ConversationTool` call's result used (None for the
    result of any other tool): its token usage, model requests and tool calls."""
    attributes = result.attributes
    if not attributes or SUBCONVERSATION_ATTRIBUTE not in attributes:
        return None
    data = attributes[SUBCONVERSATION_ATTRIBUTE]
    if not isinstance(data, dict):
        return None
    usage = data.get("usage")
    requests, tool_calls = data.get("requests", 0), data.get("tool_calls", 0)
    return Spent(
        TokenUsage.model_validate(usage) if isinstance(usage, dict) else None,
        requests if isinstance(requests, int) else 0,
        tool_calls if isinstance(tool_calls, int) else 0,
    )


def subconversation_usage(result: ToolExecutionResult) -> TokenUsage | None:
    """The token usage a `ConversationTool` call's result reports (None for any other)."""
    spent = subconversation_spent(result)
    return None if spent is None else spent.usage


def _spent_attribute(usage: TokenUsage | None, requests: int, tool_calls: int) -> dict[str, Any]:
    return {
        SUBCONVERSATION_ATTRIBUTE: {
            "usage": None if usage is None else usage.model_dump(exclude_none=True),
            "requests": requests,
            "tool_calls": tool_calls,
        }
    }


def within(own: UsageLimits | None, outer: UsageLimits, used: RunUsage, tokens: Any) -> UsageLimits:
    """The budget of a sub-conversation whose own service has `own`, called by a
    conversation with the budget `outer` of which it used `used` (requests, tool calls) and
    `tokens` (a `TokenUsage`): each limit the lower of its own and what is left of the
    outer one. Spending what is left ends the sub-conversation (`UsageLimitExceeded`), unless
    its own service says to answer."""

    def left(cap: int | None, spent: int | None) -> int | None:
        return None if cap is None else max(cap - (spent or 0), 0)

    def lower(a: int | None, b: int | None) -> int | None:
        return b if a is None else a if b is None else min(a, b)

    total = getattr(tokens, "total_tokens", None)
    if total is None and tokens is not None:
        total = (tokens.input_tokens or 0) + (tokens.output_tokens or 0)
    requests = left(outer.requests, used.requests)
    tool_calls = left(outer.tool_calls, used.tool_calls)
    input_tokens = left(outer.input_tokens, getattr(tokens, "input_tokens", None))
    output_tokens = left(outer.output_tokens, getattr(tokens, "output_tokens", None))
    total_tokens = left(outer.total_tokens, total)
    if own is None:
        return UsageLimits(
            requests=requests,
            tool_calls=tool_calls,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            total_tokens=total_tokens,
            on_exceeded="raise",
        )
    return dataclasses.replace(
        own,
        requests=lower(own.requests, requests),
        tool_calls=lower(own.tool_calls, tool_calls),
        input_tokens=lower(own.input_tokens, input_tokens),
        output_tokens=lower(own.output_tokens, output_tokens),
        total_tokens=lower(own.total_tokens, total_tokens),
    )


class NestedPendingCall(PendingCall):
    """A call waiting in a sub-conversation, as the conversation that called it lists it
    (`ToolChatResult.pending`, `ApprovalRequired.pending`). `path` holds the ids of the tool
    calls it is nested in, from the top conversation down; decide it by its `id` (when no
    other waiting call has that id) or by its `key`."""

    path: tuple[str, ...] = ()
    tool_names: tuple[str, ...] = ()
    """The names of the tools of `path` (the sub-conversations)."""

    # `ask` counts the pauses of the calls of `path` too (each is a new pause of this call)

    @property
    def key(self) -> str:
        """`path` and `id` joined with `/`: a name for the call that no other has."""
        return "/".join((*self.path, self.id))


@dataclass(frozen=True, slots=True)
class NestedDecisions(Approve):
    """Internal decision of a paused `ConversationTool` call, made by `route_decisions`
    from the decisions addressed to its sub-conversation's calls: run the call again, which
    resumes `state` with `decisions` (keys relative to the sub-conversation)."""

    state: ConversationState | None = None
    decisions: Mapping[str, Decision] = field(default_factory=dict)


def decision_payload(call_id: str, decision: Decision) -> dict[str, Any]:
    """`decision_message` (a decision as JSON data, for another process), keeping what a
    `NestedDecisions` holds: the sub-conversation's state and the decisions for it."""
    message = decision_message(call_id, decision)
    if isinstance(decision, NestedDecisions) and decision.state is not None:
        message["nested"] = {
            "state": decision.state.model_dump(mode="json"),
            "decisions": [decision_payload(k, d) for k, d in decision.decisions.items()],
        }
    return message


def read_decision_payload(message: Any) -> tuple[str, Decision] | None:
    """The (call id, decision) of a `decision_payload` (None for anything else)."""
    found = read_decision(message)
    nested = message.get("nested") if isinstance(message, Mapping) else None
    if found is None or not isinstance(nested, Mapping) or not isinstance(found[1], Approve):
        return found
    inner = [read_decision_payload(m) for m in nested.get("decisions") or ()]
    state = ConversationState.model_validate(nested.get("state"))
    return found[0], NestedDecisions(state=state, decisions=dict(d for d in inner if d))


def child_state(call: PendingCall) -> ConversationState | None:
    """The sub-conversation state a paused `ConversationTool` call holds, if it is one."""
    metadata = call.metadata
    if not call.raised or not metadata or STATE_KEY not in metadata:
        return None
    return ConversationState.model_validate(metadata[STATE_KEY])


def nested_pending(pending: Sequence[PendingCall]) -> tuple[PendingCall, ...]:
    """`pending` with every paused sub-conversation replaced by the calls waiting in it (at
    any depth, as `NestedPendingCall`s): what a person decides."""
    if not any(child_state(p) is not None for p in pending):
        return tuple(pending)
    return tuple(_leaves(pending, (), ()))


def _leaves(
    pending: Sequence[PendingCall], path: tuple[str, ...], tools: tuple[str, ...]
) -> Iterator[PendingCall]:
    for call in pending:
        state = child_state(call)
        if state is not None:
            for leaf in _leaves(state.pending, (*path, call.id), (*tools, call.tool_name)):
                # a pause of the call holding it is a new pause of the nested call too
                yield leaf.model_copy(update={"ask": leaf.ask + call.ask}) if call.ask else leaf
        elif path:
            fields = call.model_dump(exclude={"path", "tool_names"})
            yield NestedPendingCall(**fields, path=path, tool_names=tools)
        else:
            yield call


def route_decisions(
    state: ConversationState, decisions: Mapping[str, Decision] | None
) -> Mapping[str, Decision] | None:
    """The decisions for `state`'s own pending calls, those addressed to calls waiting in a
    paused sub-conversation (by id or key) gathered into one `NestedDecisions` per paused
    `ConversationTool` call. Approving the paused call itself approves every call waiting
    for approval in its sub-conversation; denying it abandons the sub-conversation."""
    return route_pending(state.pending, decisions)


def route_pending(
    pending: Sequence[PendingCall], decisions: Mapping[str, Decision] | None
) -> Mapping[str, Decision] | None:
    """`route_decisions` for the calls `pending` (of one paused round)."""
    if not decisions or not isinstance(decisions, Mapping):
        return decisions
    children = {p.id: s for p in pending if (s := child_state(p)) is not None}
    if not children:
        return decisions
    leaves = [c for c in nested_pending(pending) if isinstance(c, NestedPendingCall)]
    by_key = {c.key: c for c in leaves}
    own = {p.id for p in pending}
    routed: dict[str, Decision] = {}
    nested: dict[str, dict[str, Decision]] = {}
    for key, decision in decisions.items():
        if key in children and isinstance(decision, Approve):
            for leaf in leaves:  # the sub-conversation as a whole: its approvals
                if leaf.path[0] == key and leaf.reason == "approval":
                    nested.setdefault(key, {})[_below(leaf.key)] = Approve()
            continue
        if key in own:
            routed[key] = decision  # a call of this conversation (or a denied child)
            continue
        found = by_key.get(key) or _only(leaves, key)
        if found is None:
            routed[key] = decision  # refused by the usual check, naming the pending calls
            continue
        check_decision_kind(found, decision)
        nested.setdefault(found.path[0], {})[_below(key) if "/" in key else key] = decision
    for call_id, below in nested.items():
        if isinstance(routed.get(call_id), Deny):
            raise InvalidConversationStateError(
                f"{call_id!r} (a paused sub-conversation) is denied, and calls waiting in it "
                f"are decided too ({', '.join(sorted(below))}): give one or the other"
            )
        routed[call_id] = NestedDecisions(state=children[call_id], decisions=below)
    return routed


def _below(key: str) -> str:
    """`key` of a nested call relative to the sub-conversation of its first path element."""
    return key.split("/", 1)[1]


def _only(leaves: list[NestedPendingCall], call_id: str) -> NestedPendingCall | None:
    found = [c for c in leaves if c.id == call_id]
    if len(found) > 1:
        raise InvalidConversationStateError(
            f"a decision for {call_id!r}, which names several calls waiting in "
            f"sub-conversations: decide each by its key ({', '.join(c.key for c in found)})"
        )
    return found[0] if found else None


Prompt = Callable[[Any], "str | Sequence[ChatMessage]"]
"""Turns a call's arguments (an instance of the `input` model) into the sub-conversation's
opening message(s)."""


class ConversationTool(Tool):
    """A conversation of `service` with `model`, run as one tool (made by
    `ToolService.as_tool`; see the module docstring)."""

    def __init__(
        self,
        service: Any,
        model: ChatModel,
        *,
        name: str,
        description: str,
        input: type[BaseModel] | None = None,
        output_type: Any = None,
        instructions: str | None = None,
        prompt: Prompt | None = None,
        parameters: ChatRequestParameters | None = None,
        timeout: float | None = None,
        requires_approval: Any = False,
    ) -> None:
        arguments = Task if input is None else input
        if not (isinstance(arguments, type) and issubclass(arguments, BaseModel)):
            raise TypeError(f"input must be a pydantic model class, not {arguments!r}")
        card = ToolCard(
            name=name,
            description=description,
            input_params=arguments,
            timeout=timeout,
            requires_approval=requires_approval,
        )
        super().__init__(card)
        self.service = service
        """The `ToolService` whose conversation runs (its tools, limits and approvals; typed
        loosely: this module is imported by the service's)."""
        self.model = model
        self.input = arguments
        self.output_type = output_type
        self.instructions = instructions
        self.prompt = prompt
        self.parameters = parameters

    def _async_first(self) -> bool:
        return True  # a sync call with a timeout runs on a loop, where the deadline cancels

    def opening(self, arguments: BaseModel) -> list[ChatMessage]:
        """The sub-conversation's first messages for a call with `arguments`: the
        instructions, then `prompt(arguments)`, else the task (the default input) or the
        arguments as JSON."""
        messages: list[ChatMessage] = []
        if self.instructions:
            messages.append(SystemMessage(self.instructions))
        if self.prompt is not None:
            made = self.prompt(arguments)
            messages.extend([UserMessage(made)] if isinstance(made, str) else made)
        elif isinstance(arguments, Task):
            messages.append(UserMessage(arguments.task))
        else:
            messages.append(UserMessage(arguments.model_dump_json()))
        return messages

    async def ainvoke_internal(self, inputs: dict[str, Any], **kwargs: Any) -> Any:
        ctx = kwargs.get("tool_context")
        memory_id = context = None
        call_id = ""
        if isinstance(ctx, ToolContext):
            memory_id, context, call_id = ctx.memory_id, ctx.context, ctx.request_id or ""
        approval = ctx.approval if isinstance(ctx, ToolContext) else None
        conversation: list[ChatMessage] | ConversationState
        decisions: Mapping[str, Decision] | None = None
        if approval is None:
            conversation = self.opening(self.input.model_validate(inputs))
        elif isinstance(approval, NestedDecisions) and approval.state is not None:
            conversation, decisions = approval.state, approval.decisions
        else:  # a decision that did not come through route_decisions (e.g. durable)
            raise ToolExecutionError(
                f"the paused conversation of {self.card.name!r} was resumed without its "
                "state: decide the calls waiting in it (result.pending) through the "
                "conversation that paused",
                tool_name=self.card.name,
            )
        try:
            result = await self._converse(conversation, decisions, memory_id, context, call_id)
        except UsageLimitExceeded as e:  # the budget it had is spent: the caller counts it
            used = e.usage
            tokens = TokenUsage(
                input_tokens=used.input_tokens,
                output_tokens=used.output_tokens,
                total_tokens=used.total_tokens,
            )
            return ToolExecutionResult(
                text=f"The conversation of {self.card.name!r} stopped: {e.message}",
                is_error=True,
                error=e,
                attributes=_spent_attribute(tokens, used.requests, used.tool_calls),
            )
        return self._answer(result)

    async def _converse(
        self,
        conversation: list[ChatMessage] | ConversationState,
        decisions: Mapping[str, Decision] | None,
        memory_id: Any,
        context: Any,
        call_id: str,
    ) -> ToolChatResult:
        """Run the sub-conversation; when the calling loop streams, its events go to the
        calling loop's stream, nested under this call."""
        channel = current_tool_channel()
        queue = getattr(channel, "queue", None)  # the calling ToolService's stream, if any
        call = getattr(channel, "call", None)
        if call is not None:
            call_id = call.id
        limits = self._budget(getattr(channel, "run", None))
        if queue is None:
            done: ToolChatResult = await self.service.achat(
                self.model,
                self.parameters,
                conversation,
                memory_id=memory_id,
                context=context,
                output_type=self.output_type,
                decisions=decisions,
                usage_limits=limits,
            )
            return done
        result: ToolChatResult | None = None
        stream = self.service.achat_stream(
            self.model,
            self.parameters,
            conversation,
            memory_id=memory_id,
            context=context,
            output_type=self.output_type,
            decisions=decisions,
            usage_limits=limits,
        )
        try:
            async for event in stream:
                queue.put_nowait(self._nested(call_id, event))
                if isinstance(event, ChatCompleted):
                    result = event.result
        finally:  # closed at once when cancelled: its tools stop with it
            close = getattr(stream, "aclose", None)
            if close is not None:
                await close()
        assert result is not None
        return result

    def _budget(self, caller: Any) -> UsageLimits | None:
        """The sub-conversation's budget: its service's, within what is left of the calling
        conversation's (`within`); None (its service's) when the caller has none."""
        policy = getattr(caller, "policy", None)
        outer = getattr(policy, "limits", None)
        if policy is None or outer is None:
            return None
        own = getattr(getattr(self.service, "_policies", None), "limits", None)
        return within(own, outer, policy.usage, getattr(caller, "usage", None))

    def _nested(self, call_id: str, event: Any) -> NestedEvent:
        if isinstance(event, NestedEvent):
            return NestedEvent(
                (call_id, *event.path), (self.card.name, *event.tool_names), event.event
            )
        return NestedEvent((call_id,), (self.card.name,), event)

    def _answer(self, result: ToolChatResult) -> ToolExecutionResult:
        """The call's result: the final answer's text for the model; the structured output
        (with `output_type`) or the text as the raw result; the usage as an attribute."""
        if result.status is ChatStatus.PENDING:
            assert result.state is not None
            waiting = ", ".join(f"{c.tool_name} ({c.id})" for c in result.pending)
            raise NeedsApproval(
                f"calls wait in the conversation of {self.card.name!r}: {waiting}",
                {STATE_KEY: result.state.model_dump(mode="json")},
            )
        text = result.text or ""
        usage = result.token_usage
        value = result.output if self.output_type is not None else text
        return ToolExecutionResult(
            text=text,
            result=value,
            attributes=_spent_attribute(
                usage, len(result.intermediate_responses) + 1, len(result.tool_executions)
            ),
        )
