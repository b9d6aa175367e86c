"""What the two Azure OpenAI models share: settings, URLs and Entra ID tokens.

Two URL schemes, chosen by `api_version`:

- a dated version (Chat Completions default `2024-10-21`; Responses `2025-04-01-preview`):
  `{endpoint}/openai/deployments/{deployment}/chat/completions?api-version=...` and
  `{endpoint}/openai/responses?api-version=...`;
- `"v1"`, Azure's version-less API: `{endpoint}/openai/v1/chat/completions` and
  `{endpoint}/openai/v1/responses`.

The key (`api_key`, else `AZURE_OPENAI_API_KEY`) goes in the `api-key` header; with a
`token_provider` (a callable returning a Microsoft Entra ID token, called before every
request, e.g. azure-identity's `get_bearer_token_provider(...)`) the request carries
`Authorization: Bearer <token>` instead. A provider that fails (raises, returns no str, a
token that cannot go in a header, an async provider on a sync face) is `AuthenticationError`
(183001) with the provider's exception as `__cause__`, and nothing is sent.
"""

from __future__ import annotations

import asyncio
import inspect
import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from ..errors import AuthenticationError

__all__ = ["AZURE_PROVIDER", "AzureDeployment", "AzureSettings", "TokenProvider"]

AZURE_PROVIDER = "azure.ai.openai"
_TOKENS_MASKED = 8
TokenProvider = Callable[[], str | Awaitable[str]]
"""Returns a bearer token (Microsoft Entra ID), sync or async."""


@dataclass(frozen=True, slots=True)
class AzureSettings:
    """Where and how one Azure OpenAI deployment is reached."""

    endpoint: str
    deployment: str
    api_version: str
    api_key: str | None
    token_provider: TokenProvider | None

    @classmethod
    def resolve(
        cls,
        owner: str,
        *,
        endpoint: str | None,
        deployment: str,
        api_version: str | None,
        default_version: str,
        api_key: str | None,
        token_provider: TokenProvider | None,
    ) -> AzureSettings:
        """Settings from the arguments and the environment (`AZURE_OPENAI_ENDPOINT`,
        `AZURE_OPENAI_API_KEY`, `OPENAI_API_VERSION`); `ValueError` naming what is missing."""
        if not deployment:
            raise ValueError(f"{owner} needs a deployment name")
        endpoint = endpoint or os.environ.get("AZURE_OPENAI_ENDPOINT")
        if not endpoint:
            raise ValueError(
                f"{owner} needs endpoint= (https://<resource>.openai.azure.com) "
                "or the AZURE_OPENAI_ENDPOINT environment variable"
            )
        version = api_version or os.environ.get("OPENAI_API_VERSION") or default_version
        if token_provider is not None:
            if api_key is not None:
                raise ValueError(f"{owner}: give api_key or token_provider, not both")
            return cls(endpoint.rstrip("/"), deployment, version, None, token_provider)
        key = api_key if api_key is not None else os.environ.get("AZURE_OPENAI_API_KEY")
        if not key:
            raise ValueError(
                f"{owner} needs a key: api_key= or the AZURE_OPENAI_API_KEY environment "
                "variable (or token_provider= for Microsoft Entra ID)"
            )
        return cls(endpoint.rstrip("/"), deployment, version, key, None)

    @property
    def key_headers(self) -> dict[str, str]:
        """The fixed authentication header (none with a token provider)."""
        return {"api-key": self.api_key} if self.api_key else {}

    def url(self, operation: str) -> str:
        """The URL of `operation` (`"chat/completions"` or `"responses"`)."""
        if self.api_version == "v1":
            return f"{self.endpoint}/openai/v1/{operation}"
        version = quote(self.api_version, safe="")
        if operation == "responses":
            return f"{self.endpoint}/openai/responses?api-version={version}"
        deployment = quote(self.deployment, safe="")
        return f"{self.endpoint}/openai/deployments/{deployment}/{operation}?api-version={version}"

    def token_headers(self) -> dict[str, str] | None:
        """A fresh bearer header (sync faces), or None without a token provider."""
        if self.token_provider is None:
            return None
        token = self.token_provider()
        if inspect.isawaitable(token):
            close = getattr(token, "close", None)
            if close is not None:
                close()
            raise _TokenRefused(
                "an async token_provider can only be used from the async faces (achat, "
                "astream): nothing was sent"
            )
        return _bearer(token)

    async def atoken_headers(self) -> dict[str, str] | None:
        """A fresh bearer header (async faces), or None without a token provider."""
        provider = self.token_provider
        if provider is None:
            return None
        if inspect.iscoroutinefunction(provider):
            token = await provider()
        else:
            # a sync provider may refresh its token over the network: not on the loop
            token = await asyncio.to_thread(provider)
            if inspect.isawaitable(token):
                token = await token
        return _bearer(token)

    def describe(self, cls_name: str) -> str:
        """The repr of a model using these settings."""
        return (
            f"{cls_name}(deployment={self.deployment!r}, endpoint={self.endpoint!r}, "
            f"api_version={self.api_version!r})"
        )


class _TokenRefused(ValueError):
    """A token provider's answer that cannot be sent (the text never holds the token)."""


def _bearer(token: Any) -> dict[str, str]:
    """The header for a token from a token provider, which must be a non-empty str (not
    `Bearer None`) of visible ASCII (a header value; no line break to inject a header)."""
    if not isinstance(token, str) or not token.strip():
        kind = type(token).__name__ if not isinstance(token, str) else "a blank str"
        raise _TokenRefused(f"token_provider returned no usable token ({kind}): nothing was sent")
    value = token.strip()
    bad = next((i for i, c in enumerate(value) if not "!" <= c <= "~"), None)
    if bad is not None:
        raise _TokenRefused(
            "token_provider returned a token that cannot go in a header (a character that "
            f"is not visible ASCII at position {bad}): nothing was sent"
        )
    return {"authorization": f"Bearer {value}"}


class AzureDeployment:
    """Mixin for an OpenAI model class reached through Azure OpenAI: `deployment` (also sent
    as `model`), `endpoint` (else `AZURE_OPENAI_ENDPOINT`), `api_version` (else
    `OPENAI_API_VERSION`, else the class's `azure_default_version`; `"v1"` for Azure's
    version-less API), and `api_key` (else `AZURE_OPENAI_API_KEY`, sent as `api-key`) or
    `token_provider` (Microsoft Entra ID). Every other option goes to the OpenAI class."""

    provider = AZURE_PROVIDER
    api_key_env: tuple[str, ...] = ("AZURE_OPENAI_API_KEY",)  # checked when the model is built
    default_base_url: str | None = None
    azure_operation = "chat/completions"
    """The path of the OpenAI operation (`"chat/completions"` or `"responses"`)."""
    azure_default_version = "2024-10-21"
    azure: AzureSettings
    _http: Any

    def __init__(
        self,
        deployment: str,
        *,
        endpoint: str | None = None,
        api_version: str | None = None,
        api_key: str | None = None,
        token_provider: TokenProvider | None = None,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> None:
        self.azure = AzureSettings.resolve(
            type(self).__name__,
            endpoint=endpoint,
            deployment=deployment,
            api_version=api_version,
            default_version=self.azure_default_version,
            api_key=api_key,
            token_provider=token_provider,
        )
        super().__init__(  # type: ignore[call-arg]  # the OpenAI model class after us
            deployment,
            api_key="",  # not OPENAI_API_KEY, and no Bearer header
            base_url=self.azure.endpoint,
            headers={**self.azure.key_headers, **(headers or {})},
            **options,
        )
        if self.azure.api_key:
            self._http.add_secret(self.azure.api_key)
        self._tokens: list[str] = []  # the latest tokens from the token provider, masked

    def __repr__(self) -> str:
        return self.azure.describe(type(self).__name__)

    def _url(self, model: str, stream: bool) -> str:
        return self.azure.url(self.azure_operation)

    def _request_headers(self) -> Mapping[str, str] | None:
        try:
            headers = self.azure.token_headers()
        except Exception as e:
            raise self._token_failure(e) from e
        return self._masked(headers)

    async def _arequest_headers(self) -> Mapping[str, str] | None:
        try:
            headers = await self.azure.atoken_headers()
        except Exception as e:  # (a cancellation is not an Exception: it propagates)
            raise self._token_failure(e) from e
        return self._masked(headers)

    def _token_failure(self, error: Exception) -> AuthenticationError:
        """The typed error for a token provider that failed; its text masked like a key."""
        if isinstance(error, _TokenRefused):
            message = f"{self.provider}: {error}"
        else:
            text = str(error).strip()
            detail = self._http.redact(text.splitlines()[0])[:300] if text else ""
            message = (
                f"{self.provider}: the token_provider raised {type(error).__name__}"
                f"{': ' + detail if detail else ''}; nothing was sent"
            )
        return AuthenticationError(message, provider=self.provider)

    def _masked(self, headers: dict[str, str] | None) -> dict[str, str] | None:
        """`headers`, their Entra ID token now masked in errors and logs like a key (a server
        may echo it without its `Bearer`)."""
        token = headers["authorization"].removeprefix("Bearer ") if headers else ""
        if len(token) >= 8 and token not in self._tokens:  # (a shorter one: a common word)
            self._http.add_secret(token)
            self._tokens.append(token)
            if len(self._tokens) > _TOKENS_MASKED:  # a provider may mint one per request
                self._http.remove_secret(self._tokens.pop(0))
        return headers
