"""Interop: toolweave tools in LangChain, pydantic-ai, OpenAI Agents and LlamaIndex, and
their tools in toolweave (docs/interop.md).

One module per framework, each importing its framework when it is imported (nothing here is
imported by `import toolweave`):

- `toolweave.interop.langchain`: `to_langchain`, `from_langchain` (extra `langchain`);
- `toolweave.interop.pydantic_ai`: `to_pydantic_ai`, `from_pydantic_ai` (extra `pydantic-ai`);
- `toolweave.interop.openai_agents`: `to_openai_agents`, `from_openai_agents`
  (extra `openai-agents`);
- `toolweave.interop.llamaindex`: `to_llamaindex`, `from_llamaindex` (extra `llamaindex`).

The names are also reachable from this package (`from toolweave.interop import
to_langchain`), which imports the framework's module on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .langchain import LangChainTool, ToolweaveLangChainTool, from_langchain, to_langchain
    from .llamaindex import LlamaIndexTool, ToolweaveLlamaIndexTool, from_llamaindex, to_llamaindex
    from .openai_agents import OpenAIAgentsTool, from_openai_agents, to_openai_agents
    from .pydantic_ai import PydanticAITool, from_pydantic_ai, to_pydantic_ai

_EXPORTS: dict[str, str] = {
    "LangChainTool": "langchain",
    "LlamaIndexTool": "llamaindex",
    "OpenAIAgentsTool": "openai_agents",
    "PydanticAITool": "pydantic_ai",
    "ToolweaveLangChainTool": "langchain",
    "ToolweaveLlamaIndexTool": "llamaindex",
    "from_langchain": "langchain",
    "from_llamaindex": "llamaindex",
    "from_openai_agents": "openai_agents",
    "from_pydantic_ai": "pydantic_ai",
    "to_langchain": "langchain",
    "to_llamaindex": "llamaindex",
    "to_openai_agents": "openai_agents",
    "to_pydantic_ai": "pydantic_ai",
}

__all__ = [
    "LangChainTool",
    "LlamaIndexTool",
    "OpenAIAgentsTool",
    "PydanticAITool",
    "ToolweaveLangChainTool",
    "ToolweaveLlamaIndexTool",
    "from_langchain",
    "from_llamaindex",
    "from_openai_agents",
    "from_pydantic_ai",
    "to_langchain",
    "to_llamaindex",
    "to_openai_agents",
    "to_pydantic_ai",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'toolweave.interop' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS])
