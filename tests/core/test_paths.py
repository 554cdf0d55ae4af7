"""Dotted paths: dict keys, list indexes, None as missing, path syntax."""

from __future__ import annotations

import pytest

from orchestrator.core.paths import MISSING, canonical_json, resolve, validate_path

ENVELOPE = {
    "id": 7,
    "item": {"id": "i1", "type": "text", "tags": ["a", "b"]},
    "source": {},
    "flag": False,
    "zero": 0,
    "nothing": None,
    "by_index": {"0": "key zero"},
}


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("id", 7),
        ("item.type", "text"),
        ("item.tags.1", "b"),
        ("by_index.0", "key zero"),
        ("flag", False),
        ("zero", 0),
        ("item", ENVELOPE["item"]),
    ],
)
def test_present_paths(path: str, expected: object) -> None:
    assert resolve(ENVELOPE, path) == expected


@pytest.mark.parametrize(
    "path", ["missing", "item.missing", "item.tags.2", "item.tags.x", "id.deeper", "nothing", "source.client"]
)
def test_missing_paths(path: str) -> None:
    assert resolve(ENVELOPE, path) is MISSING


def test_missing_is_falsy_and_named() -> None:
    assert not MISSING
    assert repr(MISSING) == "MISSING"


@pytest.mark.parametrize("path", ["", "a..b", ".a", "a.", "a b", "a.{b}"])
def test_bad_paths_are_refused(path: str) -> None:
    with pytest.raises(ValueError):
        validate_path(path)


def test_canonical_json_ignores_key_order_but_not_types() -> None:
    assert canonical_json({"b": 1, "a": 2}) == canonical_json({"a": 2, "b": 1})
    assert canonical_json(1) != canonical_json("1")
