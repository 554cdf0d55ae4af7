"""Globs over event types and aliases, and the syntax of a concrete alias.

Owns glob syntax, its validation and its compilation to regular expressions; matching events against a
whole filter is `filters.py`'s. Type globs split on `.`, alias globs on `/`. A segment that is exactly `*`
matches one segment; exactly `**` matches any number of segments, zero included (so `missions/**` also
matches `missions`, and `a/**/b` matches `a/b`); a `*` inside a longer segment (`chat-*`) matches any run of
characters, possibly empty, within that segment. Compiled patterns are cached: a router matches every event
against every listener, and the number of distinct globs is small. An alias is at most 256 characters so
that it fits an index and a workflow id comfortably, and has no `.` or `..` segment: aliases are compared
segment by segment, never resolved like paths. A glob is at most 256 characters too (a type name is at most 128).

Matching takes time linear in the name whatever the glob (docs/decisions.md, "Globs are matched in linear
time"): Python's backtracking engine took time polynomial in the name, of a degree the glob's wildcards set
(`**/a/**/a/**/a/**/a/**/a/**/a/**/b` against a 50-segment alias: 11 s, the API's event loop held). A glob
with at most one wildcard that takes a varying length (a `**` segment, a `*` inside a longer segment; a whole
`*` segment takes exactly one) is tried once per length that wildcard may take, the rest fixed: time at most
the name's length times the glob's. It keeps Python's engine, the fastest here; any other goes to RE2's DFA.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import re2

GlobKind = Literal["type", "alias"]

MAX_ALIAS_CHARS = 256
MAX_GLOB_CHARS = 256
_ALIAS_SEGMENT = r"[A-Za-z0-9_.:@-]+"
ALIAS_RE = re.compile(rf"^{_ALIAS_SEGMENT}(?:/{_ALIAS_SEGMENT})*$")

# Path-like segments that would give one place two spellings (`a/../b` is `b` to a reader, not to a glob).
_DOT_SEGMENTS = (".", "..")

_SEPARATOR: dict[GlobKind, str] = {"type": ".", "alias": "/"}
# The characters a glob segment may hold besides `*`: an alias segment's, or a type name segment's.
_SEGMENT_CHARS: dict[GlobKind, re.Pattern[str]] = {
    "type": re.compile(r"^[A-Za-z0-9_*-]+$"),
    "alias": re.compile(r"^[A-Za-z0-9_.:@*-]+$"),
}


def validate_alias(alias: str) -> str:
    """Return `alias` if it is a concrete alias; otherwise raise ValueError naming the problem."""
    if not alias:
        raise ValueError("alias must not be empty")
    if len(alias) > MAX_ALIAS_CHARS:
        raise ValueError(f"alias must be at most {MAX_ALIAS_CHARS} characters")
    if "*" in alias:
        raise ValueError("alias must not contain '*' (globs belong in filters and owns)")
    if alias.startswith("/") or alias.endswith("/"):
        raise ValueError("alias must not start or end with '/'")
    if "//" in alias:
        raise ValueError("alias must not contain an empty segment ('//')")
    if not ALIAS_RE.fullmatch(alias):
        raise ValueError("alias segments may hold only letters, digits and '_', '.', ':', '@', '-'")
    if any(segment in _DOT_SEGMENTS for segment in alias.split("/")):
        raise ValueError("alias must not have a '.' or '..' segment (one place, one spelling)")
    return alias


def validate_glob(pattern: str, kind: GlobKind, name: str | None = None) -> str:
    """Return `pattern` if it is a valid glob of `kind`; otherwise raise ValueError naming the problem, and the
    glob by `name` (`session glob`: an alias glob over sessions' aliases; by default `<kind> glob`)."""
    sep = _SEPARATOR[kind]
    name = name or f"{kind} glob"
    if not pattern:
        raise ValueError(f"{name} must not be empty")
    if any(ch.isspace() for ch in pattern):
        raise ValueError(f"{name} {pattern!r} must not contain whitespace")
    if len(pattern) > MAX_GLOB_CHARS:
        raise ValueError(f"{name} must be at most {MAX_GLOB_CHARS} characters")
    if pattern.startswith(sep) or pattern.endswith(sep):
        raise ValueError(f"{name} {pattern!r} must not start or end with {sep!r}")
    for segment in pattern.split(sep):
        if not segment:
            raise ValueError(f"{name} {pattern!r} has an empty segment ({sep + sep!r})")
        if "***" in segment:
            raise ValueError(f"{name} {pattern!r} has '***'; use '*' or '**'")
        if "**" in segment and segment != "**":
            raise ValueError(f"{name} {pattern!r}: '**' must be a whole segment")
        if not _SEGMENT_CHARS[kind].fullmatch(segment):
            raise ValueError(
                f"{name} {pattern!r} has a character not allowed in {'an' if kind == 'alias' else 'a'} {kind}"
            )
        if kind == "alias" and segment in _DOT_SEGMENTS:
            raise ValueError(f"{name} {pattern!r} has a '.' or '..' segment, which no alias has")
    return pattern


def _escape(text: str) -> str:
    """Every character not an ASCII letter or digit escaped: a literal in Python's and PostgreSQL's syntax."""
    return "".join(ch if ch.isalnum() and ch.isascii() else "\\" + ch for ch in text)


def glob_body(pattern: str, sep: str) -> str:
    """A validated glob as a regular expression to anchor, in the syntax Python's `re` and PostgreSQL's share:
    `*` one segment, `**` any number of segments (zero too), `*` inside a segment any run of its characters.
    The router's SQL anchors it with `^...$` (`rules.glob_regex`), Python with `\\A...\\Z`."""
    esc = "\\" + sep
    one = f"[^{sep}]+"
    segments: list[str] = []
    for segment in pattern.split(sep):
        # `**.**` means the same as `**`; collapsing keeps the regex linear.
        if not (segment == "**" and segments and segments[-1] == "**"):
            segments.append(segment)
    parts: list[str] = []
    needs_sep = False
    for index, segment in enumerate(segments):
        if segment == "**":
            if len(segments) == 1:
                parts.append(f"{one}(?:{esc}{one})*")
            elif index == 0:
                parts.append(f"(?:{one}{esc})*")
                needs_sep = False
                continue
            else:
                parts.append(f"(?:{esc}{one})*")
        elif segment == "*":
            parts.append((esc if needs_sep else "") + one)
        else:
            literal = f"[^{sep}]*".join(_escape(part) for part in segment.split("*"))
            parts.append((esc if needs_sep else "") + literal)
        needs_sep = True
    return "(?:" + "".join(parts) + ")"


class CompiledGlob(Protocol):
    """A validated glob, compiled: `pattern` is its anchored regular expression in the syntax Python's `re` and
    PostgreSQL's share (`\\A...\\Z`; PostgreSQL's engine matches it in linear time, as RE2 does)."""

    @property
    def pattern(self) -> str: ...

    def matches(self, name: str) -> bool:
        """Whether the whole name matches the glob."""
        ...


@dataclass(frozen=True, slots=True)
class _Backtracking:
    """A glob Python's engine matches (at most one varying wildcard): 150 to 300 ns a match."""

    pattern: str
    _compiled: re.Pattern[str]

    def matches(self, name: str) -> bool:
        return self._compiled.match(name) is not None


@dataclass(frozen=True, slots=True)
class _Linear:
    """A glob RE2 matches: a `Set` of one, anchored at both ends, since `Set.Match` runs the DFA alone (about
    700 ns a match, where `re2`'s `match` builds the spans of a match object in Python, about 4 us)."""

    pattern: str
    _set: Any

    def matches(self, name: str) -> bool:
        return self._set.Match(name) is not None


_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False
# A compiled glob's memory, its DFA's states included (RE2's default, 8 MiB, grew a cached glob by 7 MiB over a few
# thousand names). The largest program a glob of 256 characters makes (`*a*a...`) needs 128 KiB.
_RE2_OPTIONS.max_mem = 256 * 1024


def varying_wildcards(pattern: str, sep: str) -> int:
    """The wildcards of a glob that take a varying length: each `**` segment, and each `*` of a segment longer
    than `*`. Python's engine tries, for each, every length it may take; a whole `*` segment takes one."""
    return sum(1 if segment == "**" else segment.count("*") for segment in pattern.split(sep) if segment != "*")


def _compile(pattern: str, sep: str) -> CompiledGlob:
    body = glob_body(pattern, sep)
    # Anchored, so `match`, `fullmatch` and `search` all test the whole name.
    regex = r"\A" + body + r"\Z"
    if varying_wildcards(pattern, sep) <= 1:
        return _Backtracking(regex, re.compile(regex))
    # A set's DFA never gives up for slowness, it starts its states again when they fill the budget; it fails
    # (answering no match) only when twenty states do not fit, which the largest globs are tested against.
    linear = re2.Set.FullMatchSet(_RE2_OPTIONS)
    linear.Add(body)
    linear.Compile()
    return _Linear(regex, linear)


@functools.lru_cache(maxsize=4096)
def compile_type_glob(pattern: str) -> CompiledGlob:
    """Compile a type glob (validated; ValueError if not)."""
    return _compile(validate_glob(pattern, "type"), ".")


@functools.lru_cache(maxsize=4096)
def compile_alias_glob(pattern: str) -> CompiledGlob:
    """Compile an alias glob (validated; ValueError if not)."""
    return _compile(validate_glob(pattern, "alias"), "/")


def owned(owns: Sequence[str] | None, alias: str) -> bool:
    """Whether `alias` is under one of the `owns` globs (None: no bound, anywhere is owned)."""
    return owns is None or any(compile_alias_glob(glob).matches(alias) for glob in owns)
