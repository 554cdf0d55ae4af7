"""Scopes: their grammar, and what a set of them reaches (sessions by alias, aliases, event types)."""

from __future__ import annotations

import pytest

from orchestrator.core.scopes import Grant, emitting_scope, parse_scope, session_in


@pytest.mark.parametrize(
    ("text", "kind", "session", "alias", "types"),
    [
        ("admin", "admin", None, None, None),
        ("listeners", "listeners", None, None, None),
        ("read:tenant-a/**", "read", "tenant-a/**", None, None),
        ("listen:**", "listen", "**", None, None),
        ("write:tenant-a/*", "write", "tenant-a/*", None, None),
        ("write:tenant-a/*:tickets/**", "write", "tenant-a/*", "tickets/**", None),
        ("write:t:a:b", "write", "t", "a:b", None),
        ("emit:chat.*", "emit", None, None, "chat.*"),
        ("emit:chat.*:tenant-a/**", "emit", "tenant-a/**", None, "chat.*"),
    ],
)
def test_a_scope_parses_into_its_parts(
    text: str, kind: str, session: str | None, alias: str | None, types: str | None
) -> None:
    scope = parse_scope(text)
    assert (scope.kind, scope.session, scope.alias, scope.types) == (kind, session, alias, types)


@pytest.mark.parametrize(
    "text",
    [
        "",
        "root",
        "read",
        "read:",
        "write:a//b",
        "emit:Chat!",
        "write:a:b/**/",
        "listen:a b",
        "x" * 301,
        # A colon with nothing after it narrows nothing: refused, not read as the whole session (or every one).
        "write:acme/**:",
        "emit:chat.*:",
    ],
)
def test_a_malformed_scope_is_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_scope(text)


def test_a_session_with_no_alias_is_reached_only_by_the_glob_of_every_session() -> None:
    assert session_in("**", None) and session_in(None, None)
    assert not session_in("t/**", None) and not session_in("*", None)
    assert session_in("t/**", "t/a/b") and not session_in("t/*", "t/a/b")


def test_tenant_scopes_reach_their_tenant_only() -> None:
    tenant = Grant.of(["read:t1/**", "write:t1/**", "listen:t1/**"])
    assert tenant.sees("t1/s") and tenant.reads("t1/s") and tenant.writes_session("t1/s") and tenant.listens("t1/s")
    assert not tenant.sees("t2/s") and not tenant.sees(None)


def test_a_narrowed_write_writes_its_aliases_only_and_never_the_session_as_a_whole() -> None:
    narrow = Grant.of(["write:t1/**:tickets/**"])
    assert narrow.writes_alias("t1/s", "tickets/7/meta")
    assert not narrow.writes_alias("t1/s", "billing/1") and not narrow.writes_alias("t2/s", "tickets/1")
    assert not narrow.writes_session("t1/s")
    assert Grant.of(["write:t1/**:**"]).writes_session("t1/s")


def test_an_emit_scope_reaches_every_session_unless_it_names_some() -> None:
    everywhere, narrowed = Grant.of(["emit:chat.*"]), Grant.of(["emit:chat.*:t1/**"])
    assert everywhere.sees("t2/s") and everywhere.sees(None)
    assert everywhere.emits("chat.sent", None, "t2/s") and not everywhere.emits("billing.paid", None, "t2/s")
    assert narrowed.emits("chat.sent", None, "t1/s") and not narrowed.emits("chat.sent", None, "t2/s")
    assert not everywhere.writes_alias("t2/s", "x") and not everywhere.reads("t2/s")


def test_a_types_allow_names_the_scopes_that_may_emit_it() -> None:
    paid = ["emit:payment.*"]
    assert Grant.of(["emit:payment.*"]).emits("payment.captured", paid, "s")
    assert not Grant.of(["emit:**"]).emits("payment.captured", paid, "s"), "only the scopes named, as written"
    assert not Grant.of(["write:**"]).emits("payment.captured", paid, "s")
    assert Grant.of(["write:**"]).emits("payment.captured", None, "s"), "unset: a whole-session write may"
    assert not Grant.of(["write:**:notes/**"]).emits("payment.captured", None, "s")
    assert not Grant.of(["emit:**"]).emits("payment.captured", [], "s"), "[]: nobody from outside"
    assert Grant.of(["admin"]).emits("payment.captured", [], "s")


def test_an_allow_holds_only_scopes_that_can_emit() -> None:
    assert [emitting_scope(s) for s in ("emit:a.*", "write:t/**")] == ["emit:a.*", "write:t/**"]
    for bad in ("read:**", "admin", "emit:"):
        with pytest.raises(ValueError):
            emitting_scope(bad)


def test_a_stored_scope_an_earlier_release_took_and_this_one_refuses_grants_nothing() -> None:
    grant = Grant.of(["write:acme/**:", "read:acme/**"])
    assert [s.text for s in grant.scopes] == ["read:acme/**"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("emit:chat.*:acme/**:x", "session glob 'acme/**:x'"),
        ("read:a**b", "session glob 'a**b'"),
        ("write:acme/**:x**y", "alias glob 'x**y'"),
    ],
)
def test_a_bad_glob_in_a_scope_is_named_by_the_part_it_is(text: str, said: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_scope(text)
    assert f"{text!r}: {said}: " in str(refused.value)
