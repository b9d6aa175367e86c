"""HTTP tools: `RestfulApi` and `RestfulApiCard`, the SSRF guard, and OpenAPI import.

See docs/http-tools.md for the user guide.
"""

from .card import DEFAULT_MAX_RESPONSE_BYTES, HTTP_METHODS, Location, RestfulApiCard
from .errors import RestfulApiResponseError, RestfulApiTimeoutError, SsrfBlockedError
from .openapi import tools_from_openapi
from .restful_api import PreparedRequest, RestfulApi
from .ssrf import (
    METADATA_ADDRESSES,
    SsrfPolicy,
    check_address,
    get_default_ssrf_policy,
    set_default_ssrf_policy,
)

__all__ = [
    "DEFAULT_MAX_RESPONSE_BYTES",
    "HTTP_METHODS",
    "METADATA_ADDRESSES",
    "Location",
    "PreparedRequest",
    "RestfulApi",
    "RestfulApiCard",
    "RestfulApiResponseError",
    "RestfulApiTimeoutError",
    "SsrfBlockedError",
    "SsrfPolicy",
    "check_address",
    "get_default_ssrf_policy",
    "set_default_ssrf_policy",
    "tools_from_openapi",
]
