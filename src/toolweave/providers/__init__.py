"""Model providers over HTTP: OpenAI Chat Completions (and compatible servers), Anthropic
Messages and Gemini generateContent. See docs/providers.md."""

from ._http import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from .anthropic_chat import AnthropicChatModel
from .gemini_chat import GeminiChatModel
from .openai_chat import OpenAIChatModel, OpenAIStreamAggregator

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "AnthropicChatModel",
    "GeminiChatModel",
    "OpenAIChatModel",
    "OpenAIStreamAggregator",
]
