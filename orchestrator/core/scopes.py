"""An API key's scopes (SPEC section 13): their grammar, and what a set of them reaches.

Owns parsing a scope string and the questions a key's scopes answer: which sessions it sees, reads, listens
to and writes, which aliases it may write, which event types it may emit where. Which command needs which
answer is `access.py`'s. Sessions are matched by their alias with the alias globs of `globs.py`; a session
with no alias is matched only by `**` (every session). A `write:` scope's session glob holds no `:` (the
first `:` after it starts the alias glob); an `emit:` scope's type glob never does (type names have none).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from orchestrator.core.globs import compile_alias_glob, compile_type_glob, validate_glob

ScopeKind = Literal["admin", "listeners", "read", "listen", "write", "emit"]
MAX_SCOPE_CHARS = 300
# The glob that matches everything: every session (alias-less ones too), every alias.
EVERY = "**"


@dataclass(frozen=True)
class Scope:
    """One parsed scope. `session`: the session alias glob (None: every session, for `emit:` without one);
    `alias`: a `write:` scope's alias glob (None: every alias); `types`: an `emit:` scope's type glob."""

    text: str
    kind: ScopeKind
    session: str | None = None
    alias: str | None = None
    types: str | None = None


def parse_scope(text: str) -> Scope:
    """The scope `text` stands for; ValueError naming what is wrong."""
    if not isinstance(text, str) or not text:
        raise ValueError("a scope is a non-empty string")
    if len(text) > MAX_SCOPE_CHARS:
        raise ValueError(f"a scope is at most {MAX_SCOPE_CHARS} characters")
    if text in ("admin", "listeners"):
        return Scope(text, "admin" if text == "admin" else "listeners")
    kind, sep, rest = text.partition(":")
    if not sep or not rest:
        raise ValueError(
            f"{text!r} is not a scope: admin, listeners, read:<session-glob>, listen:<session-glob>,"
            " write:<session-glob>[:<alias-glob>] or emit:<type-glob>[:<session-glob>]"
        )
    if kind in ("read", "listen"):
        return Scope(text, "read" if kind == "read" else "listen", session=_glob(rest, "session", text))
    if kind == "write":
        session, narrowed, alias = rest.partition(":")
        return Scope(
            text,
            "write",
            session=_glob(session, "session", text),
            alias=_glob(_named(alias, "alias glob", text), "alias", text) if narrowed else None,
        )
    if kind == "emit":
        types, narrowed, session = rest.partition(":")
        return Scope(
            text,
            "emit",
            types=_glob(types, "type", text),
            session=_glob(_named(session, "session glob", text), "session", text) if narrowed else None,
        )
    raise ValueError(f"{text!r}: unknown kind {kind!r} (admin, listeners, read, listen, write, emit)")


def _named(part: str, what: str, text: str) -> str:
    """A scope's part after a colon: given, since a colon with nothing after it would read as no narrowing at
    all (`write:acme/**:` writing every alias of the session)."""
    if not part:
        raise ValueError(f"{text!r}: a colon with no {what} after it (leave the colon out to mean every one)")
    return part


def _glob(pattern: str, kind: Literal["session", "alias", "type"], text: str) -> str:
    """`pattern` checked as a glob of its kind (a session glob is an alias glob over sessions' aliases, and its
    refusal says which part it is)."""
    try:
        validate_glob(pattern, "type" if kind == "type" else "alias", f"{kind} glob")
    except ValueError as err:
        raise ValueError(f"{text!r}: {err}") from None
    return pattern


def session_in(glob: str | None, session_alias: str | None) -> bool:
    """Whether a session (by its alias; None: it has none) is under a scope's session glob (None: every one)."""
    if glob is None or glob == EVERY:
        return True
    return session_alias is not None and compile_alias_glob(glob).matches(session_alias)


@dataclass(frozen=True)
class Grant:
    """A key's scopes, parsed, and what they reach."""

    scopes: tuple[Scope, ...]

    @classmethod
    def of(cls, texts: Iterable[str]) -> Grant:
        """A key's grant from its stored scopes. One that no longer parses (a form an earlier release took, as
        `write:acme/**:`) grants nothing, rather than what it was once read as."""
        parsed = []
        for text in texts:
            with contextlib.suppress(ValueError):
                parsed.append(parse_scope(text))
        return cls(tuple(parsed))

    def _of(self, *kinds: ScopeKind) -> Iterable[Scope]:
        return (s for s in self.scopes if s.kind in kinds)

    @property
    def admin(self) -> bool:
        return any(True for _ in self._of("admin"))

    @property
    def listeners(self) -> bool:
        return self.admin or any(True for _ in self._of("listeners"))

    @property
    def any_read(self) -> bool:
        return self.admin or any(True for _ in self._of("read"))

    def read_globs(self) -> list[str]:
        """The session globs this key reads (`**` for an admin)."""
        return [EVERY] if self.admin else [str(s.session) for s in self._of("read")]

    def sees(self, session_alias: str | None) -> bool:
        """Whether the session exists for this key at all: outside everything it reaches it answers not_found."""
        return self.admin or any(
            session_in(s.session, session_alias) for s in self._of("read", "listen", "write", "emit")
        )

    def reads(self, session_alias: str | None) -> bool:
        return self.admin or any(session_in(s.session, session_alias) for s in self._of("read"))

    def listens(self, session_alias: str | None) -> bool:
        return self.admin or any(session_in(s.session, session_alias) for s in self._of("listen"))

    def writes_session(self, session_alias: str | None) -> bool:
        """Writes to the session as a whole (open, close, graph, runs, schedules): a `write:` scope not narrowed
        to some aliases."""
        return self.admin or any(_whole(s) and session_in(s.session, session_alias) for s in self._of("write"))

    def writes_alias(self, session_alias: str | None, alias: str) -> bool:
        return self.admin or any(
            session_in(s.session, session_alias) and (s.alias is None or compile_alias_glob(s.alias).matches(alias))
            for s in self._of("write")
        )

    def emits(self, event_type: str, allow: Sequence[str] | None, session_alias: str | None) -> bool:
        """Whether it may emit `event_type` into the session from outside. The type's `allow` (None: not set)
        names the scopes that may: an `emit:` scope whose type glob matches, or a `write:` scope on the whole
        session; with `allow` unset every such scope may."""
        if self.admin:
            return True
        for scope in self._of("emit", "write"):
            if allow is not None and scope.text not in allow:
                continue
            if scope.kind == "emit":
                if session_in(scope.session, session_alias) and compile_type_glob(str(scope.types)).matches(event_type):
                    return True
            elif _whole(scope) and session_in(scope.session, session_alias):
                return True
        return False


def _whole(scope: Scope) -> bool:
    return scope.alias is None or scope.alias == EVERY


def emitting_scope(text: str) -> str:
    """A scope an event type's `allow` may name: one that can emit (`emit:` or `write:`); ValueError otherwise."""
    scope = parse_scope(text)
    if scope.kind not in ("emit", "write"):
        raise ValueError(f"{text!r} cannot emit; only emit: and write: scopes can")
    return text
