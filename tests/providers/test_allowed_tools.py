"""`ToolChoice.allowed_tools(...)`: an allowed-tools subset, mapped per provider and checked
against the official SDKs' request types (OpenAI Chat and Responses `allowed_tools`,
Gemini `allowedFunctionNames`; Anthropic and Bedrock have no such field and are sent the
subset's tools alone); then a toolset choosing the subset per round, through a
`ToolService` and each provider against the loopback server."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest

from servers.provider_server import ProviderServer, load_transcript
from toolweave import ToolService, tool
from toolweave.chat import ChatRequest, ChatRequestParameters, ToolChoice, UserMessage
from toolweave.errors import UnsupportedOptionError
from toolweave.providers import (
    AnthropicChatModel,
    BedrockChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    OpenAIResponsesChatModel,
)
from toolweave.tools import ToolCard
from toolweave.toolsets import FunctionToolset, StepContext

from .conftest import SECRET, check_anthropic_request, check_gemini_request, check_openai_request
from .test_bedrock import AKID, MODEL, REGION, SECRET_KEY, check_body, converse
from .test_openai_responses import _call, _message, _response, check_responses_request


def _card(name: str) -> ToolCard:
    return ToolCard(
        name=name,
        description=f"the {name} tool",
        input_params={
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    )


CARDS = [_card("get_weather"), _card("get_time"), _card("get_news")]
TWO = ToolChoice.allowed_tools(["get_weather", "get_time"])
TWO_REQUIRED = ToolChoice.allowed_tools(["get_weather", "get_time"], required=True)


def _body(model: Any, choice: ToolChoice, **params: Any) -> dict[str, Any]:
    request = ChatRequest(
        [UserMessage("hi")], ChatRequestParameters(tools=CARDS, tool_choice=choice, **params)
    )
    body: dict[str, Any] = model.build_request_body(request)
    return body


def _names(tools: Sequence[dict[str, Any]], key: str) -> list[str]:
    return [t[key]["name"] if key else t["name"] for t in tools]


# ToolChoice itself ---------------------------------------------------------------------------
def test_an_allowed_subset_is_a_tool_choice_of_its_own() -> None:
    assert TWO.mode == "auto" and TWO.allowed == ("get_weather", "get_time")
    assert TWO_REQUIRED.mode == "required" and TWO_REQUIRED.forces and not TWO.forces
    assert (
        repr(TWO_REQUIRED) == "ToolChoice.allowed_tools(['get_weather', 'get_time'], required=True)"
    )
    assert ToolChoice.allowed_tools(["a", "a", "b"]).allowed == ("a", "b")
    assert TWO.names_in(["get_news", "get_time", "get_weather"]) == ["get_time", "get_weather"]
    assert TWO.missing(["get_time"]) == ["get_weather"]
    assert TWO.renamed(lambda n: f"x_{n}").allowed == ("x_get_weather", "x_get_time")
    with pytest.raises(ValueError, match="at least one"):
        ToolChoice.allowed_tools([])
    with pytest.raises(ValueError, match="'auto' or 'required'"):
        ToolChoice("none", allowed=("a",))


# the wire, per provider -----------------------------------------------------------------------
@pytest.mark.parametrize(("choice", "mode"), [(TWO, "auto"), (TWO_REQUIRED, "required")])
def test_openai_chat_sends_allowed_tools(choice: ToolChoice, mode: str) -> None:
    body = _body(OpenAIChatModel("m", api_key="k"), choice)
    assert _names(body["tools"], "function") == ["get_weather", "get_time", "get_news"]
    assert body["tool_choice"] == {
        "type": "allowed_tools",
        "allowed_tools": {
            "mode": mode,
            "tools": [
                {"type": "function", "function": {"name": "get_weather"}},
                {"type": "function", "function": {"name": "get_time"}},
            ],
        },
    }
    check_openai_request(body)


@pytest.mark.parametrize(("choice", "mode"), [(TWO, "auto"), (TWO_REQUIRED, "required")])
def test_openai_responses_sends_allowed_tools(choice: ToolChoice, mode: str) -> None:
    body = _body(OpenAIResponsesChatModel("m", api_key="k"), choice)
    assert _names(body["tools"], "") == ["get_weather", "get_time", "get_news"]
    assert body["tool_choice"] == {
        "type": "allowed_tools",
        "mode": mode,
        "tools": [
            {"type": "function", "name": "get_weather"},
            {"type": "function", "name": "get_time"},
        ],
    }
    check_responses_request(body)


@pytest.mark.parametrize(("choice", "mode"), [(TWO, "VALIDATED"), (TWO_REQUIRED, "ANY")])
def test_gemini_sends_allowed_function_names(choice: ToolChoice, mode: str) -> None:
    from google.genai import types

    body = _body(GeminiChatModel("gemini-2.5-flash", api_key="k"), choice)
    declared = body["tools"][0]["functionDeclarations"]
    assert [d["name"] for d in declared] == ["get_weather", "get_time", "get_news"]
    config = body["toolConfig"]["functionCallingConfig"]
    assert config == {"mode": mode, "allowedFunctionNames": ["get_weather", "get_time"]}
    check_gemini_request(body)
    parsed = types.ToolConfig.model_validate(body["toolConfig"]).function_calling_config
    assert parsed is not None and parsed.mode == types.FunctionCallingConfigMode(mode)
    assert parsed.allowed_function_names == ["get_weather", "get_time"]


@pytest.mark.parametrize(
    ("choice", "sent", "wire"),
    [
        (TWO, ["get_weather", "get_time"], {"type": "auto"}),
        (TWO_REQUIRED, ["get_weather", "get_time"], {"type": "any"}),
        (
            ToolChoice.allowed_tools(["get_time"], required=True),
            ["get_time"],
            {"type": "tool", "name": "get_time"},
        ),
    ],
)
def test_anthropic_is_sent_the_subsets_tools_alone(
    choice: ToolChoice, sent: list[str], wire: dict[str, Any]
) -> None:
    body = _body(AnthropicChatModel("claude-sonnet-4-5", api_key="k"), choice)
    assert _names(body["tools"], "") == sent
    assert body["tool_choice"] == wire
    check_anthropic_request(body)


@pytest.mark.parametrize(
    ("choice", "sent", "wire"),
    [
        (TWO, ["get_weather", "get_time"], {"auto": {}}),
        (TWO_REQUIRED, ["get_weather", "get_time"], {"any": {}}),
        (
            ToolChoice.allowed_tools(["get_time"], required=True),
            ["get_time"],
            {"tool": {"name": "get_time"}},
        ),
    ],
)
def test_bedrock_is_sent_the_subsets_tools_alone(
    choice: ToolChoice, sent: list[str], wire: dict[str, Any]
) -> None:
    model = BedrockChatModel(
        MODEL, region=REGION, aws_access_key_id=AKID, aws_secret_access_key=SECRET_KEY
    )
    body = _body(model, choice)
    assert _names(body["toolConfig"]["tools"], "toolSpec") == sent
    assert body["toolConfig"]["toolChoice"] == wire
    check_body(body, stream=False)


def _bedrock() -> BedrockChatModel:
    return BedrockChatModel(
        MODEL, region=REGION, aws_access_key_id=AKID, aws_secret_access_key=SECRET_KEY
    )


@pytest.mark.parametrize(
    "make",
    [
        lambda: OpenAIChatModel("m", api_key="k"),
        lambda: OpenAIResponsesChatModel("m", api_key="k"),
        lambda: GeminiChatModel("gemini-2.5-flash", api_key="k"),
        lambda: AnthropicChatModel("claude-sonnet-4-5", api_key="k"),
        _bedrock,
    ],
    ids=["openai", "responses", "gemini", "anthropic", "bedrock"],
)
def test_a_subset_naming_a_tool_not_offered_is_refused(make: Any) -> None:
    with pytest.raises(UnsupportedOptionError, match="'get_mail'"):
        _body(make(), ToolChoice.allowed_tools(["get_time", "get_mail"]))
    with pytest.raises(UnsupportedOptionError, match="tool_choice"):
        make().build_request_body(
            ChatRequest([UserMessage("hi")], ChatRequestParameters(tool_choice=TWO))
        )


# per round, through the loop and the loopback server ---------------------------------------
@tool
def get_weather(city: str) -> str:
    """The weather in a city."""
    return f"sunny in {city}"


@tool
def get_time(city: str) -> str:
    """The time in a city."""
    return "12:00"


@tool
def get_news(city: str) -> str:
    """The news of a city."""
    return "nothing new"


def _per_round(ctx: StepContext, cards: list[ToolCard]) -> ToolChoice:
    """Round 0: one of weather and time must be called; then: only time, if any."""
    if ctx.round == 0:
        return ToolChoice.allowed_tools(["get_weather", "get_time"], required=True)
    return ToolChoice.allowed_tools(["get_time"])


def _weather_then_answer(provider: str) -> list[dict[str, Any]]:
    if provider == "responses":
        call = _call("call_w1", "get_weather", '{"city":"杭州"}', "fc_w1")
        return [{"json": _response([call])}, {"json": _response([_message("晴")])}]
    if provider == "bedrock":
        use = {"toolUse": {"toolUseId": "tu_1", "name": "get_weather", "input": {"city": "杭州"}}}
        return [
            {"json": converse([use], "tool_use")},
            {"json": converse([{"text": "晴"}], "end_turn")},
        ]
    name = {"openai": "openai/weather_seed", "anthropic": "anthropic/weather_seed"}.get(
        provider, "gemini/weather_thought_signature"
    )
    return [e["response"] for e in load_transcript(name)["exchanges"]]


def _loopback(provider: str, url: str) -> Any:
    if provider == "openai":
        return OpenAIChatModel("gpt-4o-mini", api_key=SECRET, base_url=f"{url}/v1")
    if provider == "responses":
        return OpenAIResponsesChatModel("gpt-5-mini", api_key=SECRET, base_url=f"{url}/v1")
    if provider == "anthropic":
        return AnthropicChatModel("claude-sonnet-4-5", api_key=SECRET, base_url=url)
    if provider == "gemini":
        return GeminiChatModel("gemini-2.5-flash", api_key=SECRET, base_url=url)
    return BedrockChatModel(
        MODEL,
        region=REGION,
        aws_access_key_id=AKID,
        aws_secret_access_key=SECRET_KEY,
        base_url=url,
        max_tokens=512,
    )


ALL = ["get_weather", "get_time", "get_news"]
EXPECTED: dict[str, list[tuple[list[str], Any]]] = {
    # per round: the tools sent, the choice sent
    "openai": [
        (
            ALL,
            {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "required",
                    "tools": [
                        {"type": "function", "function": {"name": "get_weather"}},
                        {"type": "function", "function": {"name": "get_time"}},
                    ],
                },
            },
        ),
        (
            ALL,
            {
                "type": "allowed_tools",
                "allowed_tools": {
                    "mode": "auto",
                    "tools": [{"type": "function", "function": {"name": "get_time"}}],
                },
            },
        ),
    ],
    "responses": [
        (
            ALL,
            {
                "type": "allowed_tools",
                "mode": "required",
                "tools": [
                    {"type": "function", "name": "get_weather"},
                    {"type": "function", "name": "get_time"},
                ],
            },
        ),
        (
            ALL,
            {
                "type": "allowed_tools",
                "mode": "auto",
                "tools": [{"type": "function", "name": "get_time"}],
            },
        ),
    ],
    "gemini": [
        (ALL, {"mode": "ANY", "allowedFunctionNames": ["get_weather", "get_time"]}),
        (ALL, {"mode": "VALIDATED", "allowedFunctionNames": ["get_time"]}),
    ],
    "anthropic": [
        (["get_weather", "get_time"], {"type": "any"}),
        (["get_time"], {"type": "auto"}),
    ],
    "bedrock": [
        (["get_weather", "get_time"], {"any": {}}),
        (["get_time"], {"auto": {}}),
    ],
}


def _sent(provider: str, body: dict[str, Any]) -> tuple[list[str], Any]:
    if provider == "openai":
        check_openai_request(body)
        return _names(body["tools"], "function"), body["tool_choice"]
    if provider == "responses":
        check_responses_request(body)
        return _names(body["tools"], ""), body["tool_choice"]
    if provider == "anthropic":
        check_anthropic_request(body)
        return _names(body["tools"], ""), body["tool_choice"]
    if provider == "gemini":
        check_gemini_request(body)
        declared = body["tools"][0]["functionDeclarations"]
        return [d["name"] for d in declared], body["toolConfig"]["functionCallingConfig"]
    check_body(body, stream=False)
    config = body["toolConfig"]
    return _names(config["tools"], "toolSpec"), config["toolChoice"]


@pytest.mark.parametrize("provider", list(EXPECTED))
def test_a_toolset_choosing_per_round_reaches_each_provider(
    server: ProviderServer, provider: str
) -> None:
    server.enqueue(*_weather_then_answer(provider))
    toolset = FunctionToolset(get_weather, get_time, get_news).choosing(_per_round)
    with _loopback(provider, server.url) as model:
        result = ToolService(toolsets=[toolset]).chat(model, None, "杭州今天天气怎么样？")
    assert [e.request.name for e in result.tool_executions] == ["get_weather"]
    bodies = server.bodies
    assert len(bodies) == 2
    assert [_sent(provider, b) for b in bodies] == EXPECTED[provider]
    json.dumps(bodies)  # sent as JSON
