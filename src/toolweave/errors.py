"""Error classes and their stable codes.

Every error toolweave raises derives from `ToolweaveError` and carries a numeric `code` that
stays the same across releases. Where openJiuwen has a counterpart the number is reused
(182xxx tools, 189xxx schemas, 110600 aborted callbacks); numbers of our own are in the
same ranges.
"""

from __future__ import annotations

from enum import IntEnum
from typing import Any

__all__ = [
    "AbortError",
    "AuthenticationError",
    "ErrorCode",
    "HallucinatedToolError",
    "McpError",
    "MissingApiKeyError",
    "ProviderError",
    "RateLimitError",
    "RestfulApiError",
    "SchemaError",
    "StructuredOutputError",
    "ToolArgumentsError",
    "ToolCardError",
    "ToolExecutionError",
    "ToolLoopLimitError",
    "ToolNotSupportedError",
    "ToolTimeoutError",
    "ToolweaveError",
    "UnsupportedOptionError",
]


class ErrorCode(IntEnum):
    """Stable numeric codes, shared with openJiuwen where a counterpart exists."""

    CALLBACK_EXECUTION_ABORTED = 110600
    TOOL_CARD_INVALID = 182000
    TOOL_STREAM_NOT_SUPPORTED = 182010
    TOOL_INVOKE_NOT_SUPPORTED = 182011
    TOOL_EXECUTION_ERROR = 182012
    TOOL_EXECUTION_TIMEOUT = 182013
    TOOL_ARGUMENTS_INVALID = 182014
    TOOL_NOT_FOUND = 182015
    TOOL_LOOP_LIMIT = 182016
    GUARDRAIL_HALTED = 182030
    USAGE_LIMIT_EXCEEDED = 182040
    HISTORY_INVALID = 182041
    RESTFUL_API_CARD_CONFIG_INVALID = 182100
    RESTFUL_API_EXECUTION_TIMEOUT = 182101
    RESTFUL_API_RESPONSE_SIZE_EXCEED_LIMIT = 182102
    RESTFUL_API_RESPONSE_ERROR = 182103
    RESTFUL_API_EXECUTION_ERROR = 182104
    RESTFUL_API_RESPONSE_PROCESS_ERROR = 182105
    RESTFUL_API_SSRF_BLOCKED = 182106
    LOCAL_FUNCTION_FUNC_NOT_SUPPORTED = 182200
    LOCAL_FUNCTION_EXECUTION_ERROR = 182205
    MCP_CLIENT_NOT_SUPPORTED = 182300
    MCP_EXECUTION_ERROR = 182301
    MCP_CONNECTION_ERROR = 182302
    MCP_TIMEOUT = 182303
    MCP_AUTH_ERROR = 182304
    PROVIDER_ERROR = 183000
    PROVIDER_AUTHENTICATION = 183001
    PROVIDER_RATE_LIMIT = 183002
    PROVIDER_UNSUPPORTED_OPTION = 183003
    PROVIDER_RESPONSE_INVALID = 183004
    STRUCTURED_OUTPUT_INVALID = 183100
    DURABLE_DATABASE_UNAVAILABLE = 184000
    SCHEMA_VALIDATE_INVALID = 189001
    SCHEMA_FORMAT_INVALID = 189002


class ToolweaveError(Exception):
    """Base class of every toolweave error; `str(e)` is ``"[code] message"``."""

    default_code: ErrorCode = ErrorCode.TOOL_EXECUTION_ERROR

    def __init__(
        self,
        message: str,
        *,
        code: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code = int(code if code is not None else self.default_code)
        self.details: dict[str, Any] = dict(details or {})

    def __str__(self) -> str:
        return f"[{self.code}] {self.message}"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-friendly view: type, code, message and details."""
        return {
            "type": type(self).__name__,
            "code": self.code,
            "message": self.message,
            "details": self.details,
        }


class ToolCardError(ToolweaveError, ValueError):
    """A tool declaration or card is invalid (bad name, empty id, unusable schema)."""

    default_code = ErrorCode.TOOL_CARD_INVALID


class SchemaError(ToolweaveError, ValueError):
    """A schema cannot be built or transformed for a dialect."""

    default_code = ErrorCode.SCHEMA_FORMAT_INVALID


class ToolNotSupportedError(ToolweaveError):
    """The tool does not support this way of being called (invoke or stream)."""

    default_code = ErrorCode.TOOL_INVOKE_NOT_SUPPORTED


class ToolArgumentsError(ToolweaveError, ValueError):
    """The model sent arguments that cannot be parsed or do not match the schema.

    `message` is written for the model: it says what was wrong and how to fix it.
    `errors` lists the individual problems (location, message, input).
    """

    default_code = ErrorCode.SCHEMA_VALIDATE_INVALID
    max_message_chars = 4000
    """Longer messages are cut (the model reads them; a huge input must not make them huge)."""

    def __init__(
        self,
        message: str,
        *,
        tool_name: str | None = None,
        errors: list[dict[str, Any]] | None = None,
        code: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        limit = self.max_message_chars
        if len(message) > limit:
            cut = len(message) - (limit - 40)
            message = f"{message[: limit - 40]}... ({cut} more characters cut)"
        super().__init__(message, code=code, details=details)
        self.tool_name = tool_name
        self.errors: list[dict[str, Any]] = list(errors or [])


class ToolExecutionError(ToolweaveError):
    """The tool itself raised; the original exception is `__cause__` and `cause`."""

    default_code = ErrorCode.TOOL_EXECUTION_ERROR

    def __init__(
        self,
        message: str,
        *,
        tool_name: str | None = None,
        cause: BaseException | None = None,
        code: int | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message, code=code, details=details)
        self.tool_name = tool_name
        self.cause = cause
        if cause is not None:
            self.__cause__ = cause


class ToolTimeoutError(ToolExecutionError, TimeoutError):
    """The tool did not finish within its timeout and was cancelled."""

    default_code = ErrorCode.TOOL_EXECUTION_TIMEOUT


class HallucinatedToolError(ToolweaveError, LookupError):
    """The model asked for a tool that is not registered."""

    default_code = ErrorCode.TOOL_NOT_FOUND

    def __init__(self, message: str, *, tool_name: str, available: list[str]) -> None:
        super().__init__(message, details={"tool_name": tool_name, "available": available})
        self.tool_name = tool_name
        self.available = available


class ToolLoopLimitError(ToolweaveError, RuntimeError):
    """The model kept calling tools past `max_tool_calling_round_trips`."""

    default_code = ErrorCode.TOOL_LOOP_LIMIT


class AbortError(ToolweaveError):
    """Raised by a callback to veto the call in progress.

    When `cause` is given, the cause is raised to the caller instead (openJiuwen rule).
    """

    default_code = ErrorCode.CALLBACK_EXECUTION_ABORTED

    def __init__(self, reason: str = "aborted by callback", *, cause: BaseException | None = None):
        super().__init__(reason)
        self.reason = reason
        self.cause = cause


class RestfulApiError(ToolExecutionError):
    """An HTTP tool failed: timeout, size limit, HTTP error status, parse failure or SSRF."""

    default_code = ErrorCode.RESTFUL_API_EXECUTION_ERROR


class McpError(ToolExecutionError):
    """An MCP tool call or connection failed."""

    default_code = ErrorCode.MCP_EXECUTION_ERROR


class ProviderError(ToolweaveError):
    """A model provider answered with an error, or could not be reached.

    `status` is the HTTP status (None for connection errors) and `body` an excerpt of the
    response body with secrets removed.
    """

    default_code = ErrorCode.PROVIDER_ERROR

    def __init__(
        self,
        message: str,
        *,
        provider: str = "",
        status: int | None = None,
        body: str | None = None,
        code: int | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message, code=code, details={"provider": provider, "status": status})
        self.provider = provider
        self.status = status
        self.body = body
        self.retry_after = retry_after


class AuthenticationError(ProviderError):
    """The provider rejected the credentials (HTTP 401/403)."""

    default_code = ErrorCode.PROVIDER_AUTHENTICATION


class MissingApiKeyError(AuthenticationError):
    """No API key for the provider's own cloud endpoint; raised before anything is sent.
    `env_var` names the environment variable that was read."""

    def __init__(self, message: str, *, provider: str, env_var: str) -> None:
        super().__init__(message, provider=provider)
        self.env_var = env_var


class RateLimitError(ProviderError):
    """The provider is rate limiting (HTTP 429) and retries were exhausted."""

    default_code = ErrorCode.PROVIDER_RATE_LIMIT


class UnsupportedOptionError(ProviderError, ValueError):
    """A request option the provider or endpoint cannot honour; raised before sending."""

    default_code = ErrorCode.PROVIDER_UNSUPPORTED_OPTION

    def __init__(self, provider: str, option: str, reason: str = "") -> None:
        text = f"{provider} does not support the option {option!r}"
        super().__init__(f"{text}: {reason}" if reason else text, provider=provider)
        self.option = option


class StructuredOutputError(ToolweaveError, ValueError):
    """The model's final answer did not match the requested output schema."""

    default_code = ErrorCode.STRUCTURED_OUTPUT_INVALID

    def __init__(self, message: str, *, raw_text: str | None) -> None:
        super().__init__(message)
        self.raw_text = raw_text
