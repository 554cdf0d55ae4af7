"""The store's JSON: what `json.loads` reads, read the same, however it is read; what `json.dumps` writes of a
checked value, written as the same JSON."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.store.json_codec import dumps_checked, loads

JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=8), inner, max_size=5),
    max_leaves=30,
)


@given(JSON_VALUES)
def test_reads_what_json_loads_reads(value: object) -> None:
    text = json.dumps(value, ensure_ascii=False)
    assert loads(text) == json.loads(text)


def test_an_integer_wider_than_64_bits_keeps_every_digit() -> None:
    wide = 123456789012345678901234567890
    assert loads(json.dumps({"n": wide, "m": -wide})) == {"n": wide, "m": -wide}


def test_a_number_beyond_a_double_reads_as_json_loads_reads_it() -> None:
    # PostgreSQL's `json` type keeps such a number as written; msgspec refuses it, `json.loads` says inf.
    assert math.isinf(loads('{"n": 1e400}')["n"])


def test_a_repeated_key_keeps_its_last_value() -> None:
    assert loads('{"a": 1, "a": 2}') == {"a": 2}


@given(JSON_VALUES)
def test_a_checked_value_is_written_as_the_json_json_dumps_writes(value: object) -> None:
    # Text that is no UTF-8 (a lone surrogate) is refused by the commands' checks before it reaches the store.
    assert json.loads(dumps_checked(value)) == json.loads(json.dumps(value))


def test_what_msgspec_refuses_is_written_by_json_dumps() -> None:
    wide = 1 << 70
    assert json.loads(dumps_checked({"n": wide, "t": ("a", 1)})) == {"n": wide, "t": ["a", 1]}
