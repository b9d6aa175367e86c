"""Choosing and opening the chat model for `toolweave chat` and `toolweave demo`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from rich.console import Console

from ..chat import ChatModel
from ._load import CliError, load_object

__all__ = ["CLOUD_KEYS", "DEFAULT_MODELS", "PROVIDERS", "open_model", "pick_provider"]

AZURE_PROVIDERS = ("azure", "azure-responses")
PROVIDERS = (
    "openai",
    "openai-responses",
    "azure",
    "azure-responses",
    "anthropic",
    "gemini",
    "bedrock",
)
"""The cloud providers `--provider` accepts by name."""

DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "openai-responses": "gpt-5-mini",
    "anthropic": "claude-3-5-haiku-latest",
    "gemini": "gemini-2.0-flash",
    "bedrock": "us.anthropic.claude-3-5-haiku-20241022-v1:0",
}
"""The model each provider uses when `--model` is not given (`azure` needs `--model`, the
deployment name)."""

CLOUD_KEYS = {
    "openai": ("OPENAI_API_KEY",),
    "anthropic": ("ANTHROPIC_API_KEY",),
    "gemini": ("GEMINI_API_KEY", "GOOGLE_API_KEY"),
}
"""The environment variables holding each cloud provider's key, in the order tried."""


def pick_provider(requested: str) -> str:
    """`auto` becomes the first cloud provider whose key is set, else `local`."""
    if requested != "auto":
        return requested
    for provider, keys in CLOUD_KEYS.items():
        if any(os.environ.get(k) for k in keys):
            return provider
    return "local"


@contextlib.contextmanager
def open_model(
    provider: str,
    model: str | None,
    *,
    console: Console,
    base_url: str | None = None,
    tool_calling: str | None = None,
    model_options: dict[str, Any] | None = None,
) -> Iterator[tuple[ChatModel, str]]:
    """Yield `(chat model, description)`; closes the model (and stops a local server).
    `model_options` go to `OpenAIChatModel` (openai and local providers).

    `provider` is one of `PROVIDERS`, `local`, `auto`, or `MODULE:OBJECT` naming a
    `ChatModel` (or a function returning one).
    """
    provider = pick_provider(provider)
    if provider in DEFAULT_MODELS or provider in AZURE_PROVIDERS:
        name = model or DEFAULT_MODELS.get(provider)
        if not name:
            raise CliError(f"--provider {provider} needs --model (the deployment name)")
        chat = _cloud_model(provider, name, base_url, tool_calling, model_options)
        try:
            yield chat, f"{provider} {name}"
        finally:
            chat.close()
        return
    if provider == "local":
        from ..local import ensure_llama_server, find_llama_server, local_chat_model

        if model:
            console.print(
                f"[yellow]warning:[/] the local provider serves SmolLM2-135M only: "
                f"--model {model!r} is ignored (another GGUF file: $TOOLWEAVE_LOCAL_MODEL)",
                soft_wrap=True,
            )

        if find_llama_server() is None:
            console.print(
                "[yellow]Building llama-server (once, ~10 minutes on 2 cores) "
                "for the local model...[/]"
            )
            ensure_llama_server(console=console)
        options = {"tool_calling": tool_calling or "auto", **(model_options or {})}
        with local_chat_model(**options) as chat:
            yield chat, f"local llama-server {chat.model} at {chat.base_url}"
        return
    if ":" in provider:
        obj = load_object(provider)
        if callable(obj) and not isinstance(obj, ChatModel):
            obj = obj()
        if not isinstance(obj, ChatModel):
            raise CliError(f"{provider} is not a ChatModel (needs chat/achat/stream/astream)")
        yield obj, provider
        return
    raise CliError(
        f"unknown provider {provider!r}: use {', '.join(PROVIDERS)}, local, auto or MODULE:OBJECT"
    )


def _cloud_model(
    provider: str,
    name: str,
    base_url: str | None,
    tool_calling: str | None,
    model_options: dict[str, Any] | None,
) -> Any:
    from .. import providers

    if provider == "openai":
        options: dict[str, Any] = {"base_url": base_url}
        if tool_calling:
            options["tool_calling"] = tool_calling
        options.update(model_options or {})
        return providers.OpenAIChatModel(model=name, **options)
    if provider == "openai-responses":
        return providers.OpenAIResponsesChatModel(name, base_url=base_url)
    if provider == "anthropic":
        return providers.AnthropicChatModel(model=name, base_url=base_url)
    if provider == "gemini":
        return providers.GeminiChatModel(model=name, base_url=base_url)
    if provider == "bedrock":
        try:
            return providers.BedrockChatModel(name, base_url=base_url)
        except ImportError:
            raise CliError(
                "--provider bedrock needs botocore: pip install 'toolweave[bedrock]'"
            ) from None
    cls = (
        providers.AzureOpenAIChatModel
        if provider == "azure"
        else providers.AzureOpenAIResponsesChatModel
    )
    try:
        return cls(name, endpoint=base_url)
    except ValueError as e:
        raise CliError(f"{e} (--base-url gives the endpoint)") from None
