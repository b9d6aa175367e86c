"""Callbacks: event names, the callback framework and the OpenTelemetry bridge."""

from .events import LOOP_EVENTS, TOOL_EVENTS, ToolCallEvents
from .framework import Callback, CallbackFramework, callback_framework

__all__ = [
    "LOOP_EVENTS",
    "TOOL_EVENTS",
    "Callback",
    "CallbackFramework",
    "ToolCallEvents",
    "callback_framework",
]
