"""Hypothesis properties for constrained replies and Responses call matching (see
provider_shapes.py; the atheris targets `constrained` and `responses` run the same checks
under `make fuzz`)."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from . import provider_shapes as shapes


def _profile(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck))


_NAMES = st.sampled_from(["lookup", "count", "delete_all", "", "LOOKUP"]) | st.integers()
_ARGUMENTS = st.sampled_from([{}, {"key": "k"}, {"n": 1}, "x", None, [1]]) | st.dictionaries(
    st.text(max_size=3), st.integers(), max_size=2
)
_ANSWERS = st.text(max_size=20) | st.sampled_from(
    ["price \\uZZZZ", "\\ud83d", "a\\ud83d\\u0041", "\\udc00", "bad \\x", "\x01"]
)


@st.composite
def _replies(draw: st.DrawFn) -> str:
    data: dict[str, object] = {}
    if draw(st.booleans()):
        calls = draw(
            st.lists(
                st.fixed_dictionaries({"name": _NAMES, "arguments": _ARGUMENTS})
                | st.sampled_from([1, None, "x"]),
                max_size=45,
            )
        )
        data["tool_calls"] = calls
    if draw(st.booleans()) or not data:
        data["answer"] = draw(_ANSWERS | st.dictionaries(st.text(max_size=3), st.integers()))
    text = json.dumps(data, ensure_ascii=draw(st.booleans()))
    # raw escapes (not JSON-encoded) where the generator put their text
    for raw in ("\\\\uZZZZ", "\\\\ud83d", "\\\\udc00", "\\\\x"):
        if draw(st.booleans()):
            text = text.replace(raw, raw[1:])
    if draw(st.booleans()):
        text = text[: draw(st.integers(0, len(text)))]  # cut short
    return text


@_profile(300)
@given(_replies(), st.lists(st.integers(0, 10_000), max_size=6))
def test_constrained_replies_are_enforced_alike_in_every_face(reply: str, cuts: list[int]) -> None:
    shapes.check_constrained_reply(reply, cuts)


@_profile(200)
@given(st.binary(max_size=120))
def test_constrained_replies_from_pieces(data: bytes) -> None:
    shapes.check_constrained_reply(*shapes.constrained_from_bytes(data))


@_profile(200)
@given(st.text(max_size=40), st.lists(st.integers(0, 10_000), max_size=8))
def test_an_answer_streams_as_its_final_text(answer: str, cuts: list[int]) -> None:
    shapes.check_answer_streams_as_its_text(answer, cuts)


_CALLS = st.builds(
    shapes.Call,
    name=st.sampled_from(["get_weather", "lookup", "", "f"]),
    arguments=st.sampled_from(["{}", '{"city":"Paris"}', '{"city": "Paris"}', "", '{"n":1}']),
    call_id=st.none() | st.sampled_from(["call_0", "call_1", "call_2"]),
    item_id=st.none() | st.sampled_from(["fc_0", "fc_1", "fc_2"]),
    streamed=st.booleans(),
    finished=st.booleans(),
)


@_profile(300)
@given(
    st.lists(_CALLS, max_size=6),
    st.lists(st.integers(0, 20), max_size=8),
    st.lists(st.booleans(), max_size=8),
    st.booleans(),
)
def test_responses_calls_are_matched_by_identity_and_content_never_position(
    calls: list[shapes.Call], order: list[int], drop_ids: list[bool], extra: bool
) -> None:
    shapes.check_responses_stream(calls, order, drop_ids, extra)


@_profile(150)
@given(st.binary(max_size=64))
def test_responses_streams_from_bytes(data: bytes) -> None:
    shapes.check_responses_stream(*shapes.responses_from_bytes(data))
