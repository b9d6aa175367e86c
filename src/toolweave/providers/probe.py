"""`probe_capabilities`: find out, with tiny real requests, what a chat model (an
OpenAI-compatible endpoint, Gemini, any `ChatModel`) actually does with tools. Protocol
support is not model support: a server may accept `tools` and still answer in plain text."""

from __future__ import annotations

import copy
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Any, Literal

import jsonschema

from ..chat.events import PartialToolCall, ResponseCompleted
from ..chat.messages import UserMessage
from ..chat.model import ChatModel
from ..chat.request import ChatRequest, ChatRequestParameters, ToolChoice
from ..chat.response import ChatResponse
from ..errors import AuthenticationError, ProviderError
from ..tools.card import ToolCard

__all__ = [
    "Capabilities",
    "aprobe_capabilities",
    "clear_probe_cache",
    "probe_capabilities",
]

logger = logging.getLogger("toolweave.providers")

_PROBE_TOOL = ToolCard(
    name="get_weather",
    description="Get the current weather for a city.",
    input_params={
        "type": "object",
        "properties": {"city": {"type": "string", "description": "City name"}},
        "required": ["city"],
    },
)
_JSON_SCHEMA = {
    "type": "object",
    "properties": {"sunny": {"type": "boolean"}},
    "required": ["sunny"],
    "additionalProperties": False,
}


@dataclass(frozen=True, slots=True)
class Capabilities:
    """What an endpoint/model did when asked (each flag is True only if observed).

    - `native_tool_calls`: a tool call came back for an obvious tool question (tool_choice auto)
    - `tool_choice_required`: `tool_choice="required"` produced a call for an unrelated prompt
    - `parallel_tool_calls`: two calls in one reply for a two-city question
    - `streaming_tool_calls`: tool-call deltas arrived in a stream
    - `json_schema`: a `json_schema` response format was honoured (valid JSON, schema-valid)

    `errors` holds the error text of checks that failed with an exception.
    """

    base_url: str
    model: str
    native_tool_calls: bool = False
    tool_choice_required: bool = False
    parallel_tool_calls: bool = False
    streaming_tool_calls: bool = False
    json_schema: bool = False
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def recommended_tool_calling(self) -> Literal["native", "constrained"]:
        """`native` when the model makes native tool calls, else `constrained` when JSON
        schemas are enforced, else `native` (nothing better to offer)."""
        if self.native_tool_calls:
            return "native"
        return "constrained" if self.json_schema else "native"


_cache: dict[tuple[str, str], Capabilities] = {}
"""Keyed by (base_url, model); a model without those is keyed by its identity."""
_lock = threading.Lock()


def clear_probe_cache() -> None:
    """Forget every probe result."""
    with _lock:
        _cache.clear()


def _native(model: ChatModel) -> ChatModel:
    """`model` making native tool calls: the model a constrained layer (`inner`) wraps; a
    provider in another `tool_calling` mode as a copy in native mode."""
    inner = getattr(model, "inner", None)
    if isinstance(inner, ChatModel):
        model = inner
    if getattr(model, "tool_calling", "native") != "native":
        model = copy.copy(model)  # shares the HTTP clients; only the mode differs
        model.tool_calling = "native"  # type: ignore[attr-defined]
    return model


def _identity(model: ChatModel) -> tuple[str, str]:
    base_url, name = getattr(model, "base_url", None), getattr(model, "model", None)
    if isinstance(base_url, str) and isinstance(name, str):
        return base_url, name
    return f"{type(model).__name__}@{id(model):x}", str(name or "")


def _params(**kwargs: Any) -> ChatRequestParameters:
    return ChatRequestParameters(temperature=0, max_tokens=96, **kwargs)


def _calls(response: ChatResponse) -> int:
    return len(response.ai_message.tool_execution_requests)


def _run_checks(model: ChatModel) -> tuple[Capabilities, bool]:
    """The capabilities, and whether every check got an answer from the endpoint (a check
    that failed on the transport — a dropped connection — is not a "no", so such a result is
    not cached)."""
    native = _native(model)
    base_url, model_name = _identity(native)
    tools = (_PROBE_TOOL,)
    results: dict[str, bool] = {}
    errors: dict[str, str] = {}
    answered = [True]

    def check(name: str, run: Any) -> None:
        for attempt in (1, 2):
            try:
                results[name] = bool(run())
                errors.pop(name, None)
                break
            except AuthenticationError:
                raise  # every other check would be refused the same way
            except ProviderError as e:
                errors[name] = f"{type(e).__name__}: {e}"
                results[name] = False
                if e.status is not None:
                    break  # the endpoint answered: a real refusal
                if attempt == 2:
                    answered[0] = False
            except Exception as e:
                errors[name] = f"{type(e).__name__}: {e}"
                results[name] = False
                break
        logger.debug("probe %s %s: %s", base_url, name, results[name])

    check(
        "native_tool_calls",
        lambda: (
            _calls(
                native.chat(
                    ChatRequest(
                        [UserMessage("What is the weather in Paris? Use the get_weather tool.")],
                        _params(tools=tools, tool_choice=ToolChoice.AUTO),
                    )
                )
            )
            > 0
        ),
    )
    check(
        "tool_choice_required",
        lambda: (
            _calls(
                native.chat(
                    ChatRequest(
                        [UserMessage("Say hello.")],
                        _params(tools=tools, tool_choice=ToolChoice.REQUIRED),
                    )
                )
            )
            > 0
        ),
    )
    check(
        "parallel_tool_calls",
        lambda: (
            _calls(
                native.chat(
                    ChatRequest(
                        [
                            UserMessage(
                                "What is the weather in Paris and in Tokyo? Call get_weather "
                                "once for each city, both in this reply."
                            )
                        ],
                        _params(
                            tools=tools, tool_choice=ToolChoice.REQUIRED, parallel_tool_calls=True
                        ),
                    )
                )
            )
            >= 2
        ),
    )

    def streamed() -> bool:
        events = native.stream(
            ChatRequest(
                [UserMessage("What is the weather in Paris? Use the get_weather tool.")],
                _params(tools=tools, tool_choice=ToolChoice.REQUIRED),
            )
        )
        seen = False
        for event in events:
            if isinstance(event, PartialToolCall):
                seen = True
            elif isinstance(event, ResponseCompleted):
                break
        return seen

    check("streaming_tool_calls", streamed)

    def structured() -> bool:
        response = native.chat(
            ChatRequest(
                [UserMessage("Paris is sunny today. Is it sunny? Reply in JSON.")],
                _params(response_format=_JSON_SCHEMA),
            )
        )
        value = json.loads(response.ai_message.text or "")
        jsonschema.validate(value, _JSON_SCHEMA)
        return True

    check("json_schema", structured)
    caps = Capabilities(base_url=base_url, model=model_name, errors=errors, **results)
    return caps, answered[0]


def probe_capabilities(model: ChatModel, *, refresh: bool = False) -> Capabilities:
    """Probe what `model`'s endpoint does with tools (five tiny requests, at temperature 0,
    at most 96 tokens each), cached per (base_url, model); `refresh` probes again. A check
    whose request fails on the transport is tried once more, and a result with such a
    failure is returned but not cached.

    The probe always uses native requests, whatever `model.tool_calling` is (and through a
    `ConstrainedChatModel`, the model it wraps). A missing API key raises
    `MissingApiKeyError` before anything is sent, and a refused key (`AuthenticationError`,
    401/403) ends the probe at its first request; neither is cached.
    """
    native = _native(model)
    check_api_key = getattr(native, "check_api_key", None)
    if callable(check_api_key):
        check_api_key()
    key = _identity(native)
    with _lock:
        hit = _cache.get(key)
    if hit is not None and not refresh:
        return hit
    caps, answered = _run_checks(model)
    logger.info(
        "probed %s %s: native=%s required=%s parallel=%s streaming=%s json_schema=%s",
        caps.base_url,
        caps.model,
        caps.native_tool_calls,
        caps.tool_choice_required,
        caps.parallel_tool_calls,
        caps.streaming_tool_calls,
        caps.json_schema,
    )
    if answered:
        with _lock:
            _cache[key] = caps
    return caps


async def aprobe_capabilities(model: ChatModel, *, refresh: bool = False) -> Capabilities:
    """`probe_capabilities` from async code (runs in a worker thread); call it before the
    first request of an `"auto"` model in async code so that request does not block."""
    import asyncio

    return await asyncio.to_thread(probe_capabilities, model, refresh=refresh)
