"""Choosing and opening the chat model for `toolweave chat` and `toolweave demo`."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import Any

from rich.console import Console

from ..chat import ChatModel
from ._load import CliError, load_object

__all__ = ["CLOUD_KEYS", "DEFAULT_MODELS", "open_model", "pick_provider"]

DEFAULT_MODELS = {
    "openai": "gpt-4o-mini",
    "anthropic": "claude-3-5-haiku-latest",
    "gemini": "gemini-2.0-flash",
}
"""The model each provider uses when `--model` is not given."""

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

    `provider` is `openai`, `anthropic`, `gemini`, `local`, `auto`, or `MODULE:OBJECT`
    naming a `ChatModel` (or a function returning one).
    """
    provider = pick_provider(provider)
    if provider in DEFAULT_MODELS:
        from ..providers import AnthropicChatModel, GeminiChatModel, OpenAIChatModel

        name = model or DEFAULT_MODELS[provider]
        chat: Any
        if provider == "openai":
            options: dict[str, Any] = {"base_url": base_url}
            if tool_calling:
                options["tool_calling"] = tool_calling
            options.update(model_options or {})
            chat = OpenAIChatModel(model=name, **options)
        elif provider == "anthropic":
            chat = AnthropicChatModel(model=name, base_url=base_url)
        else:
            chat = GeminiChatModel(model=name, base_url=base_url)
        try:
            yield chat, f"{provider} {name}"
        finally:
            chat.close()
        return
    if provider == "local":
        from ..local import ensure_llama_server, find_llama_server, local_chat_model

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
        f"unknown provider {provider!r}: use openai, anthropic, gemini, local, auto "
        "or MODULE:OBJECT"
    )
