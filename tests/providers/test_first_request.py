"""What a new user meets on the first request: a missing API key is a typed error before
anything is sent (only for the provider's own endpoint: a keyless compatible server keeps
working), a transport error says why, and a local server that timed out is not retried."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest

from servers.provider_server import ProviderServer
from toolweave import (
    ChatRequest,
    ChatRequestParameters,
    MissingApiKeyError,
    ProviderError,
    UserMessage,
)
from toolweave.errors import AuthenticationError
from toolweave.local import LlamaServer
from toolweave.local.server import DEFAULT_MAX_TOKENS
from toolweave.providers import (
    AnthropicChatModel,
    GeminiChatModel,
    OpenAIChatModel,
    clear_probe_cache,
    probe_capabilities,
)

from .conftest import no_sleep

KEY_VARS = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY")


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for var in (*KEY_VARS, "OPENAI_BASE_URL", "ANTHROPIC_BASE_URL"):
        monkeypatch.delenv(var, raising=False)


def _recording_client(sent: list[httpx2.Request]) -> httpx2.Client:
    def handler(request: httpx2.Request) -> httpx2.Response:
        sent.append(request)
        return httpx2.Response(500)

    return httpx2.Client(transport=httpx2.MockTransport(handler))


CLOUD = [
    (OpenAIChatModel, "gpt-4o-mini", "OPENAI_API_KEY"),
    (AnthropicChatModel, "claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    (GeminiChatModel, "gemini-2.5-flash", "GEMINI_API_KEY"),
]


@pytest.mark.parametrize(("cls", "name", "var"), CLOUD, ids=lambda v: getattr(v, "__name__", v))
async def test_a_missing_key_is_a_typed_error_before_anything_is_sent(
    cls: Any, name: str, var: str
) -> None:
    sent: list[httpx2.Request] = []
    model = cls(name, http_client=_recording_client(sent))
    request = ChatRequest([UserMessage("hi")])
    with pytest.raises(MissingApiKeyError) as caught:
        model.chat(request)
    message = str(caught.value)
    assert var in message and f"{cls.__name__}(api_key=...)" in message
    assert caught.value.env_var == var and isinstance(caught.value, AuthenticationError)
    with pytest.raises(MissingApiKeyError):
        list(model.stream(request))
    with pytest.raises(MissingApiKeyError):
        await model.achat(request)
    with pytest.raises(MissingApiKeyError):
        [e async for e in model.astream(request)]
    assert sent == []
    # building a body offline needs no key
    assert model.build_request_body(request)


def test_a_key_from_the_environment_or_a_header_is_enough(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    sent: list[httpx2.Request] = []
    monkeypatch.setenv("GOOGLE_API_KEY", "AIza-from-env-000000000000")
    gemini = GeminiChatModel("gemini-2.5-flash", http_client=_recording_client(sent), max_retries=0)
    with pytest.raises(ProviderError) as caught:
        gemini.chat(ChatRequest([UserMessage("hi")]))
    assert not isinstance(caught.value, MissingApiKeyError) and caught.value.status == 500
    own_header = OpenAIChatModel(
        "gpt-4o-mini",
        headers={"Authorization": "Bearer from-a-proxy"},
        http_client=_recording_client(sent),
        max_retries=0,
    )
    with pytest.raises(ProviderError) as caught:
        own_header.chat(ChatRequest([UserMessage("hi")]))
    assert not isinstance(caught.value, MissingApiKeyError)
    assert len(sent) == 2


def test_a_keyless_compatible_server_keeps_working(server: ProviderServer) -> None:
    server.enqueue({"json": {"choices": [{"message": {"role": "assistant", "content": "hi"}}]}})
    with OpenAIChatModel("local", base_url=f"{server.url}/v1") as model:
        assert model.chat(ChatRequest([UserMessage("hi")])).ai_message.text == "hi"
    assert "authorization" not in server.requests[0].headers


def test_a_transport_error_says_why() -> None:
    model = OpenAIChatModel(
        "gpt-4o-mini", base_url="http://toolweave-no-such-host.invalid/v1", max_retries=0
    )
    with pytest.raises(ProviderError) as caught:
        model.chat(ChatRequest([UserMessage("hi")]))
    message = str(caught.value)
    assert "connection error: ConnectError: " in message
    # the resolver's own words (glibc: "Name or service not known"; others differ)
    assert message.split("ConnectError: ", 1)[1].strip()
    assert caught.value.status is None and isinstance(caught.value.__cause__, httpx2.ConnectError)


@pytest.fixture
def silent_server() -> Iterator[tuple[str, list[socket.socket]]]:
    """A loopback port that accepts connections and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{listener.getsockname()[1]}/v1", accepted
    stop.set()
    thread.join(timeout=5)
    listener.close()
    for conn in accepted:
        conn.close()


async def test_the_local_model_does_not_retry_a_timeout(
    silent_server: tuple[str, list[socket.socket]], tmp_path: Path
) -> None:
    url, accepted = silent_server
    server = LlamaServer("llama-server", tmp_path / "model.gguf")
    server.port = int(url.rsplit(":", 1)[1].split("/")[0])  # a stand-in that never answers
    model = server.chat_model(timeout=0.3, max_retries=2)
    delays = no_sleep(model)
    with pytest.raises(ProviderError, match=r"timed out: ReadTimeout.*not retried") as caught:
        model.chat(ChatRequest([UserMessage("hi")]))
    assert caught.value.status is None
    with pytest.raises(ProviderError, match="not retried"):
        await model.achat(ChatRequest([UserMessage("hi")]))
    assert delays == [] and len(accepted) == 2  # one request each, no second attempt
    await model.aclose()
    # any other model retries a timeout, as the official SDKs do
    other = OpenAIChatModel("local", base_url=url, timeout=0.3, max_retries=1)
    no_sleep(other)
    with pytest.raises(ProviderError, match="timed out"):
        other.chat(ChatRequest([UserMessage("hi")]))
    assert len(accepted) == 4
    other.close()


def test_the_local_model_defaults(tmp_path: Path) -> None:
    server = LlamaServer("llama-server", tmp_path / "model.gguf")
    server.port = 8080
    model = server.chat_model()
    assert model.tool_calling == "auto"  # as docs/local-model.md says: probe, then pick
    body = model.build_request_body(ChatRequest([UserMessage("hi")]))
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS
    # greedy: sampled at llama-server's 0.8, the README's quick start skipped the tool in
    # about one run in five
    assert body["temperature"] == 0
    asked = ChatRequest([UserMessage("hi")], ChatRequestParameters(max_tokens=50, temperature=0.7))
    asked_body = model.build_request_body(asked)
    assert asked_body["max_tokens"] == 50 and asked_body["temperature"] == 0.7
    warm = server.chat_model(default_parameters=ChatRequestParameters(temperature=0.5))
    assert warm.build_request_body(ChatRequest([UserMessage("hi")]))["temperature"] == 0.5
    own = server.chat_model(
        default_parameters=ChatRequestParameters(max_tokens=2000, temperature=0),
        tool_calling="constrained",
    )
    assert own.tool_calling == "constrained"
    assert own.build_request_body(ChatRequest([UserMessage("hi")]))["max_tokens"] == 2000
    kept = server.chat_model(default_parameters=ChatRequestParameters(temperature=0))
    body = kept.build_request_body(ChatRequest([UserMessage("hi")]))
    assert body["max_tokens"] == DEFAULT_MAX_TOKENS and body["temperature"] == 0


@pytest.mark.parametrize(("cls", "name", "var"), CLOUD, ids=lambda v: getattr(v, "__name__", v))
def test_the_probe_fails_fast_without_a_key(cls: Any, name: str, var: str) -> None:
    sent: list[httpx2.Request] = []
    model = cls(name, http_client=_recording_client(sent))
    with pytest.raises(MissingApiKeyError, match=var):
        probe_capabilities(model)
    assert sent == []


def test_a_refused_key_ends_the_probe_at_its_first_request(server: ProviderServer) -> None:
    clear_probe_cache()
    refused = {"status": 401, "json": {"error": {"message": "Incorrect API key provided"}}}
    server.enqueue(*[refused] * 6)
    with OpenAIChatModel("m", api_key="sk-wrong-0000", base_url=f"{server.url}/v1") as model:
        for _ in range(2):  # nothing cached: the second probe asks again
            with pytest.raises(AuthenticationError, match="Incorrect API key"):
                probe_capabilities(model)
    assert len(server.requests) == 2
    clear_probe_cache()
