"""A conversation as a tool: `ToolService.as_tool(model, name=..., description=...)`.

The tool runs a sub-conversation (its own service: tools, limits, approvals; its own model)
for each call of a parent conversation, and answers the call with the sub-conversation's
final answer, or its structured output with `output_type` (docs/approvals.md, "A conversation
as a tool"). What the parent sees of it:

- its events, when the parent streams: each wrapped in a `NestedEvent` whose `path` holds the
  ids of the tool calls it belongs to, from the top conversation down;
- its token usage, added to the parent's (`ToolChatResult.token_usage`), through the
  `SUBCONVERSATION_ATTRIBUTE` of the call's result;
- its cancellation: cancelling the parent (or the call's `timeout`) cancels the
  sub-conversation, and with it the calls of its tools.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, Field

from ..chat.messages import ChatMessage, SystemMessage, UserMessage
from ..chat.model import ChatModel
from ..chat.request import ChatRequestParameters
from ..chat.response import TokenUsage
from ..context import ToolContext, current_tool_channel
from ..errors import ToolExecutionError
from ..execution.results import ToolExecutionResult
from ..tools.base import Tool
from ..tools.card import ToolCard
from .approvals import ChatStatus
from .result import ChatCompleted, ToolChatResult

__all__ = [
    "SUBCONVERSATION_ATTRIBUTE",
    "ConversationTool",
    "NestedEvent",
    "Task",
    "subconversation_usage",
]

SUBCONVERSATION_ATTRIBUTE = "toolweave.subconversation"
"""The attribute of a `ConversationTool` call's result (and of its message in the history):
`{"usage": {...} | None}`, the sub-conversation's token usage, which the calling loop adds
to its own."""


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


def subconversation_usage(result: ToolExecutionResult) -> TokenUsage | None:
    """The token usage a `ConversationTool` call's result reports (None for any other)."""
    attributes = result.attributes
    if not attributes or SUBCONVERSATION_ATTRIBUTE not in attributes:
        return None
    data = attributes[SUBCONVERSATION_ATTRIBUTE]
    usage = data.get("usage") if isinstance(data, dict) else None
    return TokenUsage.model_validate(usage) if isinstance(usage, dict) else None


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
        messages = self.opening(self.input.model_validate(inputs))
        result = await self._converse(messages, memory_id, context, call_id)
        return self._answer(result)

    async def _converse(
        self, messages: list[ChatMessage], memory_id: Any, context: Any, call_id: str
    ) -> ToolChatResult:
        """Run the sub-conversation; when the calling loop streams, its events go to the
        calling loop's stream, nested under this call."""
        channel = current_tool_channel()
        queue = getattr(channel, "queue", None)  # the calling ToolService's stream, if any
        call = getattr(channel, "call", None)
        if call is not None:
            call_id = call.id
        if queue is None:
            done: ToolChatResult = await self.service.achat(
                self.model,
                self.parameters,
                messages,
                memory_id=memory_id,
                context=context,
                output_type=self.output_type,
            )
            return done
        result: ToolChatResult | None = None
        stream = self.service.achat_stream(
            self.model,
            self.parameters,
            messages,
            memory_id=memory_id,
            context=context,
            output_type=self.output_type,
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
            raise ToolExecutionError(
                f"the conversation of {self.card.name!r} stopped for calls that wait for approval",
                tool_name=self.card.name,
            )
        text = result.text or ""
        usage = result.token_usage
        value = result.output if self.output_type is not None else text
        return ToolExecutionResult(
            text=text,
            result=value,
            attributes={
                SUBCONVERSATION_ATTRIBUTE: {
                    "usage": None if usage is None else usage.model_dump(exclude_none=True)
                }
            },
        )
