"""Typed errors of HTTP tools; all are `RestfulApiError`s with a stable 1821xx code."""

from __future__ import annotations

from typing import Any

from ..errors import ErrorCode, RestfulApiError, ToolTimeoutError

__all__ = [
    "RestfulApiResponseError",
    "RestfulApiTimeoutError",
    "SsrfBlockedError",
]


class RestfulApiTimeoutError(RestfulApiError, ToolTimeoutError):
    """The HTTP call did not finish within its timeout (182101); also a `ToolTimeoutError`."""

    default_code = ErrorCode.RESTFUL_API_EXECUTION_TIMEOUT


class RestfulApiResponseError(RestfulApiError):
    """The server answered 4xx or 5xx (182103); `status`, `reason` and a `body` excerpt."""

    default_code = ErrorCode.RESTFUL_API_RESPONSE_ERROR

    def __init__(
        self,
        message: str,
        *,
        status: int,
        reason: str = "",
        body: str = "",
        url: str = "",
        tool_name: str | None = None,
    ) -> None:
        details: dict[str, Any] = {"status": status, "reason": reason, "body": body, "url": url}
        super().__init__(message, tool_name=tool_name, details=details)
        self.status = status
        self.reason = reason
        self.body = body
        self.url = url


class SsrfBlockedError(RestfulApiError):
    """The target resolves to an address the SSRF policy refuses (182106); nothing was sent."""

    default_code = ErrorCode.RESTFUL_API_SSRF_BLOCKED

    def __init__(self, message: str, *, host: str = "", address: str = "") -> None:
        super().__init__(message, details={"host": host, "address": address})
        self.host = host
        self.address = address
