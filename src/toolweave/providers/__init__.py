"""Model providers over HTTP: OpenAI Chat Completions (and compatible servers) and
Responses, Azure OpenAI, Anthropic Messages and Gemini generateContent. See
docs/providers.md."""

from ._http import DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_MAX_RETRIES, DEFAULT_TIMEOUT
from .anthropic_chat import AnthropicChatModel
from .bedrock import BedrockChatModel
from .constrained import ConstrainedChatModel, ConstrainedToolCalling
from .gemini_chat import GeminiChatModel
from .openai_chat import AzureOpenAIChatModel, OpenAIChatModel, OpenAIStreamAggregator
from .openai_responses import AzureOpenAIResponsesChatModel, OpenAIResponsesChatModel
from .probe import Capabilities, aprobe_capabilities, clear_probe_cache, probe_capabilities

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "DEFAULT_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "AnthropicChatModel",
    "AzureOpenAIChatModel",
    "AzureOpenAIResponsesChatModel",
    "BedrockChatModel",
    "Capabilities",
    "ConstrainedChatModel",
    "ConstrainedToolCalling",
    "GeminiChatModel",
    "OpenAIChatModel",
    "OpenAIResponsesChatModel",
    "OpenAIStreamAggregator",
    "aprobe_capabilities",
    "clear_probe_cache",
    "probe_capabilities",
]
