"""What the door may skip for a body read whole: the walk for NULs and depth, and weighing each value again."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.commands.fields import check_payload, decoded_from
from orchestrator.core.errors import CommandError
from orchestrator.core.json_checks import MAX_JSON_DEPTH, json_trouble, may_hold_trouble

JSON = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.text(alphabet=st.characters(codec="utf-8"))),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=3), inner, max_size=4)),
    max_leaves=30,
)


@given(JSON, st.integers(1, 12), st.booleans())
def test_a_body_the_text_clears_holds_nothing_the_walk_would_refuse(value: Any, limit: int, ascii: bool) -> None:
    body = {"command": "x", "v": value}
    raw = json.dumps(body, ensure_ascii=ascii).encode()
    if not may_hold_trouble(raw, limit):
        assert json_trouble(body, limit) is None
    if b"\\u0000" not in raw:  # no NUL: the text reads the depth and the surrogates exactly
        assert may_hold_trouble(raw, limit) == (json_trouble(body, limit) is not None)


NUMBERS = [b"1e400", b"1E+0400", b"-2e309", b"1e-400", b"12e99", b"9" * 309, b"9" * 309 + b".0", b"0.5e3", b"7"]
# Beyond a double through their digits and a small exponent (the text check let them by to a 500).
NUMBERS += [b"1" + b"0" * 300 + b"e10", b"9" * 290 + b".0e20", b"9" * 209 + b".5e99"]
TEXTS = [b'"1e400"', b'"e+000"', b'"' + b"9" * 309 + b'"', b'"a[{"', rb'"a\\e400"']


@given(st.lists(st.sampled_from(NUMBERS + TEXTS), max_size=5))
def test_a_number_beyond_a_double_is_never_cleared_by_its_text(items: list[bytes]) -> None:
    raw = b'{"command": "x", "v": [' + b", ".join(items) + b"]}"
    body = json.loads(raw)
    if not may_hold_trouble(raw, MAX_JSON_DEPTH):
        assert json_trouble(body, MAX_JSON_DEPTH) is None, raw
    if any(n in items for n in (b"1e400", b"1E+0400", b"-2e309", b"1" + b"0" * 300 + b"e10", b"9" * 290 + b".0e20")):
        assert json_trouble(body, MAX_JSON_DEPTH) is not None, "the walk refuses it (so this test can fail)"


def test_a_body_in_utf_16_or_32_is_never_cleared_by_its_text() -> None:
    """`json.loads` reads them; the text's passes read bytes as UTF-8 does, so they leave such a body to the walk."""
    for encoding in ("utf-16", "utf-16-le", "utf-16-be", "utf-32", "utf-32-le", "utf-32-be"):
        for text in ('{"s": "a\\u0000b"}', '{"n": 1e400}', '{"n": 1}'):
            raw = text.encode(encoding)
            assert json.loads(raw) is not None
            assert may_hold_trouble(raw, MAX_JSON_DEPTH), (encoding, text)


def test_a_nul_or_a_deep_body_is_never_cleared_by_its_text() -> None:
    assert may_hold_trouble(json.dumps({"s": "a\x00"}).encode(), MAX_JSON_DEPTH)
    deep: Any = 1
    for _ in range(MAX_JSON_DEPTH + 1):
        deep = [deep]
    assert may_hold_trouble(json.dumps({"v": deep}).encode(), MAX_JSON_DEPTH)
    # A written backslash before `u0000` is no NUL: cleared or not, the walk decides.
    raw = json.dumps({"s": "\\u0000"}).encode()
    assert may_hold_trouble(raw, MAX_JSON_DEPTH) and json_trouble(json.loads(raw), MAX_JSON_DEPTH) is None


# Text with surrogates of either half, alone or paired, beside backslashes and letters that look like escapes.
SURROGATES = st.lists(
    st.sampled_from(
        ["\ud800", "\udbff", "\udc00", "\udfff", "\U0001f600", "\\", "u", "d8", "dc", "a", "\\ud800", "\\udc00"]
    ),
    max_size=8,
).map("".join)


@given(st.lists(SURROGATES, max_size=4), st.booleans())
def test_the_text_finds_exactly_the_lone_surrogates_the_walk_refuses(texts: list[str], ascii: bool) -> None:
    body = {"command": "x", "v": texts}
    try:
        raw = json.dumps(body, ensure_ascii=ascii).encode()
    except UnicodeEncodeError:  # a lone surrogate left as itself: UTF-8 cannot carry it
        raw = json.dumps(body, ensure_ascii=ascii).encode(errors="surrogatepass")
    assert may_hold_trouble(raw, MAX_JSON_DEPTH) == (json_trouble(json.loads(raw), MAX_JSON_DEPTH) is not None), raw


def test_a_lone_surrogate_is_never_cleared_by_its_text_and_a_pair_is() -> None:
    lone = json.dumps({"s": "a\ud800b"}).encode()
    assert may_hold_trouble(lone, MAX_JSON_DEPTH)
    assert json_trouble(json.loads(lone), MAX_JSON_DEPTH) == "s: a lone surrogate (\\ud800 to \\udfff) cannot be stored"
    pair = json.dumps({"s": "\U0001f600"}).encode()  # written as the escapes of its two halves: an emoji
    assert not may_hold_trouble(pair, MAX_JSON_DEPTH) and json_trouble(json.loads(pair), MAX_JSON_DEPTH) is None


def test_a_value_json_has_no_form_for_is_named() -> None:
    assert json_trouble({"v": {"when": [1, {1, 2}]}}, MAX_JSON_DEPTH) == "v.when.1: a set is no JSON value"


# Numbers as a body may spell them: an exponent, either case, a sign on either; `1e15` grows the most as stored.
NUMBER_TOKENS = st.builds(
    "{}{}{}{}{}".format,
    st.sampled_from(["", "-"]),
    st.sampled_from(["0", "1", "9", "12", "1.5", "0.25"]),
    st.sampled_from(["e", "E"]),
    st.sampled_from(["", "+", "-"]),
    st.integers(0, 20).map(str),
)
STRING_TOKENS = st.builds(
    json.dumps, st.text(alphabet=st.characters(codec="utf-8"), max_size=20), ensure_ascii=st.booleans()
)


def _refusal(value: Any, limit: int, body: int | None) -> str | None:
    try:
        with decoded_from(body):
            check_payload("v", value, limit)
    except CommandError as err:
        return err.code
    return None


@given(st.lists(st.one_of(NUMBER_TOKENS, STRING_TOKENS), max_size=30), st.floats(1, 6))
def test_a_value_of_a_body_is_refused_as_it_would_be_weighed(tokens: list[str], times: float) -> None:
    """Skipping the weighing for a value of a small body never lets by what the weighing refuses."""
    raw = ("[" + ",".join(tokens) + "]").encode()
    value = json.loads(raw)
    limit = int(times * len(raw))
    assert _refusal(value, limit, len(raw)) == _refusal(value, limit, None), raw


def test_a_number_in_exponent_form_is_weighed_as_stored() -> None:
    """`1e15`, 4 bytes, is stored as `1000000000000000.0`, 18: a limit of 3 times the body is no bound for it."""
    raw = ("[" + ",".join(["1e15"] * 100) + "]").encode()
    assert _refusal(json.loads(raw), 3 * len(raw), len(raw)) == "limit_exceeded"
    assert _refusal(json.loads(raw), 19 * 100 + 1, len(raw)) is None


def test_a_value_too_large_is_refused_when_its_body_is_not_known_to_fit() -> None:
    value = {"s": "é" * 100}
    with decoded_from(120):
        try:
            check_payload("v", value, 200)
        except CommandError as err:
            assert err.code == "limit_exceeded"
        else:
            raise AssertionError("a 208-byte value passed a 200-byte limit")


def test_a_value_is_weighed_as_stored_in_utf8_not_as_escapes() -> None:
    check_payload("v", {"s": "é" * 100}, 250)  # 208 bytes as stored; its escapes (`\\u00e9`) would weigh 608
