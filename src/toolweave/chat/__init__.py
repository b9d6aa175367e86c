"""The chat protocol: messages, requests, responses, stream events, the ChatModel protocol
and the scripted test model."""

from .events import (
    CompleteToolCall,
    PartialToolCall,
    ReasoningDelta,
    ResponseCompleted,
    StreamAccumulator,
    StreamEvent,
    TextDelta,
)
from .messages import (
    AiMessage,
    ChatMessage,
    SystemMessage,
    ToolExecutionResultMessage,
    UserMessage,
)
from .model import BaseChatModel, ChatModel
from .request import ChatRequest, ChatRequestParameters, ToolChoice
from .response import ChatResponse, FinishReason, TokenUsage
from .scripted import ScriptedChatModel, ScriptExhaustedError

__all__ = [
    "AiMessage",
    "BaseChatModel",
    "ChatMessage",
    "ChatModel",
    "ChatRequest",
    "ChatRequestParameters",
    "ChatResponse",
    "CompleteToolCall",
    "FinishReason",
    "PartialToolCall",
    "ReasoningDelta",
    "ResponseCompleted",
    "ScriptExhaustedError",
    "ScriptedChatModel",
    "StreamAccumulator",
    "StreamEvent",
    "SystemMessage",
    "TextDelta",
    "TokenUsage",
    "ToolChoice",
    "ToolExecutionResultMessage",
    "UserMessage",
]
