"""Constrained tool calling and capability probing against the scripted OpenAI-compatible
server (offline; the same flows run against the real local model in test_local_model.py)."""

from __future__ import annotations

import json
from typing import Any

import jsonschema
import pytest
from pydantic import BaseModel

from servers.provider_server import ProviderServer
from toolweave import (
    ChatCompleted,
    ChatRequest,
    ChatRequestParameters,
    CompleteToolCall,
    PartialToolCall,
    TextDelta,
    ToolExecutionResultMessage,
    ToolService,
    UserMessage,
    tool,
)
from toolweave.providers import (
    ConstrainedToolCalling,
    OpenAIChatModel,
    clear_probe_cache,
    probe_capabilities,
)


@tool
def get_weather(city: str) -> str:
    """Current weather for a city."""
    return f"{city}: 14 degrees, rain"


class Box(BaseModel):
    """A box."""

    width: int
    height: int


@tool
def area(box: Box, scale: int = 1) -> int:
    """Area of a box."""
    return box.width * box.height * scale


def completion(content: str) -> dict[str, Any]:
    return {
        "json": {
            "id": "x",
            "model": "smol",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    }


def sse(*pieces: str) -> dict[str, Any]:
    chunks = [
        "data: "
        + json.dumps(
            {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
        )
        + "\n\n"
        for piece in pieces
    ]
    chunks.append(
        "data: "
        + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        + "\n\n"
    )
    chunks.append("data: [DONE]\n\n")
    return {"sse": chunks}


CALL = '{"tool_calls":[{"name":"get_weather","arguments":{"city":"Paris"}}]}'
ANSWER = '{"answer":"Rain in Paris."}'


def model(server: ProviderServer, **options: Any) -> OpenAIChatModel:
    options.setdefault("tool_calling", "constrained")
    return OpenAIChatModel("smol", api_key="k", base_url=f"{server.url}/v1", **options)


def schema_name(body: dict[str, Any]) -> str:
    return str(body["response_format"]["json_schema"]["name"])


def test_loop_with_constrained_calls(scripted: ProviderServer) -> None:
    scripted.enqueue(completion(CALL), completion(ANSWER))
    service = ToolService().tools(get_weather)
    with model(scripted) as m:
        result = service.chat(m, ChatRequestParameters(temperature=0), "Weather in Paris?")
    assert result.text == "Rain in Paris."
    [execution] = result.tool_executions
    assert execution.request.name == "get_weather"
    assert json.loads(execution.request.arguments) == {"city": "Paris"}
    answered = [m for m in result.messages if isinstance(m, ToolExecutionResultMessage)]
    assert [a.id for a in answered] == [execution.request.id]
    assert execution.request.id.startswith("call_")

    first, second = scripted.bodies
    assert "tools" not in first and "tool_choice" not in first
    assert (
        first["messages"][0]["role"] == "system"
        and "get_weather" in first["messages"][0]["content"]
    )
    schema = first["response_format"]["json_schema"]["schema"]
    jsonschema.validate(json.loads(CALL), schema)
    jsonschema.validate(json.loads(ANSWER), schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tool_calls": [{"name": "nope", "arguments": {}}]}, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"tool_calls": [{"name": "get_weather", "arguments": {}}]}, schema)
    roles = [msg["role"] for msg in second["messages"]]
    assert roles == ["system", "user", "assistant", "user"]
    assert json.loads(second["messages"][2]["content"])["tool_calls"][0]["name"] == "get_weather"
    assert "14 degrees" in second["messages"][3]["content"]
    assert all("tool_calls" not in msg and msg["role"] != "tool" for msg in second["messages"])


def test_a_repeated_call_is_not_run_again_and_the_model_is_asked_for_an_answer(
    scripted: ProviderServer,
) -> None:
    scripted.enqueue(completion(CALL), completion(CALL), completion(ANSWER))
    service = ToolService().tools(get_weather)
    with model(scripted) as m:
        result = service.chat(m, None, "Weather in Paris?")
    assert result.text == "Rain in Paris." and len(result.tool_executions) == 1
    assert [schema_name(b) for b in scripted.bodies] == [
        "tool_calls_or_answer",
        "tool_calls_or_answer",
        "answer",
    ]
    # the follow-up sends the same conversation (the repeated reply is not in it); only
    # the system prompt now asks for an answer
    assert scripted.bodies[2]["messages"][1:] == scripted.bodies[1]["messages"][1:]
    assert scripted.bodies[2]["messages"][0]["content"].endswith('Reply with {"answer": ...} only.')
    answer_schema = scripted.bodies[2]["response_format"]["json_schema"]["schema"]
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(json.loads(CALL), answer_schema)
    final = result.final_response
    info = final.ai_message.attributes["constrained"]
    assert info["reason"] == "repeated call" and info["repeated_calls"] == ["get_weather"]
    assert final.usage is not None and final.usage.total_tokens == 30  # both requests
    assert [type(m).__name__ for m in result.messages] == [
        "UserMessage",
        "AiMessage",
        "ToolExecutionResultMessage",
        "AiMessage",
    ]


@pytest.mark.parametrize("face", ["stream", "astream", "achat"])
def test_a_repeated_call_is_not_run_again_in_every_face(
    scripted: ProviderServer, face: str
) -> None:
    import asyncio

    service = ToolService().tools(get_weather)
    if face == "achat":
        scripted.enqueue(completion(CALL), completion(CALL), completion(ANSWER))

        async def run() -> Any:
            async with model(scripted) as m:
                return await service.achat(m, None, "Weather in Paris?")

        result = asyncio.run(run())
        events: list[Any] = []
    else:
        scripted.enqueue(sse(CALL), sse(CALL[:9], CALL[9:]), sse(ANSWER[:12], ANSWER[12:]))
        if face == "stream":
            with model(scripted) as m:
                events = list(service.chat_stream(m, None, "Weather in Paris?"))
        else:

            async def collect() -> list[Any]:
                async with model(scripted) as m:
                    return [e async for e in service.achat_stream(m, None, "Weather in Paris?")]

            events = asyncio.run(collect())
        assert len([e for e in events if isinstance(e, CompleteToolCall)]) == 1
        assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Rain in Paris."
        completed = events[-1]
        assert isinstance(completed, ChatCompleted)
        result = completed.result
    assert result.text == "Rain in Paris." and len(result.tool_executions) == 1
    assert [schema_name(b) for b in scripted.bodies][-1] == "answer"
    info = result.final_response.ai_message.attributes["constrained"]
    assert info["repeated_calls"] == ["get_weather"]


@pytest.mark.parametrize("face", ["chat", "stream"])
def test_the_model_alone_asks_again_after_a_repeat(scripted: ProviderServer, face: str) -> None:
    """The sync faces of the model itself, as a caller without ToolService uses them."""
    from toolweave import AiMessage, ResponseCompleted, ToolExecutionRequest

    call = ToolExecutionRequest(id="c1", name="get_weather", arguments='{"city": "Paris"}')
    request = ChatRequest(
        [
            UserMessage("Weather in Paris?"),
            AiMessage(tool_execution_requests=[call]),
            ToolExecutionResultMessage(id="c1", tool_name="get_weather", text="rain"),
        ],
        ChatRequestParameters(tools=[get_weather.card]),
    )
    with model(scripted) as m:
        if face == "chat":
            scripted.enqueue(completion(CALL), completion(ANSWER))
            response = m.chat(request)
        else:
            scripted.enqueue(sse(CALL), sse(ANSWER))
            events = list(m.stream(request))
            assert not [e for e in events if isinstance(e, (PartialToolCall, CompleteToolCall))]
            assert [type(e) for e in events].count(ResponseCompleted) == 1
            assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Rain in Paris."
            response = events[-1].response
    assert response.ai_message.text == "Rain in Paris."
    assert not response.ai_message.tool_execution_requests
    assert response.ai_message.attributes["constrained"]["repeated_calls"] == ["get_weather"]
    assert [schema_name(b) for b in scripted.bodies] == ["tool_calls_or_answer", "answer"]


def test_a_reply_mixing_a_repeat_and_a_new_call_runs_only_the_new_one(
    scripted: ProviderServer,
) -> None:
    mixed = json.dumps(
        {
            "tool_calls": [
                {"name": "get_weather", "arguments": {"city": "Paris"}},
                {"name": "get_weather", "arguments": {"city": "Lyon"}},
            ]
        }
    )
    scripted.enqueue(completion(CALL), completion(mixed), completion(ANSWER))
    with model(scripted) as m:
        result = ToolService().tools(get_weather).chat(m, None, "Weather in Paris and Lyon?")
    cities = [json.loads(e.request.arguments)["city"] for e in result.tool_executions]
    assert cities == ["Paris", "Lyon"]
    second_reply = result.intermediate_responses[1].ai_message
    assert second_reply.attributes["constrained"]["repeated_calls"] == ["get_weather"]
    # no call was repeated in the history, so the third request may still call tools
    assert [schema_name(b) for b in scripted.bodies] == ["tool_calls_or_answer"] * 3


def test_policy_is_configurable(scripted: ProviderServer) -> None:
    scripted.enqueue(completion(CALL), completion(CALL), completion(ANSWER))
    service = ToolService().tools(get_weather)
    lax = ConstrainedToolCalling(answer_after_repeat=False, max_tool_rounds=None)
    with model(scripted, constrained=lax) as m:
        service.chat(m, None, "Weather in Paris?")
    assert [schema_name(b) for b in scripted.bodies] == ["tool_calls_or_answer"] * 3

    scripted.reset()
    scripted.enqueue(completion(CALL), completion(ANSWER))
    with model(scripted, constrained=ConstrainedToolCalling(max_tool_rounds=1)) as m:
        service.chat(m, None, "Weather in Paris?")
    assert [schema_name(b) for b in scripted.bodies] == ["tool_calls_or_answer", "answer"]


def test_identical_calls_in_one_reply_run_once_and_max_items_bounds_them(
    scripted: ProviderServer,
) -> None:
    twice = json.dumps(
        {"tool_calls": [{"name": "get_weather", "arguments": {"city": "Paris"}}] * 2}
    )
    scripted.enqueue(completion(twice), completion(ANSWER))
    with model(scripted, constrained=ConstrainedToolCalling(max_calls_per_response=2)) as m:
        result = ToolService().tools(get_weather).chat(m, None, "Weather in Paris?")
    assert len(result.tool_executions) == 1
    schema = scripted.bodies[0]["response_format"]["json_schema"]["schema"]
    assert schema["anyOf"][0]["properties"]["tool_calls"]["maxItems"] == 2


def test_tool_choice_shapes_the_schema(scripted: ProviderServer) -> None:
    m = model(scripted)
    request = ChatRequest(
        [UserMessage("hi")],
        ChatRequestParameters(tools=[get_weather.card, area.card], tool_choice="required"),
    )
    schema = m.build_request_body(request)["response_format"]["json_schema"]["schema"]
    assert "anyOf" not in schema and schema["required"] == ["tool_calls"]
    none = ChatRequest(
        [UserMessage("hi")], ChatRequestParameters(tools=[get_weather.card], tool_choice="none")
    )
    assert schema_name(m.build_request_body(none)) == "answer"
    one = ChatRequest(
        [UserMessage("hi")],
        ChatRequestParameters(tools=[get_weather.card, area.card], tool_choice="area"),
    )
    items = m.build_request_body(one)["response_format"]["json_schema"]["schema"]["properties"][
        "tool_calls"
    ]["items"]
    assert items["properties"]["name"]["enum"] == ["area"]
    plain = ChatRequest([UserMessage("hi")])
    assert "response_format" not in m.build_request_body(plain)


def test_nested_model_arguments_keep_their_refs(scripted: ProviderServer) -> None:
    scripted.enqueue(
        completion(
            '{"tool_calls":[{"name":"area","arguments":{"box":{"width":2,"height":3},"scale":2}}]}'
        ),
        completion('{"answer":"12"}'),
    )
    with model(scripted) as m:
        result = ToolService().tools(get_weather, area).chat(m, None, "Area?")
    assert result.tool_executions[0].result_text == "12"
    schema = scripted.bodies[0]["response_format"]["json_schema"]["schema"]
    good = {"tool_calls": [{"name": "area", "arguments": {"box": {"width": 2, "height": 3}}}]}
    jsonschema.validate(good, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate(
            {"tool_calls": [{"name": "area", "arguments": {"box": {"width": "x"}}}]}, schema
        )


def test_streaming_answer_text_and_tool_calls(scripted: ProviderServer) -> None:
    answer = 'Rain "today"\nin Paris, café ☔ 𝄞.'
    encoded = json.dumps({"answer": answer})  # escapes non-ASCII as \\u sequences
    pieces = [encoded[i : i + 3] for i in range(0, len(encoded), 3)]
    scripted.enqueue(
        sse('{"tool_c', 'alls":[{"name":"get_weather","arguments":{"city":"Paris"}}]}'),
        sse(*pieces),
    )
    service = ToolService().tools(get_weather)
    with model(scripted) as m:
        events = list(service.chat_stream(m, None, "Weather in Paris?"))
    partial = [e for e in events if isinstance(e, PartialToolCall)]
    complete = [e for e in events if isinstance(e, CompleteToolCall)]
    assert len(partial) == 1 and len(complete) == 1
    assert complete[0].request.name == "get_weather"
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert text == answer
    result = events[-1]
    assert isinstance(result, ChatCompleted) and result.result.text == answer
    assert len([e for e in events if isinstance(e, TextDelta)]) > 1  # streamed, not at once
    assert scripted.bodies[0]["stream"] is True


@pytest.mark.parametrize("split", range(1, 40))
def test_streamed_answer_survives_any_split(scripted: ProviderServer, split: int) -> None:
    answer = 'a\\b "q" \u00e9\u2603\U0001d11e end'
    encoded = json.dumps({"answer": answer})
    scripted.enqueue(sse(encoded[:split], encoded[split:]))
    with model(scripted) as m:
        events = list(
            m.stream(
                ChatRequest([UserMessage("x")], ChatRequestParameters(tools=[get_weather.card]))
            )
        )
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == answer


def test_non_json_reply_becomes_text(scripted: ProviderServer) -> None:
    scripted.enqueue(completion("plain words"))
    with model(scripted) as m:
        result = ToolService().tools(get_weather).chat(m, None, "hi")
    assert result.text == "plain words" and not result.tool_executions


def test_structured_output_through_the_answer_branch(scripted: ProviderServer) -> None:
    scripted.enqueue(completion('{"answer":{"width":2,"height":5}}'))
    with model(scripted) as m:
        result = ToolService().tools(area).chat(m, None, "A box?", output_type=Box)
    assert result.output == Box(width=2, height=5)
    answer = scripted.bodies[0]["response_format"]["json_schema"]["schema"]["anyOf"][1]
    assert answer["properties"]["answer"]["required"] == ["width", "height"]


def _probe_replies(native: bool) -> list[dict[str, Any]]:
    if native:
        call = {
            "json": {
                "choices": [
                    {
                        "message": {
                            "role": "assistant",
                            "content": None,
                            "tool_calls": [
                                {
                                    "id": "c1",
                                    "type": "function",
                                    "function": {
                                        "name": "get_weather",
                                        "arguments": '{"city":"Paris"}',
                                    },
                                }
                            ],
                        },
                        "finish_reason": "tool_calls",
                    }
                ]
            }
        }
        return [call, call, call, sse("x"), completion('{"sunny": true}')]
    return [
        completion("It is sunny."),
        completion("Hello!"),
        completion("Paris and Tokyo."),
        sse("Sunny."),
        completion('{"sunny": true}'),
    ]


def test_probe_and_auto(scripted: ProviderServer) -> None:
    clear_probe_cache()
    scripted.enqueue(*_probe_replies(native=False))
    m = model(scripted, tool_calling="auto")
    caps = probe_capabilities(m)
    assert not caps.native_tool_calls and not caps.tool_choice_required
    assert not caps.parallel_tool_calls and not caps.streaming_tool_calls
    assert caps.json_schema and caps.recommended_tool_calling == "constrained"
    assert len(scripted.bodies) == 5
    assert all("tools" in b for b in scripted.bodies[:4])
    assert scripted.bodies[1]["tool_choice"] == "required"
    assert scripted.bodies[2]["parallel_tool_calls"] is True
    assert scripted.bodies[3]["stream"] is True
    assert scripted.bodies[4]["response_format"]["type"] == "json_schema"
    # cached per (base_url, model): "auto" now builds constrained requests without probing
    request = ChatRequest([UserMessage("x")], ChatRequestParameters(tools=[get_weather.card]))
    body = m.build_request_body(request)
    assert "tools" not in body and schema_name(body) == "tool_calls_or_answer"
    assert len(scripted.bodies) == 5
    clear_probe_cache()


def test_probe_native_endpoint_keeps_native_calls(scripted: ProviderServer) -> None:
    clear_probe_cache()
    scripted.enqueue(*_probe_replies(native=True))
    m = model(scripted, tool_calling="auto")
    request = ChatRequest([UserMessage("x")], ChatRequestParameters(tools=[get_weather.card]))
    body = m.build_request_body(request)  # probes first
    caps = probe_capabilities(m)
    assert caps.native_tool_calls and caps.tool_choice_required and caps.json_schema
    assert caps.recommended_tool_calling == "native"
    assert body["tools"][0]["function"]["name"] == "get_weather" and "response_format" not in body
    clear_probe_cache()


def test_probe_does_not_cache_transport_failures() -> None:
    import socket

    from toolweave.providers import clear_probe_cache

    with socket.socket() as s:  # a loopback port with nothing listening
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    clear_probe_cache()
    with OpenAIChatModel(
        "m", api_key="k", base_url=f"http://127.0.0.1:{port}/v1", max_retries=0, timeout=5
    ) as model:
        first = probe_capabilities(model)
        second = probe_capabilities(model)
    assert not first.json_schema and "connection" in first.errors["json_schema"]
    assert second is not first  # probed again: a dropped connection is not a "no"
