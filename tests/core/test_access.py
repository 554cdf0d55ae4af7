"""The access decision, without servers: properties over generated scopes and targets, and the cases the
issue names (a tenant's key, an emit-only key)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.access import NEEDS, SESSION_NEEDS, Target, decide, may_call, need_of
from orchestrator.core.scopes import Grant

SESSION_GLOBS = ["**", "t1/**", "t2/**", "t1/*", "t1/a", "t*/a"]
ALIAS_GLOBS = ["**", "x/**", "x/*", "y/1"]
TYPE_GLOBS = ["**", "app.*", "app.**", "chat.message"]
SESSIONS = [None, "t1/a", "t1/b/c", "t2/a", "other"]
ALIASES = ["x/1", "x/1/2", "y/1", "z"]
TYPES = ["app.one", "app.one.two", "chat.message", "misc.thing"]

scope_texts = st.one_of(
    st.just("admin"),
    st.just("listeners"),
    st.sampled_from(SESSION_GLOBS).map(lambda g: f"read:{g}"),
    st.sampled_from(SESSION_GLOBS).map(lambda g: f"listen:{g}"),
    st.sampled_from(SESSION_GLOBS).map(lambda g: f"write:{g}"),
    st.tuples(st.sampled_from(SESSION_GLOBS), st.sampled_from(ALIAS_GLOBS)).map(lambda p: f"write:{p[0]}:{p[1]}"),
    st.sampled_from(TYPE_GLOBS).map(lambda g: f"emit:{g}"),
    st.tuples(st.sampled_from(TYPE_GLOBS), st.sampled_from(SESSION_GLOBS)).map(lambda p: f"emit:{p[0]}:{p[1]}"),
)
scope_sets = st.lists(scope_texts, max_size=5, unique=True)
commands = st.sampled_from([*sorted(NEEDS), "a_command_nobody_named"])


@st.composite
def targets(draw: st.DrawFn, command: str) -> Target:
    need = need_of(command)
    if need == "open_session":
        return Target(new_session_alias=draw(st.sampled_from(SESSIONS)))
    if need not in SESSION_NEEDS:
        return Target()
    if need == "listeners_in_session" and draw(st.booleans()):
        return Target()  # a pause for every session
    emits = ()
    if need == "emit":
        allows = st.none() | st.lists(scope_texts, max_size=3).map(tuple)
        emits = tuple(draw(st.lists(st.tuples(st.sampled_from(TYPES), allows), min_size=1, max_size=3)))
    written = st.lists(st.sampled_from(ALIASES), min_size=1, max_size=3)
    return Target(
        session_id="ses_1",
        session_found=draw(st.booleans()) or draw(st.booleans()),
        session_alias=draw(st.sampled_from(SESSIONS)),
        aliases=tuple(draw(written)) if need == "write_aliases" else (),
        emits=emits,
    )


@given(data=st.data(), command=commands, scopes=scope_sets)
def test_more_scopes_never_take_a_permission_away(data: st.DataObject, command: str, scopes: list[str]) -> None:
    target = data.draw(targets(command))
    more = data.draw(scope_sets)
    narrow, wide = decide(Grant.of(scopes), command, target), decide(Grant.of([*scopes, *more]), command, target)
    if narrow.allowed:
        assert wide.allowed
    if wide.code == "not_found":
        assert narrow.code == "not_found", "a session hidden from more scopes is hidden from fewer"


@given(data=st.data(), command=commands, scopes=scope_sets)
def test_a_session_the_key_cannot_see_is_not_found_and_nothing_else_ever_is(
    data: st.DataObject, command: str, scopes: list[str]
) -> None:
    target = data.draw(targets(command))
    grant = Grant.of(scopes)
    verdict = decide(grant, command, target)
    assert verdict.code in (None, "not_found", "access_denied")
    need = need_of(command)
    # A read's session is hidden outside the key's read scopes; any other command's, outside all it reaches.
    reaches = grant.reads if need == "read" else grant.sees
    hidden = target.session_id is not None and (not target.session_found or not reaches(target.session_alias))
    assert (verdict.code == "not_found") == (hidden and not grant.admin and need in SESSION_NEEDS)
    if verdict.code is not None:
        assert verdict.message.split(":")[0] in ("command", "session_id", "alias", "type"), verdict.message


@given(data=st.data(), command=commands)
def test_admin_may_run_every_command_on_anything(data: st.DataObject, command: str) -> None:
    assert decide(Grant.of(["admin"]), command, data.draw(targets(command))).allowed


@given(data=st.data(), command=commands, scopes=scope_sets)
def test_a_command_a_key_may_not_call_is_refused_on_every_target(
    data: st.DataObject, command: str, scopes: list[str]
) -> None:
    # `whoami`'s dry judgement never hides a command the key could run somewhere.
    grant = Grant.of(scopes)
    if decide(grant, command, data.draw(targets(command))).allowed:
        assert may_call(grant, command)


def test_what_a_key_may_call_follows_its_scopes() -> None:
    def callable_by(*scopes: str) -> set[str]:
        return {name for name in NEEDS if may_call(Grant.of(scopes), name)}

    reader = callable_by("read:t1/**")
    assert {"read_object", "explain_event", "simulate_listener", "list_session_listeners", "list_listeners"} <= reader
    assert not reader & {"write_object", "save_listener", "open_session", "emit_event", "stream", "create_api_key"}
    assert {"write_object", "post_thread_item"} <= callable_by("write:t1/**:x/**")
    assert not callable_by("write:t1/**:x/**") & {"open_session", "close_session", "emit_event", "read_object"}
    assert {"open_session", "close_session", "emit_event"} <= callable_by("write:t1/**")
    assert callable_by("emit:chat.*") == {"emit_event", "emit_events", "get_event_type", "list_event_types", "whoami"}
    assert callable_by("listeners") >= {"save_listener", "pause_listener", "list_listeners", "list_captures"}
    assert callable_by("admin") == set(NEEDS)
    assert not may_call(Grant.of(["read:**", "write:**", "listeners"]), "something_new")


def test_a_command_nobody_named_needs_admin() -> None:
    assert decide(Grant.of(["read:**", "write:**", "listeners"]), "something_new", Target()).code == "access_denied"


def test_a_tenants_key_finds_no_other_tenants_session() -> None:
    tenant = Grant.of(["read:t1/**", "write:t1/**", "listen:t1/**"])
    theirs = Target(session_id="ses_b", session_alias="t2/s", aliases=("x",))
    for command in ("read_object", "write_object", "list_session_events", "explain_event", "stream", "close_session"):
        assert decide(tenant, command, theirs).code == "not_found", command
    mine = Target(session_id="ses_a", session_alias="t1/s", aliases=("x",))
    for command in ("read_object", "write_object", "list_session_events", "explain_event", "stream", "close_session"):
        assert decide(tenant, command, mine).allowed, command


def test_a_session_outside_a_keys_read_scopes_is_not_found_by_a_read_whatever_else_the_key_may_do() -> None:
    tenant = Grant.of(["read:t1/**", "write:t1/**", "emit:app.*"])
    theirs = Target(session_id="ses_b", session_alias="t2/s")
    for command in ("read_object", "list_objects", "list_session_events", "explain_event", "read_graph"):
        verdict = decide(tenant, command, theirs)
        assert verdict.code == "not_found", command
        assert verdict == decide(tenant, command, Target(session_id="ses_b", session_found=False)), command
    ingest = Grant.of(["write:t1/**"])
    assert decide(ingest, "read_object", Target(session_id="ses_a", session_alias="t1/s")).code == "not_found"


def test_an_emit_only_key_emits_and_does_nothing_else() -> None:
    widget = Grant.of(["emit:chat.*"])
    session = Target(session_id="ses_a", session_alias="t1/s", aliases=("x",), emits=(("chat.sent", None),))
    assert decide(widget, "emit_event", session).allowed
    for command in ("write_object", "post_thread_item", "update_graph", "stream"):
        assert decide(widget, command, session).code == "access_denied", command
    # Reading, it finds no session at all: an emit: scope on every session tells it none of theirs apart.
    for command in ("read_object", "list_session_events", "explain_event"):
        assert decide(widget, command, session).code == "not_found", command
    assert decide(widget, "save_listener", Target()).code == "access_denied"
    assert decide(widget, "open_session", Target(new_session_alias="t1/s")).code == "access_denied"
