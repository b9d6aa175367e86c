"""`BedrockChatModel`: Amazon Bedrock's Converse API (`/model/{modelId}/converse` and
`/converse-stream`), signed with AWS Signature Version 4.

botocore (the `toolweave[bedrock]` extra) supplies the signer, the credentials chain and the
event-stream frame decoder; requests go through toolweave's own HTTP transport (retries,
timeouts, size caps, masking), not boto3's client.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import threading
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

import httpx2

from ..chat.events import (
    CompleteToolCall,
    PartialToolCall,
    ReasoningDelta,
    ResponseCompleted,
    StreamEvent,
    TextDelta,
)
from ..chat.messages import AiMessage, SystemMessage, ToolExecutionResultMessage, UserMessage
from ..chat.request import ChatRequest, ChatRequestParameters
from ..chat.response import ChatResponse, FinishReason, TokenUsage
from ..errors import MissingApiKeyError, ProviderError, RateLimitError
from ..execution.content import EmbeddedResource, FileContent, ImageContent, TextContent
from ..execution.requests import ToolExecutionRequest
from ._allowed import check_named, restrict_to_allowed
from ._answer import ANSWER_DESCRIPTION, Answer, answer_schema, answer_text
from ._base import HttpChatModel, StreamParser, arguments_object
from ._eventstream import EXCEPTION_PREFIX, AwsEventStreamDecoder
from ._http import (
    _PROVIDER_SECRETS_IN_LOGS,
    DEFAULT_MAX_RESPONSE_BYTES,
    DEFAULT_MAX_RETRIES,
    HttpTransport,
    decode_json,
)
from ._sse import SSEEvent
from .tool_results import text_stand_in

__all__ = ["ANSWER_TOOL", "BedrockChatModel", "BedrockStreamParser"]

PROVIDER = "aws.bedrock"
SERVICE = "bedrock"
ANSWER_TOOL = "final_answer"
"""The tool through which a Bedrock model gives a structured answer (`response_format`)."""

_FINISH = {
    "end_turn": FinishReason.STOP,
    "stop_sequence": FinishReason.STOP,
    "tool_use": FinishReason.TOOL_EXECUTION,
    "max_tokens": FinishReason.LENGTH,
    "model_context_window_exceeded": FinishReason.LENGTH,
    "guardrail_intervened": FinishReason.CONTENT_FILTER,
    "content_filtered": FinishReason.CONTENT_FILTER,
}
_IMAGE_FORMATS = {
    "image/png": "png",
    "image/jpeg": "jpeg",
    "image/gif": "gif",
    "image/webp": "webp",
}
_DOCUMENT_FORMATS = {
    "application/pdf": "pdf",
    "text/csv": "csv",
    "application/msword": "doc",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.ms-excel": "xls",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "text/html": "html",
    "text/plain": "txt",
    "text/markdown": "md",
}
_SECRETS_MASKED = 8
"""How many of the latest AWS secrets (keys, session tokens) the signer keeps masked."""
# Exception frames (and their HTTP twins) worth a retry when nothing was streamed yet.
_RETRYABLE_EXCEPTIONS = {
    "throttlingException": 429,
    "serviceUnavailableException": 503,
    "internalServerException": 500,
}


def _finish(raw: str | None, answered: bool, has_calls: bool) -> FinishReason | None:
    if raw is None:
        return None
    reason = _FINISH.get(raw, FinishReason.OTHER)
    if answered and not has_calls and reason is FinishReason.TOOL_EXECUTION:
        return FinishReason.STOP  # the only call was the answer tool
    return reason


def _usage(raw: Any) -> TokenUsage | None:
    if not isinstance(raw, Mapping):
        return None
    return TokenUsage(
        input_tokens=raw.get("inputTokens"),
        output_tokens=raw.get("outputTokens"),
        total_tokens=raw.get("totalTokens"),
    )


def _document_name(part: FileContent, index: int) -> str:
    """A document name Bedrock accepts (letters, digits, single spaces, `-()[]`)."""
    raw = (part.name or f"document-{index}").rsplit(".", 1)[0]
    cleaned = "".join(c if c.isalnum() or c in "-()[] " else "-" for c in raw)
    return " ".join(cleaned.split())[:200] or f"document-{index}"


class _Signer:
    """SigV4 for each request, with credentials resolved once (and refreshed by botocore
    when they are temporary)."""

    def __init__(
        self,
        region: str,
        credentials: Any,
        profile: str | None,
        transport: HttpTransport,
    ) -> None:
        self.region = region
        self._transport = transport  # credentials from the chain are masked like given ones
        self._masked: list[str] = []  # the latest, oldest first (temporary ones rotate)
        # botocore's signer logs the canonical request (the session token in it) at DEBUG
        logging.getLogger("botocore.auth").addFilter(_PROVIDER_SECRETS_IN_LOGS)
        self._given = credentials
        self._profile = profile
        self._credentials: Any = None
        self._frozen: Any = None  # the latest, taken as each request starts
        self._lock = threading.Lock()

    def resolve(self) -> None:
        """Find credentials (may do I/O: files, the instance metadata service)."""
        if self._credentials is not None:
            return
        with self._lock:
            if self._credentials is not None:
                return
            credentials = self._given
            if credentials is None:
                from botocore.session import Session

                credentials = Session(profile=self._profile).get_credentials()
            if credentials is None:
                raise MissingApiKeyError(
                    f"{PROVIDER}: no AWS credentials: set AWS_ACCESS_KEY_ID and "
                    "AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, or AWS_BEARER_TOKEN_BEDROCK), or pass "
                    "BedrockChatModel(aws_access_key_id=..., aws_secret_access_key=...) "
                    "(nothing was sent)",
                    provider=PROVIDER,
                    env_var="AWS_ACCESS_KEY_ID",
                )
            self._credentials = credentials

    def may_block(self) -> bool:
        """Whether getting the credentials may do I/O: the chain is not read yet, or they
        are temporary ones botocore would refresh now (STS, SSO, the instance role)."""
        credentials = self._credentials if self._credentials is not None else self._given
        if credentials is None:
            return True
        refresh_needed = getattr(credentials, "refresh_needed", None)
        return callable(refresh_needed) and bool(refresh_needed())

    def freeze(self) -> None:
        """Resolve and freeze the credentials now, refreshing them if they are due (I/O when
        `may_block`); every request calls it as it starts (an async one off the loop when
        it may block), and its attempts are signed with the result."""
        self.resolve()
        self._frozen = self._credentials.get_frozen_credentials()
        self._mask(self._frozen)  # masked from the moment they are fetched

    def _mask(self, frozen: Any) -> None:
        """Mask the secret key and session token of `frozen` (the latest few are kept)."""
        for secret in (frozen.secret_key, frozen.token):
            if secret and secret not in self._masked:
                self._transport.add_secret(secret)
                self._masked.append(secret)
                if len(self._masked) > _SECRETS_MASKED:
                    self._transport.remove_secret(self._masked.pop(0))

    def sign(self, request: httpx2.Request) -> None:
        from botocore.auth import SigV4Auth
        from botocore.awsrequest import AWSRequest

        self.resolve()
        frozen = self._frozen  # taken when the request started (off the loop if async)
        if frozen is None:
            frozen = self._credentials.get_frozen_credentials()
        self._mask(frozen)
        aws = AWSRequest(
            method=request.method,
            url=str(request.url),
            data=request.content,
            headers={
                "host": request.headers["host"],
                "content-type": request.headers["content-type"],
            },
        )
        SigV4Auth(frozen, SERVICE, self.region).add_auth(aws)
        for name in ("Authorization", "X-Amz-Date", "X-Amz-Security-Token"):
            if name in aws.headers:
                request.headers[name] = aws.headers[name]


class BedrockStreamParser:
    """Turns ConverseStream frames into stream events.

    Tool calls are numbered in the order of their `contentBlockStart`; `toolUse.input`
    deltas are `PartialToolCall`s; a call is complete at its `contentBlockStop`.
    `messageStop` gives the stop reason, `metadata` the usage; the response is complete when
    the stream ends after `messageStop`. Exception frames raise typed errors
    (`throttlingException` is a `RateLimitError`).
    """

    def __init__(self, transport: HttpTransport, answer: Answer | None = None) -> None:
        self._transport = transport
        self._answer = answer
        self._answer_parts: dict[int, list[str]] = {}
        self._answered: set[int] = set()  # answer blocks already given as text
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._signature: str | None = None
        self._redacted: list[str] = []
        self._blocks: dict[int, int] = {}  # contentBlockIndex -> call index
        self._calls: list[tuple[str, str, list[str]]] = []  # id, name, argument parts
        self._done: set[int] = set()
        self._stop: str | None = None
        self._usage: Any = None
        self.streamed = False
        """Whether an event has been produced (after that, nothing is retried)."""

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Consume one frame."""
        kind = event.event or ""
        if kind.startswith(EXCEPTION_PREFIX):
            raise self._exception(kind.removeprefix(EXCEPTION_PREFIX), event.data)
        data = decode_json(event.data) if event.data.strip() else {}
        if not isinstance(data, dict):
            raise self._transport.protocol_error(f"a {kind} frame is not a JSON object")
        out: list[StreamEvent] = []
        if kind == "contentBlockStart":
            start = data["start"]
            if "toolUse" in start:
                use = start["toolUse"]
                block = int(data["contentBlockIndex"])
                if block in self._blocks or block in self._answer_parts:
                    pass  # a block started twice is one call
                elif self._answer is not None and use.get("name") == self._answer.name:
                    self._answer_parts[block] = []
                else:
                    self._blocks[block] = len(self._calls)
                    self._calls.append((str(use["toolUseId"]), str(use["name"]), []))
                    out.append(
                        PartialToolCall(self._blocks[block], use["toolUseId"], use["name"], "")
                    )
        elif kind == "contentBlockDelta":
            self._delta(int(data["contentBlockIndex"]), data["delta"], out)
        elif kind == "contentBlockStop":
            block = int(data["contentBlockIndex"])
            if block in self._answer_parts:
                self._answer_block(block, out)
            elif block in self._blocks and self._blocks[block] not in self._done:
                index = self._blocks[block]
                self._done.add(index)
                out.append(CompleteToolCall(index, self._request(index)))
        elif kind == "messageStop":
            self._stop = str(data.get("stopReason") or "")
        elif kind == "metadata":
            self._usage = data.get("usage")
        if out:
            self.streamed = True
        return out

    def _delta(self, block: int, delta: Mapping[str, Any], out: list[StreamEvent]) -> None:
        if "text" in delta:
            if delta["text"]:
                self._text.append(str(delta["text"]))
                out.append(TextDelta(str(delta["text"])))
        elif "toolUse" in delta:
            piece = str(delta["toolUse"].get("input") or "")
            if block in self._answer_parts:
                if block not in self._answered:  # a given answer never changes
                    self._answer_parts[block].append(piece)
            elif block in self._blocks and piece:
                index = self._blocks[block]
                if index in self._done:
                    return  # a completed call never changes
                self._calls[index][2].append(piece)
                out.append(PartialToolCall(index, None, None, piece))
        elif "reasoningContent" in delta:
            reasoning = delta["reasoningContent"]
            if reasoning.get("text"):
                self._reasoning.append(str(reasoning["text"]))
                out.append(ReasoningDelta(str(reasoning["text"])))
            if reasoning.get("signature"):
                self._signature = str(reasoning["signature"])
            if reasoning.get("redactedContent"):
                self._redacted.append(str(reasoning["redactedContent"]))

    def _answer_block(self, block: int, out: list[StreamEvent]) -> None:
        """The structured answer of `block` as the response text, once."""
        if block in self._answered:
            return
        assert self._answer is not None
        self._answered.add(block)
        text = answer_text("".join(self._answer_parts[block]), self._answer.wrapped)
        self._text = [text]
        out.append(TextDelta(text))

    def _request(self, index: int) -> ToolExecutionRequest:
        call_id, name, parts = self._calls[index]
        args = "".join(parts)
        return ToolExecutionRequest(id=call_id, name=name, arguments=args if args.strip() else "{}")

    def _exception(self, kind: str, payload: str) -> ProviderError:
        try:
            message = decode_json(payload).get("message") or payload
        except (ValueError, AttributeError):  # not JSON, too deep, not an object
            message = payload
        status = _RETRYABLE_EXCEPTIONS.get(kind, 400 if kind == "validationException" else None)
        text = f"{PROVIDER} stream error: {kind}: {self._transport.redact(str(message))[:500]}"
        cls = RateLimitError if kind == "throttlingException" else ProviderError
        error = cls(
            text, provider=PROVIDER, status=status, body=self._transport.redact(payload)[:2000]
        )
        # retried by the model only while nothing was streamed (see BedrockChatModel)
        error.retry_stream = kind in _RETRYABLE_EXCEPTIONS and not self.streamed  # type: ignore[attr-defined]
        return error

    def finish(self) -> list[StreamEvent]:
        """The stream ended: complete open calls and emit `ResponseCompleted`."""
        if self._stop is None:
            raise self._transport.protocol_error(
                "the stream ended before the response was complete (no messageStop)"
            )
        out: list[StreamEvent] = []
        for block in self._answer_parts:  # an answer block the stream never stopped
            self._answer_block(block, out)
        for index in range(len(self._calls)):
            if index not in self._done:
                self._done.add(index)
                out.append(CompleteToolCall(index, self._request(index)))
        requests = [self._request(i) for i in range(len(self._calls))]
        message = AiMessage(
            "".join(self._text) or None,
            tool_execution_requests=requests,
            reasoning="".join(self._reasoning) or None,
            attributes=_reasoning_attributes(self._reasoning, self._signature, self._redacted),
        )
        metadata: dict[str, Any] = {"stopReason": self._stop}
        if self._usage is not None:
            metadata["usage"] = self._usage
        out.append(
            ResponseCompleted(
                ChatResponse(
                    message,
                    finish_reason=_finish(self._stop, bool(self._answer_parts), bool(requests)),
                    usage=_usage(self._usage),
                    metadata=metadata,
                )
            )
        )
        return out


def _reasoning_attributes(
    reasoning: list[str], signature: str | None, redacted: list[str]
) -> dict[str, Any]:
    """The reasoning blocks as they must go back on the next turn (Claude's extended
    thinking needs the signed text, or the redacted content, verbatim)."""
    blocks: list[dict[str, Any]] = []
    if reasoning:
        text: dict[str, Any] = {"text": "".join(reasoning)}
        if signature:
            text["signature"] = signature
        blocks.append({"reasoningContent": {"reasoningText": text}})
    blocks.extend({"reasoningContent": {"redactedContent": r}} for r in redacted)
    return {"bedrock": {"reasoning": blocks}} if blocks else {}


class BedrockChatModel(HttpChatModel):
    """Amazon Bedrock Converse (`POST {base_url}/model/{model}/converse`, streaming through
    `/converse-stream` as an AWS event stream).

    `model` is a model id or inference profile (`anthropic.claude-3-5-sonnet-20241022-v2:0`,
    `us.amazon.nova-pro-v1:0`, an ARN). `region` defaults to `AWS_REGION` /
    `AWS_DEFAULT_REGION` (or the profile's); `base_url` to
    `https://bedrock-runtime.{region}.amazonaws.com`. Requests are signed with SigV4 using
    the given keys, else botocore's credentials chain (environment, profile `profile` or
    `AWS_PROFILE`, SSO, instance roles), resolved on the first request; `api_key` (else
    `AWS_BEARER_TOKEN_BEDROCK`) uses a Bedrock API key as a bearer token instead.
    `response_format` is honoured through a forced answer tool (`ANSWER_TOOL`).
    Throttling and 5xx answers are retried with backoff, as are throttling/unavailable
    exception frames that arrive before anything was streamed. See docs/providers.md.
    """

    provider = PROVIDER
    supports_response_format = True

    def __init__(
        self,
        model: str,
        *,
        region: str | None = None,
        aws_access_key_id: str | None = None,
        aws_secret_access_key: str | None = None,
        aws_session_token: str | None = None,
        profile: str | None = None,
        api_key: str | None = None,
        base_url: str | None = None,
        max_tokens: int | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float | httpx2.Timeout | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        default_parameters: ChatRequestParameters | None = None,
        http_client: httpx2.Client | None = None,
        async_http_client: httpx2.AsyncClient | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
    ) -> None:
        region = region or os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
        if not region:
            from botocore.session import Session

            region = Session(profile=profile).get_config_variable("region")
        if not region:
            raise ValueError(
                "BedrockChatModel needs a region: region=, AWS_REGION or AWS_DEFAULT_REGION"
            )
        bearer = api_key if api_key is not None else os.environ.get("AWS_BEARER_TOKEN_BEDROCK")
        all_headers: dict[str, str] = {"accept": "application/json"}
        if bearer:
            all_headers["authorization"] = f"Bearer {bearer}"
        all_headers.update(headers or {})
        super().__init__(
            model=model,
            api_key=bearer,
            base_url=base_url or f"https://bedrock-runtime.{region}.amazonaws.com",
            headers=all_headers,
            timeout=timeout,
            max_retries=max_retries,
            default_parameters=default_parameters,
            http_client=http_client,
            async_http_client=async_http_client,
            max_response_bytes=max_response_bytes,
        )
        self.region = region
        self.max_tokens = max_tokens
        self._signer: _Signer | None = None
        if not bearer:
            credentials = None
            if aws_access_key_id or aws_secret_access_key:
                if not (aws_access_key_id and aws_secret_access_key):
                    raise ValueError("give both aws_access_key_id and aws_secret_access_key")
                from botocore.credentials import Credentials

                credentials = Credentials(
                    aws_access_key_id, aws_secret_access_key, aws_session_token
                )
                for secret in (aws_secret_access_key, aws_session_token):
                    if secret:
                        self._http.add_secret(secret)
            self._signer = _Signer(region, credentials, profile, self._http)
            self._http.signer = self._signer.sign

    def _url(self, model: str, stream: bool) -> str:
        operation = "converse-stream" if stream else "converse"
        return f"{self.base_url}/model/{quote(model, safe='')}/{operation}"

    def _request_headers(self) -> Mapping[str, str] | None:
        if self._signer is not None:
            self._signer.freeze()
        return None

    async def _arequest_headers(self) -> Mapping[str, str] | None:
        signer = self._signer
        if signer is not None:
            if signer.may_block():  # the chain, or a refresh, may read files or the network
                await asyncio.to_thread(signer.freeze)
            else:
                signer.freeze()
        return None

    # request --------------------------------------------------------------------------------
    def _body(
        self, request: ChatRequest, params: ChatRequestParameters, model: str, stream: bool
    ) -> dict[str, Any]:
        system = [{"text": m.text} for m in request.messages if isinstance(m, SystemMessage)]
        messages = self._messages(request.messages)
        body: dict[str, Any] = {"messages": messages}
        if system:
            body["system"] = system
        config: dict[str, Any] = {}
        max_tokens = params.max_tokens if params.max_tokens is not None else self.max_tokens
        if max_tokens is not None:
            config["maxTokens"] = max_tokens
        if params.temperature is not None:
            config["temperature"] = params.temperature
        if params.top_p is not None:
            config["topP"] = params.top_p
        if params.stop:
            config["stopSequences"] = list(params.stop)
        if config:
            body["inferenceConfig"] = config
        if params.parallel_tool_calls is False:
            raise self.unsupported("parallel_tool_calls", "Converse cannot forbid parallel calls")
        # no allowed-tools field: a subset is sent as its tools alone (docs/providers.md)
        subset, choice = restrict_to_allowed(self, params.tool_choice, params.tools or ())
        tools = list(subset)
        specs = [self._tool_spec(c.name, c.description, c.input_params) for c in tools]
        output = self.output_schema(params)
        if output is not None:
            if any(card.name == ANSWER_TOOL for card in tools):
                raise self.unsupported(
                    "response_format",
                    f"the request already has a tool named {ANSWER_TOOL!r}, the name of the "
                    "tool that carries the structured answer; rename that tool",
                )
            schema, _ = answer_schema(output)
            description = ANSWER_DESCRIPTION
            if isinstance(output.json_schema.get("description"), str):
                description = f"{description} The answer: {output.json_schema['description']}"
            specs.append(self._tool_spec(ANSWER_TOOL, description, schema))
            forced = ANSWER_TOOL if not tools or (choice and choice.mode == "none") else None
            if choice is not None and choice.mode == "tool":
                forced = choice.name
            body["toolConfig"] = {
                "tools": specs,
                "toolChoice": {"tool": {"name": forced}} if forced else {"any": {}},
            }
        elif specs and not (
            choice is not None and choice.mode == "none" and not _has_tool_blocks(messages)
        ):
            tool_config: dict[str, Any] = {"tools": specs}
            if choice is not None and choice.mode != "none":
                tool_config["toolChoice"] = self._tool_choice(choice, tools)
            body["toolConfig"] = tool_config
        elif choice is not None and choice.mode in ("required", "tool"):
            raise self.unsupported("tool_choice", f"{choice!r} needs tools in the request")
        return body

    @staticmethod
    def _tool_spec(name: str, description: str | None, schema: Any) -> dict[str, Any]:
        spec: dict[str, Any] = {"name": name}
        if description:
            spec["description"] = description
        spec["inputSchema"] = {"json": schema}
        return {"toolSpec": spec}

    def _tool_choice(self, choice: Any, tools: list[Any]) -> dict[str, Any]:
        if choice.mode == "required":
            return {"any": {}}
        if choice.mode == "tool":
            check_named(self, choice, tools)
            return {"tool": {"name": choice.name}}
        return {"auto": {}}

    def _messages(self, messages: Any) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for message in messages:
            if isinstance(message, SystemMessage):
                continue
            if isinstance(message, AiMessage):
                blocks = self._assistant_blocks(message)
                role = "assistant"
            elif isinstance(message, ToolExecutionResultMessage):
                blocks = [self._tool_result(message)]
                role = "user"
            elif isinstance(message, UserMessage):
                blocks = []
                if message.text:
                    blocks.append({"text": message.text})
                blocks.extend(self._content(p, i) for i, p in enumerate(message.contents))
                role = "user"
            else:
                raise TypeError(f"not a chat message: {type(message).__name__}")
            if not blocks:
                continue
            if out and out[-1]["role"] == role:
                out[-1]["content"].extend(blocks)  # Converse wants alternating roles
            else:
                out.append({"role": role, "content": blocks})
        return out

    def _assistant_blocks(self, message: AiMessage) -> list[dict[str, Any]]:
        kept = (message.attributes.get("bedrock") or {}).get("reasoning") or ()
        blocks: list[dict[str, Any]] = [dict(b) for b in kept if isinstance(b, Mapping)]
        if message.text:
            blocks.append({"text": message.text})
        for call in message.tool_execution_requests:
            blocks.append(
                {
                    "toolUse": {
                        "toolUseId": call.id,
                        "name": call.name,
                        "input": arguments_object(call.arguments),
                    }
                }
            )
        return blocks

    def _tool_result(self, message: ToolExecutionResultMessage) -> dict[str, Any]:
        contents = [p for p in message.contents or () if p.for_model]
        parts: list[dict[str, Any]] = []
        if message.text and not any(isinstance(p, TextContent) for p in contents):
            parts.append({"text": message.text})
        parts.extend(self._content(p, i) for i, p in enumerate(contents))
        result: dict[str, Any] = {"toolUseId": message.id, "content": parts or [{"text": ""}]}
        if message.is_error:
            result["status"] = "error"
        return {"toolResult": result}

    def _content(self, part: Any, index: int) -> dict[str, Any]:
        """A Converse content block; what Converse cannot carry (media by URL, other file
        types) becomes a short text that says what it was."""
        if isinstance(part, TextContent):
            return {"text": part.text}
        if isinstance(part, ImageContent):
            image_format = _IMAGE_FORMATS.get(part.mime_type)
            if part.data and image_format:
                return {"image": {"format": image_format, "source": {"bytes": part.data}}}
            where = f" at {part.url}" if part.url else ""
            return {"text": f"[image ({part.mime_type}){where}: not sent to the model]"}
        if isinstance(part, FileContent):
            document_format = _DOCUMENT_FORMATS.get(part.mime_type)
            if part.data and document_format:
                return {
                    "document": {
                        "format": document_format,
                        "name": _document_name(part, index),
                        "source": {"bytes": part.data},
                    }
                }
            size = (
                f", {len(base64.b64decode(part.data, validate=False))} bytes" if part.data else ""
            )
            where = f" at {part.url}" if part.url else ""
            name = f" {part.name!r}" if part.name else ""
            return {"text": f"[file{name} ({part.mime_type}{size}){where}: not sent to the model]"}
        if isinstance(part, EmbeddedResource) and part.text is None and part.data:
            file_name = part.uri.rsplit("/", 1)[-1] or None
            mime = part.mime_type or "application/octet-stream"
            blob = FileContent(data=part.data, mime_type=mime, name=file_name)
            return self._content(blob, index)
        return {"text": text_stand_in(part, "a Bedrock request", "Converse has no block for it")}

    # response -------------------------------------------------------------------------------
    def _answer(self, request: ChatRequest) -> Answer | None:
        output = self.output_schema(self.default_parameters.override(request.parameters))
        return None if output is None else Answer(ANSWER_TOOL, answer_schema(output)[1])

    def _parse_for(self, request: ChatRequest, data: Any) -> ChatResponse:
        return self._parse(data, self._answer(request))

    def _parser_for(self, request: ChatRequest) -> BedrockStreamParser:
        return BedrockStreamParser(self._http, self._answer(request))

    def _parser(self) -> StreamParser:
        return BedrockStreamParser(self._http)

    def _parse(self, data: Any, answer: Answer | None = None) -> ChatResponse:
        if not isinstance(data, dict):
            raise self._http.protocol_error("the response is not a JSON object")
        message = data["output"]["message"]
        if not isinstance(message["content"], list) or not all(
            isinstance(block, dict) for block in message["content"]
        ):
            raise self._http.protocol_error("the message content is not a list of blocks")
        text: list[str] = []
        answers: list[str] = []
        reasoning: list[str] = []
        signature: str | None = None
        redacted: list[str] = []
        requests: list[ToolExecutionRequest] = []
        for block in message["content"]:
            if "text" in block:
                text.append(str(block["text"]))
            elif "toolUse" in block:
                use = block["toolUse"]
                if answer is not None and use.get("name") == answer.name:
                    answers.append(answer_text(use.get("input"), answer.wrapped))
                    continue
                requests.append(
                    ToolExecutionRequest(
                        id=str(use["toolUseId"]),
                        name=str(use["name"]),
                        arguments=json.dumps(use.get("input") or {}, ensure_ascii=False),
                    )
                )
            elif "reasoningContent" in block:
                content = block["reasoningContent"]
                if "reasoningText" in content:
                    reasoning.append(str(content["reasoningText"].get("text") or ""))
                    signature = content["reasoningText"].get("signature") or signature
                if "redactedContent" in content:
                    redacted.append(str(content["redactedContent"]))
        if answers:
            text = answers  # the answer is the text; text written before it is dropped
        stop = data.get("stopReason")
        metadata = {k: data[k] for k in ("stopReason", "usage", "metrics") if k in data}
        return ChatResponse(
            AiMessage(
                "".join(text) or None,
                tool_execution_requests=requests,
                reasoning="".join(reasoning) or None,
                attributes=_reasoning_attributes(reasoning, signature, redacted),
            ),
            finish_reason=_finish(stop, bool(answers), bool(requests)),
            usage=_usage(data.get("usage")),
            metadata=metadata,
        )

    # streaming: an AWS event stream, retried while nothing was streamed ---------------------
    def _stream_decoder(self) -> AwsEventStreamDecoder:  # type: ignore[override]
        return AwsEventStreamDecoder(self._http.protocol_error, self._http.max_response_bytes)

    def _retry_stream(self, error: ProviderError, attempt: int) -> bool:
        """A throttling or unavailable exception frame before anything was streamed is tried
        again, while retries are left."""
        return bool(getattr(error, "retry_stream", False)) and attempt < self._http.max_retries

    def _fresh_parser(self, parser: StreamParser) -> StreamParser:
        answer = parser._answer if isinstance(parser, BedrockStreamParser) else None
        return BedrockStreamParser(self._http, answer)


def _has_tool_blocks(messages: list[dict[str, Any]]) -> bool:
    return any(
        "toolUse" in block or "toolResult" in block
        for message in messages
        for block in message["content"]
    )
