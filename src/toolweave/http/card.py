"""`RestfulApiCard`: a `ToolCard` that also says how to call one HTTP endpoint."""

from __future__ import annotations

import logging
import re
from enum import StrEnum
from typing import Any
from urllib.parse import urlsplit

import pydantic
from pydantic import field_validator, model_validator

from ..errors import ErrorCode, ToolCardError, ToolweaveError
from ..tools.card import ToolCard
from .ssrf import SsrfPolicy, get_default_ssrf_policy

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "HTTP_METHODS", "Location", "RestfulApiCard"]

logger = logging.getLogger("toolweave.http")

DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024
HTTP_METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS")
PLACEHOLDER = re.compile(r"\{([^{}]+)\}")


class Location(StrEnum):
    """Where a schema property goes in the request (its `location` key; default body)."""

    PATH = "path"
    QUERY = "query"
    HEADER = "header"
    BODY = "body"
    FORM = "form"


class _ConfigInvalid(Exception):
    """Raised inside validators; deliberately not a ValueError, so pydantic lets it through
    instead of wrapping it in a ValidationError (which would lose the code)."""


def _invalid(message: str) -> ToolCardError:
    return ToolCardError(message, code=ErrorCode.RESTFUL_API_CARD_CONFIG_INVALID)


def property_location(prop: Any) -> Location:
    """The location a schema property declares (`body` when it declares none)."""
    if not isinstance(prop, dict) or prop.get("location") in (None, ""):
        return Location.BODY
    raw = prop["location"]
    try:
        return Location(str(raw).lower())
    except ValueError:
        raise _ConfigInvalid(
            f"unknown location {raw!r}; use one of {', '.join(m.value for m in Location)}"
        ) from None


class RestfulApiCard(ToolCard):
    """A card for one HTTP endpoint.

    `url` may hold `{name}` placeholders, each naming an `input_params` property with
    `"location": "path"`. Every property says where it goes with a `location` key (`path`,
    `query`, `header`, `body`, `form`; default `body`). `headers`, `queries` and `paths` are
    defaults the call's arguments override (`None` or `""` keep the default). The SSRF guard
    applies `ssrf_policy` (else the process default); `allow_private_network=True` also
    allows private and loopback addresses for this card. Invalid configuration raises
    `ToolCardError` with code 182100.
    """

    url: str
    method: str = "POST"
    headers: dict[str, Any] = pydantic.Field(default_factory=dict)
    queries: dict[str, Any] = pydantic.Field(default_factory=dict)
    paths: dict[str, Any] = pydantic.Field(default_factory=dict)
    timeout: float | None = 60.0
    max_response_byte_size: int = DEFAULT_MAX_RESPONSE_BYTES
    allow_private_network: bool = False
    ssrf_policy: SsrfPolicy | None = None

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except _ConfigInvalid as e:
            raise _invalid(str(e)) from None
        except pydantic.ValidationError as e:
            for err in e.errors():
                cause = (err.get("ctx") or {}).get("error")
                if isinstance(cause, ToolweaveError):
                    # pydantic re-creates the error from its message, so the code is lost
                    raise ToolCardError(cause.message, code=ErrorCode.TOOL_CARD_INVALID) from None
            raise _invalid(f"invalid RestfulApiCard: {e}") from e

    @field_validator("method", mode="before")
    @classmethod
    def _method(cls, v: Any) -> str:
        method = str(v).upper() if isinstance(v, str) else v
        if method not in HTTP_METHODS:
            raise _ConfigInvalid(
                f"unsupported HTTP method {v!r}; use one of {', '.join(HTTP_METHODS)}"
            )
        return str(method)

    @field_validator("max_response_byte_size")
    @classmethod
    def _size(cls, v: int) -> int:
        if v <= 0:
            raise _ConfigInvalid(f"max_response_byte_size must be positive, got {v}")
        return v

    @field_validator("url")
    @classmethod
    def _url(cls, v: str) -> str:
        probe = PLACEHOLDER.sub("x", v)
        try:
            parts = urlsplit(probe)
        except ValueError as e:
            raise _ConfigInvalid(f"invalid url {v!r}: {e}") from None
        if parts.scheme.lower() not in ("http", "https"):
            raise _ConfigInvalid(f"url {v!r} must use http or https")
        if not parts.hostname:
            raise _ConfigInvalid(f"url {v!r} has no host")
        return v

    @model_validator(mode="after")
    def _check_locations(self) -> RestfulApiCard:
        props = self.input_params.get("properties") or {}
        locations = {name: property_location(prop) for name, prop in props.items()}
        placeholders = PLACEHOLDER.findall(self.url)
        if placeholders and not props:
            raise _ConfigInvalid(
                f"url {self.url!r} has placeholders {placeholders} but input_params declares "
                "no properties"
            )
        for name in placeholders:
            if locations.get(name) is not Location.PATH and name not in self.paths:
                raise _ConfigInvalid(
                    f"url placeholder {{{name}}} needs an input_params property {name!r} with "
                    '"location": "path" (or a default in paths)'
                )
        for name, loc in locations.items():
            if loc is Location.PATH and name not in placeholders:
                logger.warning(
                    "RestfulApiCard %r: path property %r has no {%s} in the url",
                    self.name,
                    name,
                    name,
                )
        return self

    def effective_ssrf_policy(self) -> SsrfPolicy:
        """The policy this card's requests obey (card policy or default, plus the card flag)."""
        policy = self.ssrf_policy or get_default_ssrf_policy()
        if self.allow_private_network and not policy.allow_private_network:
            policy = policy.model_copy(update={"allow_private_network": True})
        return policy

    def locations(self) -> dict[str, Location]:
        """Each declared property's location."""
        props = self.input_params.get("properties") or {}
        return {name: property_location(prop) for name, prop in props.items()}
