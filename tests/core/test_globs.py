"""Type and alias globs: one-segment `*`, any-segment `**`, in-segment `*`, validation, alias syntax."""

from __future__ import annotations

from fnmatch import fnmatchcase

import pytest
from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.globs import (
    compile_alias_glob,
    compile_type_glob,
    validate_alias,
    validate_glob,
    varying_wildcards,
)


@pytest.mark.parametrize(
    ("pattern", "name", "expected"),
    [
        ("object.written", "object.written", True),
        ("object.written", "object.deleted", False),
        ("object.*", "object.written", True),
        ("object.*", "object", False),
        ("object.*", "object.a.b", False),
        ("object.**", "object.written", True),
        ("object.**", "object.a.b", True),
        ("object.**", "object", True),
        ("object.**", "objects.written", False),
        ("**", "anything.at.all", True),
        ("**.idle", "lane.idle", True),
        ("**.idle", "idle", True),
        ("a.**.b", "a.b", True),
        ("a.**.b", "a.x.y.b", True),
        ("a.**.b", "a.x.y.c", False),
        ("thread.item_*", "thread.item_posted", True),
        ("thread.item_*", "thread.item_", True),
        ("thread.item_*", "thread.other", False),
    ],
)
def test_type_globs(pattern: str, name: str, expected: bool) -> None:
    assert compile_type_glob(pattern).matches(name) is expected


@pytest.mark.parametrize(
    ("pattern", "alias", "expected"),
    [
        ("missions/**", "missions/1/cells/2/meta", True),
        ("missions/**", "missions", True),
        ("missions/*/cells/*/meta", "missions/1/cells/2/meta", True),
        ("missions/*/cells/*/meta", "missions/1/cells/meta", False),
        ("chats/**", "chat/1", False),
        ("chat-*", "chat-42", True),
        ("chat-*", "chat-42/x", False),
        ("app/missions/sweep", "app/missions/sweep", True),
        ("tickets/*.json", "tickets/a.json", True),
        ("tickets/*.json", "tickets/a.jsonx", False),
    ],
)
def test_alias_globs(pattern: str, alias: str, expected: bool) -> None:
    assert compile_alias_glob(pattern).matches(alias) is expected


def test_dot_is_literal_in_alias_globs() -> None:
    assert not compile_alias_glob("a.b").matches("axb")


@pytest.mark.parametrize(
    ("pattern", "kind", "problem"),
    [
        ("", "type", "empty"),
        ("a..b", "type", "empty segment"),
        ("a//b", "alias", "empty segment"),
        ("a.***", "type", r"'\*\*\*'"),
        ("a.b**", "type", "whole segment"),
        ("a/**x/b", "alias", "whole segment"),
        ("a b", "alias", "whitespace"),
        ("/a", "alias", "start or end"),
        ("a.", "type", "start or end"),
        ("a/b", "type", "not allowed in a type"),
        ("a?", "alias", "not allowed in an alias"),
        ("a/../b", "alias", r"'\.\.' segment"),
        ("./**", "alias", r"'\.\.' segment"),
        ("a/" * 128 + "b", "alias", "at most 256"),
        ("a." * 128 + "b", "type", "at most 256"),
    ],
)
def test_bad_globs_are_refused_with_the_reason(pattern: str, kind: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        validate_glob(pattern, kind)  # type: ignore[arg-type]
    compile_ = compile_type_glob if kind == "type" else compile_alias_glob
    with pytest.raises(ValueError):
        compile_(pattern)


@pytest.mark.parametrize("alias", ["tickets/42/meta", "a", "user@x.org/inbox:1", "a-b_c.d", "a/.hidden/b..c"])
def test_good_aliases(alias: str) -> None:
    assert validate_alias(alias) == alias


@pytest.mark.parametrize(
    ("alias", "problem"),
    [
        ("", "empty"),
        ("a" * 257, "at most 256"),
        ("a/*", r"'\*'"),
        ("/a", "start or end"),
        ("a/", "start or end"),
        ("a//b", "empty segment"),
        ("a b", "may hold only"),
        ("a/../b", r"'\.' or '\.\.' segment"),
        ("..", r"'\.' or '\.\.' segment"),
        ("a/./b", r"'\.' or '\.\.' segment"),
        ("a/b/.", r"'\.' or '\.\.' segment"),
        ("a\x00b", "may hold only"),
        ("a\nb", "may hold only"),
        ("a/\u202eb", "may hold only"),
    ],
)
def test_bad_aliases_name_the_problem(alias: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        validate_alias(alias)


def _reference(pattern: list[str], name: list[str]) -> bool:
    if not pattern:
        return not name
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_reference(rest, name[i:]) for i in range(len(name) + 1))
    return bool(name) and fnmatchcase(name[0], head) and _reference(rest, name[1:])


_pattern_segments = st.sampled_from(["a", "b", "*", "**", "a*", "*b", "*a*", "a*b*"])
_name_segments = st.sampled_from(["a", "b", "ab", "ba", "c", "aab"])


# Both engines: a glob with at most one varying wildcard is matched by Python's, any other by RE2.
@given(st.lists(_pattern_segments, min_size=1, max_size=7), st.lists(_name_segments, min_size=1, max_size=8))
def test_glob_matching_agrees_with_a_reference(pattern: list[str], name: list[str]) -> None:
    expected = _reference(pattern, name)
    assert compile_type_glob(".".join(pattern)).matches(".".join(name)) is expected
    assert compile_alias_glob("/".join(pattern)).matches("/".join(name)) is expected


# The longest names (an alias of 256 characters: 128 one-letter segments; a segment of 255), and globs made to
# backtrack over them, each failing only at its end: Python's engine took hours (six `**`: 11 s at 50 segments).
_DEEPEST = "/".join(["a"] * 128)


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("pattern", "alias"),
    [
        ("**/a/**/a/**/a/**/a/**/a/**/a/**/b", _DEEPEST),
        ("/".join(["**", "a"] * 51) + "/b", _DEEPEST),  # 256 characters, the most a glob has
        ("*a" * 127 + "b", "a" * 255),
        ("/".join(["*a*"] * 63 + ["b*"]), "/".join(["a"] * 64)),
        # An `a` and ten segments after it: a DFA remembers where each `a` was (2^10 states), within its budget.
        ("**/a/" + "/".join(["*"] * 10) + "/b*", _DEEPEST),
        ("**/*a*a*a*a*a/**/*a*a*a*a*a/**/b", "/".join(["a" * 15] * 15 + ["a"])),
    ],
)
def test_a_glob_made_to_backtrack_answers_at_once(pattern: str, alias: str) -> None:
    glob = compile_alias_glob(pattern)
    assert not glob.matches(alias)
    # RE2's DFA within its memory budget: one that could not start answered no match to everything.
    assert compile_alias_glob(pattern[: pattern.rindex("b")] + "a").matches(alias), "the same glob ending in `a`"


@pytest.mark.parametrize(
    ("pattern", "varying"),
    [
        ("chats/*", 0),
        ("a/*/b/*", 0),
        ("docs/**", 1),
        ("tenants/*/docs/**", 1),
        ("chat-*", 1),
        ("a/**/b/**", 2),
        ("**/x-*", 2),
        ("a*b*", 2),
    ],
)
def test_only_a_glob_with_two_varying_wildcards_leaves_pythons_engine(pattern: str, varying: int) -> None:
    """A whole `*` segment takes exactly one segment, so the common globs keep the faster engine."""
    assert varying_wildcards(pattern, "/") == varying
