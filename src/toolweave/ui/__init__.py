"""Conversations people can see: a `ToolService` stream as AG-UI events and as the Vercel AI
SDK's UI message stream, each protocol's requests as toolweave messages and decisions, and
an ASGI app serving both (plus the `toolweave web` page). Needs the `ui` extra:
`pip install "toolweave[ui]"`."""

try:
    import ag_ui.core  # noqa: F401
    import starlette  # noqa: F401
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError(
        f'toolweave.ui needs the ui extra ({e.name} is missing): pip install "toolweave[ui]"'
    ) from e

from ._ag_ui import STATE_KEY, ag_ui_events, ag_ui_request
from ._ai_sdk import (
    AI_SDK_HEADERS,
    STANDING_PART,
    STATE_PART,
    ai_sdk_chunks,
    ai_sdk_request,
    ai_sdk_sse,
)
from ._app import call_tool, create_app, tool_listing
from ._common import ChatInput, ProtocolRequestError
from ._guard import LocalGuard

__all__ = [
    "AI_SDK_HEADERS",
    "STANDING_PART",
    "STATE_KEY",
    "STATE_PART",
    "ChatInput",
    "LocalGuard",
    "ProtocolRequestError",
    "ag_ui_events",
    "ag_ui_request",
    "ai_sdk_chunks",
    "ai_sdk_request",
    "ai_sdk_sse",
    "call_tool",
    "create_app",
    "tool_listing",
]
