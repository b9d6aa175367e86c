"""`McpServerConfig`: how to reach one MCP server, and the model-facing tool-name helpers."""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from ..errors import ErrorCode, McpError
from ..tools.card import _card_error

__all__ = [
    "McpClientType",
    "McpServerConfig",
    "TaskCallPolicy",
    "mcp_model_tool_name",
    "mcp_model_tool_prefix",
    "sanitize_tool_name",
]

McpClientType = Literal["stdio", "streamable-http", "sse"]
TaskCallPolicy = Literal["when_required", "when_allowed", "never"]

_INVALID_NAME_CHARS = re.compile(r"[^a-zA-Z0-9_-]")
_MAX_NAME = 64


def sanitize_tool_name(name: str) -> str:
    """Make `name` match ``^[a-zA-Z0-9_-]{1,64}$``, deterministically.

    Other characters become ``_``; a name longer than 64 characters is cut to 55 and given
    ``_`` plus 8 hex digits of the SHA-1 of the original, so two long names that share a
    prefix stay distinct. A valid name is returned unchanged.
    """
    clean = _INVALID_NAME_CHARS.sub("_", name)
    if not clean:
        clean = "tool"
    if len(clean) > _MAX_NAME:
        digest = hashlib.sha1(name.encode("utf-8")).hexdigest()[:8]
        clean = f"{clean[: _MAX_NAME - 9]}_{digest}"
    return clean


def mcp_model_tool_prefix(server_name: str) -> str:
    """The prefix of prefixed tool names: ``"mcp_{server}_"`` (openJiuwen's helper)."""
    return f"mcp_{server_name}_"


def mcp_model_tool_name(server_name: str, tool_name: str) -> str:
    """``mcp_{server}_{tool}``, sanitised to a name every provider accepts."""
    return sanitize_tool_name(f"{mcp_model_tool_prefix(server_name)}{tool_name}")


def _normalise_type(value: Any) -> Any:
    if isinstance(value, str):
        v = value.strip().lower().replace("_", "-")
        return {"http": "streamable-http", "streamablehttp": "streamable-http"}.get(v, v)
    return value


class McpServerConfig(BaseModel):
    """How to reach an MCP server.

    `params` depends on `client_type`: for ``"stdio"`` ``command`` (required), ``args``,
    ``env`` (added to the SDK's safe default environment: HOME, PATH, ...; the parent's other
    variables, API keys included, are not passed), ``cwd``; for ``"streamable-http"`` and
    ``"sse"`` ``url`` (required) and ``headers``. When `client_type` is omitted it is taken
    from `params` (``command`` → stdio, ``url`` → streamable HTTP).

    Timeouts are in seconds: `connect_timeout` bounds starting the server and the handshake;
    `call_timeout` is the default per-call limit (``None``: no limit, not recommended — the
    MCP specification asks clients to time requests out). A tool card's `timeout` or a
    per-call `timeout` takes precedence.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    server_name: str
    client_type: McpClientType = "stdio"
    params: dict[str, Any] = Field(default_factory=dict)
    server_id: str = ""
    """Stable identity of the server; defaults to `server_name`."""
    server_path: str | None = None
    """openJiuwen's field: the URL (HTTP) or the command (stdio) when `params` lacks it."""
    auth_headers: dict[str, str] = Field(default_factory=dict)
    """Extra HTTP headers (for example ``Authorization``), merged over ``params["headers"]``."""
    auth_query_params: dict[str, str] = Field(default_factory=dict)
    """Query parameters appended to the server URL (HTTP transports)."""
    connect_timeout: float = 30.0
    call_timeout: float | None = 300.0
    max_reconnect_attempts: int = 3
    """Connection attempts made when a broken connection is re-opened."""
    prefix_tool_names: bool = False
    """Name listed tools ``mcp_{server}_{tool}`` to avoid clashes between servers."""
    requires_approval: bool | list[str] = False
    """True: every tool of this server waits for approval in a `ToolService`; a list: the
    tools with these (server-side) names do (docs/approvals.md)."""
    sampling_max_tokens: int | None = 4096
    """Ceiling on ``maxTokens`` of the server's sampling requests (with a sampling hook)."""
    sampling_max_per_minute: int | None = 30
    """Sampling requests the server may make per minute; more are refused."""
    sampling_max_input_bytes: int | None = Field(default=1024 * 1024, gt=0)
    """The largest sampling request (its messages, system prompt and tools, as JSON) the
    server may send (1 MiB by default; ``None``: no cap); a larger one is refused with a
    JSON-RPC error and never reaches the model."""
    max_message_bytes: int = Field(default=64 * 1024 * 1024, gt=0)
    """The longest message a server may send (a stdio line, or one event of a streamable
    HTTP stream; the SDK's default there is 1 MiB); a longer one is dropped, and the call
    it answered fails with `McpError` (a hostile server cannot fill the memory)."""
    protocol: Literal["auto", "handshake", "newest"] = "auto"
    """Which protocol era to speak. ``"auto"``: over stdio the ``initialize`` handshake
    (2025-11-25), falling back to the newest protocol if the server refuses it; over HTTP
    the newest protocol both sides speak (2026-07-28 when the server offers it, else the
    handshake). ``"handshake"``: always the handshake. ``"newest"``: the newest protocol
    both sides speak, over stdio too. A stdio connection is a session by nature, so the
    newer protocol's per-request metadata buys nothing there and costs 15–20% per call
    (benchmarks/RESULTS.md, W9); over HTTP it needs no server-side session. A client with
    a sampling, elicitation or roots hook uses the handshake unless the server refuses it
    (only a handshake-era server can send requests of its own)."""
    task_calls: TaskCallPolicy = "when_required"
    """Task-augmented calls (MCP 2025-11-25 tasks): ``"when_required"`` for tools whose
    ``execution.taskSupport`` is ``"required"``; ``"when_allowed"`` also for ``"optional"``
    ones; ``"never"`` (tools that require a task are then left out of `list_tools`)."""

    @model_validator(mode="before")
    @classmethod
    def _infer_type(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "client_type" not in data:
            params = data.get("params") or {}
            if isinstance(params, dict) and "url" in params:
                data["client_type"] = "streamable-http"
        else:
            data["client_type"] = _normalise_type(data["client_type"])
        if not data.get("server_id") and data.get("server_name"):
            data["server_id"] = data["server_name"]
        return data

    @field_validator("connect_timeout")
    @classmethod
    def _positive(cls, v: float) -> float:
        if v <= 0:
            raise ValueError("connect_timeout must be positive")
        return v

    @field_validator("call_timeout")
    @classmethod
    def _positive_or_none(cls, v: float | None) -> float | None:
        if v is not None and v <= 0:
            return None
        return v

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as e:  # a typed error with a code, like a card's
            raise _card_error(type(self).__name__, e) from None

    @model_validator(mode="after")
    def _check(self) -> McpServerConfig:
        if not self.server_name:
            raise ValueError("server_name must not be empty")
        if self.client_type == "stdio":
            if not (self.params.get("command") or self.server_path):
                raise ValueError("a stdio MCP server needs params['command']")
        elif not (self.params.get("url") or self.server_path):
            raise ValueError(f"a {self.client_type} MCP server needs params['url']")
        return self

    # derived values -------------------------------------------------------------------------
    @property
    def url(self) -> str:
        """The server URL with `auth_query_params` applied (HTTP transports)."""
        url = str(self.params.get("url") or self.server_path or "")
        if self.auth_query_params:
            from urllib.parse import urlencode

            url += ("&" if "?" in url else "?") + urlencode(self.auth_query_params)
        return url

    @property
    def headers(self) -> dict[str, str]:
        """HTTP headers: ``params["headers"]`` with `auth_headers` on top."""
        base = self.params.get("headers") or {}
        return {**{str(k): str(v) for k, v in dict(base).items()}, **self.auth_headers}

    def stdio_parameters(self) -> dict[str, Any]:
        """The arguments of the SDK's `StdioServerParameters`."""
        p = self.params
        out: dict[str, Any] = {
            "command": str(p.get("command") or self.server_path),
            "args": [str(a) for a in p.get("args") or []],
        }
        if p.get("env") is not None:
            out["env"] = {str(k): str(v) for k, v in dict(p["env"]).items()}
        if p.get("cwd") is not None:
            out["cwd"] = str(p["cwd"]) if isinstance(p["cwd"], Path) else p["cwd"]
        if p.get("encoding_error_handler") in ("strict", "ignore", "replace"):
            out["encoding_error_handler"] = p["encoding_error_handler"]
        return out

    def describe(self) -> str:
        """A short human description used in error messages (no headers, no secrets)."""
        if self.client_type == "stdio":
            sp = self.stdio_parameters()
            cmd = " ".join([sp["command"], *sp["args"]])
            if len(cmd) > 120:
                cmd = cmd[:117] + "..."
            return f"MCP server {self.server_name!r} (stdio: {cmd})"
        url = str(self.params.get("url") or self.server_path or "").split("?")[0]
        return f"MCP server {self.server_name!r} ({self.client_type}: {url})"

    def config_error(self, message: str) -> McpError:
        """An `McpError` about this configuration."""
        return McpError(
            f"{self.describe()}: {message}",
            code=ErrorCode.MCP_CLIENT_NOT_SUPPORTED,
            details={"server_name": self.server_name},
        )
