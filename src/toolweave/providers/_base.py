"""`HttpChatModel`: what the three providers share (transport, parameters, sync and async
faces, streaming plumbing)."""

from __future__ import annotations

import contextlib
import copy
import functools
import json
from collections.abc import AsyncIterator, Callable, Iterator, Mapping
from types import TracebackType
from typing import Any, Literal, Protocol, Self

import httpx2

from ..callbacks.otel import current, mask_credentials_of
from ..chat.events import PartialToolCall, StreamEvent
from ..chat.model import BaseChatModel
from ..chat.request import ChatRequest, ChatRequestParameters
from ..chat.response import ChatResponse
from ..chat.telemetry import end_model_span, start_direct_span, traced_astream, traced_stream
from ..errors import (
    MissingApiKeyError,
    ProviderError,
    SchemaError,
    ToolArgumentsError,
    ToolweaveError,
    UnsupportedOptionError,
)
from ..schema.arguments import parse_arguments
from ..schema.output import OutputSchema
from ._http import (
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    HttpTransport,
    JsonTooDeepError,
    _backoff,
    decode_json,
)
from ._sse import EventDecoder, SSEEvent
from .constrained import TOOL_CALLING_MODES, ConstrainedChatModel, ConstrainedToolCalling

__all__ = [
    "HttpChatModel",
    "StreamParser",
    "compact_json",
    "merge_custom",
    "openai_headers",
    "output_schema",
]


class StreamParser(Protocol):
    """Turns the SSE events of one response into stream events."""

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Consume one SSE event."""
        ...

    def finish(self) -> list[StreamEvent]:
        """The stream ended: the remaining events, ending with `ResponseCompleted` (raises
        `ProviderError` when the stream was truncated)."""
        ...


@contextlib.contextmanager
def _shapes(
    protocol_error: Callable[[str], Exception], what: str = "a stream event"
) -> Iterator[None]:
    """Answers whose JSON has an unexpected shape (an object where a string belongs, ...)
    become the provider's typed `protocol_error(message)`, never a bare AttributeError
    (nor a RecursionError from a value nested too deeply to walk)."""
    try:
        yield
    except ToolweaveError:
        raise
    except (AttributeError, TypeError, KeyError, IndexError, ValueError, RecursionError) as e:
        detail = str(e).splitlines()[0][:200] if str(e) else ""
        raise protocol_error(
            f"{what} has an unexpected shape ({type(e).__name__}: {detail})"
        ) from None


def feed_batch(
    parser: StreamParser,
    batch: list[SSEEvent],
    protocol_error: Callable[[str], Exception] = ValueError,
) -> list[StreamEvent]:
    """The events of one network read: the parser's own `feed_batch` when it has one (the
    OpenAI aggregator coalesces argument fragments per read), else `feed` for each.
    Malformed events raise `protocol_error` (see `_shapes`)."""
    with _shapes(protocol_error):
        batched = getattr(parser, "feed_batch", None)
        if batched is not None:
            return batched(batch)  # type: ignore[no-any-return]
        if len(batch) == 1:
            return parser.feed(batch[0])
        out: list[StreamEvent] = []
        for sse in batch:
            out.extend(parser.feed(sse))
        return coalesce_fragments(out)


def coalesce_fragments(events: list[StreamEvent]) -> list[StreamEvent]:
    """`events` with each run of argument fragments of one call (a `PartialToolCall` with no
    id or name following one for the same index) merged into the first of the run."""
    out: list[StreamEvent] = []
    run: list[str] = []  # the argument text of out[-1] while it is a growing run
    for event in events:
        if isinstance(event, PartialToolCall) and event.id is None and event.name is None and out:
            last = out[-1]
            if isinstance(last, PartialToolCall) and last.index == event.index:
                if not run:
                    run.append(last.arguments_delta)
                run.append(event.arguments_delta)
                continue
        if run:
            _close_run(out, run)
        out.append(event)
    if run:
        _close_run(out, run)
    return out


def _close_run(out: list[StreamEvent], run: list[str]) -> None:
    last = out[-1]
    assert isinstance(last, PartialToolCall)
    out[-1] = PartialToolCall(last.index, last.id, last.name, "".join(run))
    run.clear()


def finish_stream(
    parser: StreamParser, protocol_error: Callable[[str], Exception] = ValueError
) -> list[StreamEvent]:
    """`parser.finish()`, with malformed content raising `protocol_error`."""
    with _shapes(protocol_error):
        return parser.finish()


def merge_custom(body: dict[str, Any], custom: Mapping[str, Any]) -> dict[str, Any]:
    """Merge `custom` into `body` last: dicts merge recursively, other values replace, and a
    `None` value removes the key."""
    for key, value in custom.items():
        if value is None:
            body.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(body.get(key), dict):
            body[key] = merge_custom(dict(body[key]), value)
        else:
            body[key] = value
    return body


def arguments_object(arguments: str) -> dict[str, Any]:
    """A past tool call's raw arguments as the object a wire format needs (Anthropic
    `tool_use.input`, Gemini `functionCall.args`): repaired like any arguments, and `{}` when
    blank or beyond repair, so a bad call in the history never blocks the conversation."""
    if not arguments or not arguments.strip():
        return {}
    try:
        value = decode_json(arguments)
    except JsonTooDeepError:
        return {}
    except ValueError:
        try:
            value = parse_arguments(arguments)
        except (ToolArgumentsError, RecursionError):
            return {}
    return value if isinstance(value, dict) else {}


def compact_json(value: Any) -> str:
    """JSON text without spaces, non-ASCII kept."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


@functools.lru_cache(maxsize=256)
def _cached_output_schema(spec: Any) -> OutputSchema:
    return OutputSchema.of(spec)


def output_schema(spec: Any) -> OutputSchema:
    """`OutputSchema.of(spec)`, cached for hashable specs (types); dicts are converted anew."""
    try:
        hash(spec)
    except TypeError:
        return OutputSchema.of(spec)
    return _cached_output_schema(spec)


_AUTH_HEADERS = frozenset({"authorization", "x-api-key", "x-goog-api-key", "api-key"})


def _has_auth(headers: Mapping[str, str]) -> bool:
    return any(name.lower() in _AUTH_HEADERS for name in headers)


class HttpChatModel(BaseChatModel):
    """Base of the HTTP providers: builds a body, sends it, parses the answer.

    The sync methods use a sync HTTP client directly (no event loop involved); the async
    methods use the async client. Options the provider cannot honour raise
    `UnsupportedOptionError` when the request is prepared, before anything is sent.
    """

    provider = "http"
    supports_response_format = False
    """Whether `_body` maps `ChatRequestParameters.response_format` (else it is refused)."""
    supports_tool_search = False
    """Whether `_body` maps `ChatRequestParameters.deferred_tools` to the provider's own
    tool search (else it is refused)."""
    api_key_env: tuple[str, ...] = ()
    """The environment variables the key is read from, in order."""
    default_base_url: str | None = None
    """The provider's own endpoint. Only there is a missing key an error: a compatible
    server at another `base_url` (llama.cpp, vLLM, a proxy) may need none."""
    tool_calling: Literal["native", "constrained", "auto"] = "native"
    """`"native"`: the API's tool calls; `"constrained"`: tool calls through the structured
    output (`ConstrainedChatModel` over a native copy of this model); `"auto"`: probe the
    model once and pick. Providers with a response format take it as `tool_calling=`."""
    constrained: ConstrainedToolCalling = ConstrainedToolCalling()
    """The settings and repeated-call policy of the constrained mode (`constrained=`)."""

    def __init__(
        self,
        *,
        model: str,
        api_key: str | None,
        base_url: str,
        headers: Mapping[str, str],
        timeout: float | httpx2.Timeout | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_parameters: ChatRequestParameters | None = None,
        http_client: httpx2.Client | None = None,
        async_http_client: httpx2.AsyncClient | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        if not model:
            raise ValueError(f"{type(self).__name__} needs a model name")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self.default_parameters = default_parameters or ChatRequestParameters()
        self._api_key = api_key
        self._auth_given = _has_auth(headers) or any(
            client is not None and _has_auth(client.headers)
            for client in (http_client, async_http_client)
        )
        self._http = HttpTransport(
            provider=self.provider,
            headers=headers,
            secrets=(api_key,) if api_key else (),
            timeout=timeout,
            max_retries=max_retries,
            http_client=http_client,
            async_http_client=async_http_client,
            error_hook=self._error_class,
            max_response_bytes=max_response_bytes,
        )
        mask_credentials_of(self)  # in captured span content, tool spans included

    @property
    def secrets(self) -> tuple[str, ...]:
        """The credentials this model holds, for masking (errors, logs, span content): its
        key, credential-like headers, and the latest tokens or temporary credentials
        fetched since (a token provider's, AWS's chain and refreshes)."""
        return self._http.secrets

    def __repr__(self) -> str:
        return f"{type(self).__name__}(model={self.model!r}, base_url={self.base_url!r})"

    # lifecycle ----------------------------------------------------------------------------
    def close(self) -> None:
        """Close the sync HTTP client."""
        self._http.close()

    async def aclose(self) -> None:
        """Close the HTTP clients."""
        await self._http.aclose()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    def _set_tool_calling(
        self, tool_calling: str, constrained: ConstrainedToolCalling | None
    ) -> None:
        """Check and keep the `tool_calling=` and `constrained=` options."""
        if tool_calling not in TOOL_CALLING_MODES:
            raise UnsupportedOptionError(
                self.provider, "tool_calling", f"{tool_calling!r}: use native, constrained or auto"
            )
        self.tool_calling = tool_calling  # type: ignore[assignment]
        self.constrained = constrained or ConstrainedToolCalling()

    def _constrained_layer(self) -> tuple[Self, ConstrainedChatModel]:
        """A native-mode copy of this model (sharing its HTTP clients) and the constrained
        layer over it."""
        native = copy.copy(self)
        native.tool_calling = "native"
        mode: Literal["constrained", "auto"] = (
            "auto" if self.tool_calling == "auto" else "constrained"
        )
        return native, ConstrainedChatModel(native, self.constrained, tool_calling=mode)

    # provider hooks -----------------------------------------------------------------------
    def _url(self, model: str, stream: bool) -> str:
        raise NotImplementedError

    def _body(
        self, request: ChatRequest, params: ChatRequestParameters, model: str, stream: bool
    ) -> dict[str, Any]:
        raise NotImplementedError

    def _parse(self, data: Any) -> ChatResponse:
        raise NotImplementedError

    def _parser(self) -> StreamParser:
        raise NotImplementedError

    def _parse_for(self, request: ChatRequest, data: Any) -> ChatResponse:
        """Parse the response to `request` (default: `_parse(data)`); for providers whose
        parsing depends on the request (structured output through a tool)."""
        return self._parse(data)

    def _parser_for(self, request: ChatRequest) -> StreamParser:
        """The stream parser for `request` (default: `_parser()`)."""
        return self._parser()

    def _error_class(self, status: int, body: str) -> Any:
        return None

    def _request_headers(self) -> Mapping[str, str] | None:
        """Headers computed per request (a fresh bearer token), merged over the fixed ones."""
        return None

    async def _arequest_headers(self) -> Mapping[str, str] | None:
        """Async `_request_headers`."""
        return None

    def unsupported(self, option: str, reason: str = "") -> UnsupportedOptionError:
        """The error for an option this provider cannot honour."""
        return UnsupportedOptionError(self.provider, option, reason)

    def output_schema(self, params: ChatRequestParameters) -> OutputSchema | None:
        """The `OutputSchema` of `params.response_format` (None when unset); a schema that
        cannot be built is a `SchemaError` naming the provider and the option."""
        if params.response_format is None:
            return None
        try:
            return output_schema(params.response_format)
        except SchemaError as e:
            raise SchemaError(f"{self.provider}: response_format: {e.message}") from None

    # building -----------------------------------------------------------------------------
    def build_request_body(self, request: ChatRequest, *, stream: bool = False) -> dict[str, Any]:
        """The JSON body that would be sent for `request` (custom parameters merged last)."""
        if self.tool_calling != "native":
            if request.parameters.deferred_tools or self.default_parameters.deferred_tools:
                raise self.unsupported(
                    "deferred_tools", "tool calls through structured output have no tool search"
                )
            native, layer = self._constrained_layer()
            return native.build_request_body(layer.prepare(request)[1], stream=stream)
        params = self.default_parameters.override(request.parameters)
        model = params.model or self.model
        if params.deferred_tools:
            if not self.supports_tool_search:
                raise self.unsupported(
                    "deferred_tools", f"{type(self).__name__} has no provider tool search"
                )
            offered = {card.name for card in params.tools or ()}
            missing = [n for n in params.deferred_tools if n not in offered]
            if missing:
                raise self.unsupported(
                    "deferred_tools", f"no tool named {missing[0]!r} in the request"
                )
        if params.response_format is not None and not self.supports_response_format:
            raise self.unsupported(
                "response_format", f"structured output is not mapped by {type(self).__name__}"
            )
        body = self._body(request, params, model, stream)
        if params.custom_parameters:
            merge_custom(body, params.custom_parameters)
        return body

    def check_api_key(self) -> None:
        """Raise `MissingApiKeyError` when the provider's own endpoint would be called
        without a key (no `api_key`, no environment variable, no auth header). Every
        request checks this before anything is sent."""
        if self._api_key or self._auth_given or not self.api_key_env:
            return
        if self.default_base_url is None or self.base_url != self.default_base_url.rstrip("/"):
            return
        env = " or ".join(self.api_key_env)
        raise MissingApiKeyError(
            f"{self.provider}: no API key: set {env} in the environment or pass "
            f"{type(self).__name__}(api_key=...) (nothing was sent to {self.base_url})",
            provider=self.provider,
            env_var=self.api_key_env[0],
        )

    def _prepare(self, request: ChatRequest, stream: bool) -> tuple[str, dict[str, Any]]:
        self.check_api_key()
        body = self.build_request_body(request, stream=stream)
        model = str(
            body.get("model")
            or self.default_parameters.override(request.parameters).model
            or self.model
        )
        return self._url(model, stream), body

    # the four faces -----------------------------------------------------------------------
    # Called directly (not by ToolService, which traces its calls itself), each face is a
    # `chat {model}` span when tracing is on (chat.telemetry).
    def chat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and return the full response (sync HTTP client)."""
        if self.tool_calling != "native":
            return self._constrained_layer()[1].chat(request)
        s = start_direct_span(self, request, stream=False)
        if s is None:
            return self._chat(request)
        try:
            with current(s):
                response = self._chat(request)
        except BaseException as e:
            end_model_span(s, self, error=e)
            raise
        end_model_span(s, self, response)
        return response

    def _chat(self, request: ChatRequest) -> ChatResponse:
        url, body = self._prepare(request, False)
        data = self._http.post_json(url, body, self._request_headers())
        with _shapes(self._http.protocol_error, "the response"):
            return self._parse_for(request, data)

    async def achat(self, request: ChatRequest) -> ChatResponse:
        """Send `request` and return the full response (async HTTP client)."""
        if self.tool_calling != "native":
            return await self._constrained_layer()[1].achat(request)
        s = start_direct_span(self, request, stream=False)
        if s is None:
            return await self._achat(request)
        try:
            with current(s):
                response = await self._achat(request)
        except BaseException as e:
            end_model_span(s, self, error=e)
            raise
        end_model_span(s, self, response)
        return response

    async def _achat(self, request: ChatRequest) -> ChatResponse:
        url, body = self._prepare(request, False)
        data = await self._http.apost_json(url, body, await self._arequest_headers())
        with _shapes(self._http.protocol_error, "the response"):
            return self._parse_for(request, data)

    def stream(self, request: ChatRequest) -> Iterator[StreamEvent]:
        """Send `request` with streaming; yield events as they arrive (sync)."""
        if self.tool_calling != "native":
            return self._constrained_layer()[1].stream(request)
        s = start_direct_span(self, request, stream=True)
        try:
            url, body = self._prepare(request, True)
        except BaseException as e:
            end_model_span(s, self, error=e)
            raise
        events = self._stream(url, body, self._parser_for(request))
        return events if s is None else traced_stream(events, s, self)

    def _stream(
        self, url: str, body: dict[str, Any], parser: StreamParser
    ) -> Iterator[StreamEvent]:
        attempt = 0
        while True:
            try:
                for batch in self._http.stream_events(
                    url, body, self._request_headers(), self._stream_decoder
                ):
                    yield from feed_batch(parser, batch, self._http.protocol_error)
                yield from finish_stream(parser, self._http.protocol_error)
                return
            except ProviderError as e:
                if not self._retry_stream(e, attempt):
                    raise
            self._http.sleep(_backoff(attempt))
            attempt += 1
            parser = self._fresh_parser(parser)

    def astream(self, request: ChatRequest) -> AsyncIterator[StreamEvent]:
        """Send `request` with streaming; yield events as they arrive (async)."""
        if self.tool_calling != "native":
            return self._constrained_layer()[1].astream(request)
        s = start_direct_span(self, request, stream=True)
        try:
            url, body = self._prepare(request, True)
        except BaseException as e:
            end_model_span(s, self, error=e)
            raise
        events = self._astream(url, body, self._parser_for(request))
        return events if s is None else traced_astream(events, s, self)

    async def _astream(
        self, url: str, body: dict[str, Any], parser: StreamParser
    ) -> AsyncIterator[StreamEvent]:
        attempt = 0
        while True:
            try:
                events = self._http.astream_events(
                    url, body, await self._arequest_headers(), self._stream_decoder
                )
                try:
                    async for batch in events:
                        for event in feed_batch(parser, batch, self._http.protocol_error):
                            yield event
                finally:
                    await events.aclose()  # type: ignore[attr-defined]
                for event in finish_stream(parser, self._http.protocol_error):
                    yield event
                return
            except ProviderError as e:
                if not self._retry_stream(e, attempt):
                    raise
            await self._http.asleep(_backoff(attempt))
            attempt += 1
            parser = self._fresh_parser(parser)

    # streaming hooks ------------------------------------------------------------------------
    _stream_decoder: Callable[[], EventDecoder] | None = None
    """Makes the decoder of a streamed answer (None: Server-Sent Events)."""

    def _retry_stream(self, error: ProviderError, attempt: int) -> bool:
        """Whether a stream that failed with `error`, the `attempt`-th time, is sent again
        (default: never; HTTP failures before the stream are retried by the transport, and
        nothing is retried after output, as the SDKs do)."""
        return False

    def _fresh_parser(self, parser: StreamParser) -> StreamParser:
        """A parser like `parser`, for a stream sent again."""
        return parser


def openai_headers(
    api_key: str | None,
    organization: str | None,
    project: str | None,
    headers: Mapping[str, str] | None,
) -> dict[str, str]:
    """The headers of an OpenAI request: `Authorization: Bearer` when there is a key, the
    organization and project when given, then the caller's `headers` over them."""
    out: dict[str, str] = {"accept": "application/json"}
    if api_key:
        out["authorization"] = f"Bearer {api_key}"
    if organization:
        out["openai-organization"] = organization
    if project:
        out["openai-project"] = project
    out.update(headers or {})
    return out
