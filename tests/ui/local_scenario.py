"""The browser test's local-model conversation: a weather tool that needs approval, and the
local llama-server (started by the test, its address in the environment) in constrained
mode, made robust as `toolweave demo` makes it: the first reply must call a tool
(tool_choice=required) once (one call per reply), the next one must answer (one tool round
at most)."""

from __future__ import annotations

import os

from toolweave import tool
from toolweave.chat import ChatRequestParameters
from toolweave.providers import OpenAIChatModel
from toolweave.providers.constrained import ConstrainedToolCalling

URL_ENV = "TOOLWEAVE_TEST_LLAMA_URL"
MODEL_ENV = "TOOLWEAVE_TEST_LLAMA_MODEL"
FORECAST = "22 C, sunny"
"""What every forecast says, whatever city the model asks about."""


@tool(strict=False, requires_approval=True)
def get_weather(city: str) -> str:
    """Current weather for a city.

    Args:
        city: city name
    """
    return f"{city}: {FORECAST}"


def model() -> OpenAIChatModel:
    """The local server's model: constrained, greedy, one call, one tool round."""
    return OpenAIChatModel(
        model=os.environ[MODEL_ENV],
        base_url=os.environ[URL_ENV],
        api_key="local",
        tool_calling="constrained",
        constrained=ConstrainedToolCalling(max_calls_per_response=1, max_tool_rounds=1),
        default_parameters=ChatRequestParameters(
            temperature=0, max_tokens=200, tool_choice="required"
        ),
        timeout=120.0,
    )
