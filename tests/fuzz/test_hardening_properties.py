"""Property tests (hypothesis) for the argument repair pass and the OpenAPI import: only the
documented typed error escapes, messages stay short, and every input finishes within a
per-input time budget, for inputs up to the size limits (see hardening.py; the
atheris targets `repair` and `openapi` run the same checks under `make fuzz`)."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import hardening


def _profile(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))


_WORDS = [
    "openapi", "paths", "servers", "url", "get", "post", "parameters", "requestBody",
    "content", "application/json", "application/x-www-form-urlencoded", "schema", "$ref",
    "name", "in", "components", "schemas", "properties", "allOf", "items", "required",
    "type", "#/components/schemas/A", "#/components/schemas/B", "A", "B", "query", "path",
    "header", "/x/{id}", "id", "operationId", "object", "string", "3.0.3",
]  # fmt: skip
_documents = st.recursive(
    st.none() | st.booleans() | st.integers() | st.sampled_from(_WORDS) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_WORDS), inner, max_size=5)
    ),
    max_leaves=40,
)


@_profile(60)
@given(st.binary(max_size=200))
def test_arguments_up_to_the_limit_give_a_dict_or_a_short_typed_error(data: bytes) -> None:
    hardening.check_arguments(data)


@_profile(40)
@given(st.sampled_from(["{'a", "key: 1, ", '{"a": 1}', "'", "[", '"\\', "{a:'b', "]))
def test_amplified_patterns_near_the_limits(pattern: str) -> None:
    raw = pattern.encode()
    for count in hardening.REPAIR_LIMITS:
        hardening.check_arguments(b"\x01" + bytes([len(raw) - 1]) + raw + count + b"{}")


@_profile(200)
@given(_documents)
def test_any_document_gives_tools_or_a_card_error(doc: Any) -> None:
    hardening.check_openapi(json.dumps(doc).encode())


@_profile(60)
@given(st.binary(min_size=3, max_size=3))
def test_generated_ref_bombs_import_within_budget(shape: bytes) -> None:
    hardening.check_openapi(b"\x00" + shape)
