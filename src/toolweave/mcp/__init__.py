"""MCP support: call tools on MCP servers (`McpClient`, `McpTool`) and serve toolweave tools
as an MCP server (`serve_mcp`). Needs the optional `mcp` SDK: ``pip install toolweave[mcp]``.
"""

try:
    import mcp as _sdk  # noqa: F401
    import mcp_types as _sdk_types  # noqa: F401
except ImportError as _e:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "toolweave.mcp needs the MCP Python SDK (mcp>=2.0), which is not installed: "
        "pip install 'toolweave[mcp]'"
    ) from _e

from .auth import DpopVerifier, IntrospectionVerifier, JwtVerifier, McpAuth
from .client import McpAuthError, McpClient, McpTimeoutError, SyncMcpClient
from .client_auth import (
    ClientAuthError,
    ClientCredentialsAuth,
    DpopKey,
    JwtBearerAuth,
    PrivateKeyJwt,
)
from .config import (
    McpClientType,
    McpServerConfig,
    mcp_model_tool_name,
    mcp_model_tool_prefix,
    sanitize_tool_name,
)
from .features import McpCompletion, McpPrompt, McpResource, completion, prompt, resource
from .hooks import SamplingDeclined
from .server import (
    McpTransport,
    build_mcp_server,
    mcp_http_app,
    serve_mcp,
    serve_mcp_async,
    serve_mcp_workers,
)
from .tool import McpTool, McpToolCard, mcp_result_to_value

__all__ = [
    "ClientAuthError",
    "ClientCredentialsAuth",
    "DpopKey",
    "DpopVerifier",
    "IntrospectionVerifier",
    "JwtBearerAuth",
    "JwtVerifier",
    "McpAuth",
    "McpAuthError",
    "McpClient",
    "McpClientType",
    "McpCompletion",
    "McpPrompt",
    "McpResource",
    "McpServerConfig",
    "McpTimeoutError",
    "McpTool",
    "McpToolCard",
    "McpTransport",
    "PrivateKeyJwt",
    "SamplingDeclined",
    "SyncMcpClient",
    "build_mcp_server",
    "completion",
    "mcp_http_app",
    "mcp_model_tool_name",
    "mcp_model_tool_prefix",
    "mcp_result_to_value",
    "prompt",
    "resource",
    "sanitize_tool_name",
    "serve_mcp",
    "serve_mcp_async",
    "serve_mcp_workers",
]
