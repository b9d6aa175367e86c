"""Model providers over HTTP: OpenAI Chat Completions (and compatible servers), Anthropic
Messages and Gemini generateContent. See docs/providers.md."""

from ._http import DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from .anthropic_chat import AnthropicChatModel
from .constrained import ConstrainedToolCalling
from .gemini_chat import GeminiChatModel
from .openai_chat import OpenAIChatModel, OpenAIStreamAggregator
from .probe import Capabilities, aprobe_capabilities, clear_probe_cache, probe_capabilities

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "AnthropicChatModel",
    "Capabilities",
    "ConstrainedToolCalling",
    "GeminiChatModel",
    "OpenAIChatModel",
    "OpenAIStreamAggregator",
    "aprobe_capabilities",
    "clear_probe_cache",
    "probe_capabilities",
]
