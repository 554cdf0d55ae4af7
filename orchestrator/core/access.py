"""Who may run which command on what: the decision, as a pure function of a key's scopes and a target.

Owns the table of what each command needs (`NEEDS`) and `decide`, which answers allow, `not_found` (the
session is outside everything the key reaches, or a read's session outside its read scopes, so it cannot
probe for other tenants' sessions) or `access_denied` (it sees the session but may not do this). Finding
the target (a session's alias, an event type's `allow`) is the commands' (`orchestrator.commands.access`);
a command not in the table needs `admin`, so a new command is closed until someone says who may run it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from orchestrator.core.scopes import EVERY, Grant

Need = Literal[
    "admin",  # keys, and whatever the table does not name
    "anyone",  # any key: the application's declared types (schemas, not data)
    "listeners",  # the application's declarations: save and delete listeners and event types, pause all
    "listeners_or_read",  # see the declarations
    "listeners_in_session",  # switch, pause, replay, redeliver in one session (which the key must see)
    "list_sessions",  # any read scope; the list holds the sessions it reads
    "open_session",  # a whole-session write on the new session's alias
    "read",
    "listen",
    "write_session",  # the session as a whole: close, graph, runs, schedules
    "write_aliases",  # objects and thread items at these aliases
    "emit",  # the application's events of these types
]

NEEDS: dict[str, Need] = {
    "create_api_key": "admin",
    "list_api_keys": "admin",
    "revoke_api_key": "admin",
    "open_session": "open_session",
    "list_sessions": "list_sessions",
    "get_session": "read",
    "close_session": "write_session",
    "reopen_session": "write_session",
    "delete_session": "write_session",
    "write_object": "write_aliases",
    "write_objects": "write_aliases",
    "delete_object": "write_aliases",
    "post_thread_item": "write_aliases",
    "post_thread_items": "write_aliases",
    "read_object": "read",
    "list_objects": "read",
    "list_thread_items": "read",
    "update_graph": "write_session",
    "read_graph": "read",
    "emit_event": "emit",
    "emit_events": "emit",
    "list_session_events": "read",
    "explain_event": "read",
    "list_session_listeners": "read",
    "list_executions": "read",
    "simulate_listener": "read",
    "start_execution": "write_session",
    "stop_execution": "write_session",
    "create_schedule": "write_session",
    "update_schedule": "write_session",
    "delete_schedule": "write_session",
    "get_schedule": "read",
    "list_schedules": "read",
    "list_schedule_runs": "read",
    "save_listener": "listeners",
    "delete_listener": "listeners",
    "get_listener": "listeners_or_read",
    "list_listeners": "listeners_or_read",
    "switch_listener": "listeners_in_session",
    "pause_listener": "listeners_in_session",
    "resume_listener": "listeners_in_session",
    "replay_batch": "listeners_in_session",
    "redeliver": "listeners_in_session",
    "save_event_type": "listeners",
    "delete_event_type": "listeners",
    # A trigger on the application's own table: what the database's owner does, so only an admin key.
    "capture_table": "admin",
    "uncapture_table": "admin",
    "list_captures": "listeners",
    "get_event_type": "anyone",
    "list_event_types": "anyone",
    # Who calls: any key may ask what it is and what its scopes reach.
    "whoami": "anyone",
    # Not a command: a connection listener (`GET /v1/sessions/{id}/stream`) and the ticket that opens one.
    "stream": "listen",
}


@dataclass(frozen=True)
class Principal:
    """Who makes a request: a key's name and scopes, and its request rate (None: not limited)."""

    name: str
    grant: Grant
    requests_per_second: float | None = None

    @property
    def limited(self) -> bool:
        return self.requests_per_second is not None


@dataclass(frozen=True)
class Target:
    """What a command acts on, as the decision needs it. `session_id` None: no session named (pause_listener
    for every session); `session_found` False: no such session; `emits`: each event type with its `allow`."""

    session_id: str | None = None
    session_found: bool = True
    session_alias: str | None = None
    aliases: tuple[str, ...] = ()
    emits: tuple[tuple[str, tuple[str, ...] | None], ...] = ()
    new_session_alias: str | None = None
    # The field each of `aliases` and `emits` came in (`objects.3.alias`, `events.0.type`), when not `alias`
    # and `type`: a refusal names the one at fault.
    alias_fields: tuple[str, ...] = ()
    emit_fields: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verdict:
    """Allowed (`code` None), or refused with `not_found` or `access_denied` and a message naming the field."""

    code: Literal["not_found", "access_denied"] | None = None
    message: str = ""

    @property
    def allowed(self) -> bool:
        return self.code is None


ALLOWED = Verdict()
# The needs that are judged on a session, which the key must see first.
SESSION_NEEDS: frozenset[Need] = frozenset(
    {"read", "listen", "write_session", "write_aliases", "emit", "listeners_in_session"}
)


def need_of(command: str) -> Need:
    return NEEDS.get(command, "admin")


def _denied(field_name: str, message: str) -> Verdict:
    return Verdict("access_denied", f"{field_name}: {message}")


def decide(grant: Grant, command: str, target: Target) -> Verdict:
    """Whether a key with `grant` may run `command` on `target`."""
    if grant.admin:
        return ALLOWED
    need = need_of(command)
    if need == "anyone":
        return ALLOWED
    if need == "admin":
        return _denied("command", f"{command} needs the admin scope")
    if need == "listeners":
        return ALLOWED if grant.listeners else _denied("command", f"{command} needs the listeners scope")
    if need == "listeners_or_read":
        ok = grant.listeners or grant.any_read
        return ALLOWED if ok else _denied("command", f"{command} needs the listeners scope or a read: scope")
    if need == "list_sessions":
        return ALLOWED if grant.any_read else _denied("command", "list_sessions needs a read: scope")
    if need == "open_session":
        alias = target.new_session_alias
        if grant.writes_session(alias):
            return ALLOWED
        shown = repr(alias) if alias is not None else "a session with no alias"
        return _denied("alias", f"no write: scope covers {shown}")
    if target.session_id is None:
        # Only a listener's pause or resume names no session: it is for every session.
        return ALLOWED if grant.listeners else _denied("command", f"{command} needs the listeners scope")
    if need == "read":
        # A read outside the key's read scopes finds no session (the spec's words), whatever else the key may
        # do there: an `emit:` scope on every session must not let it tell another tenant's sessions apart.
        if not target.session_found or not grant.reads(target.session_alias):
            return Verdict("not_found", f"session_id: no session {target.session_id!r} among those this key reads")
        return ALLOWED
    if not target.session_found or not grant.sees(target.session_alias):
        return Verdict("not_found", f"session_id: no session {target.session_id!r}")
    return _in_session(grant, command, need, target)


def may_call(grant: Grant, command: str) -> bool:
    """Whether a key with `grant` may run `command` on some target: a dry judgement, before any session or
    alias is named (`whoami`'s list; what a door offers a key). A command it answers True for may still be
    refused on a session, an alias or an event type its scopes do not cover; one it answers False for is refused
    everywhere."""
    if grant.admin:
        return True
    need = need_of(command)
    if need == "anyone":
        return True
    if need in ("listeners", "listeners_in_session"):
        return grant.listeners
    if need == "listeners_or_read":
        return grant.listeners or grant.any_read
    if need in ("list_sessions", "read"):
        return grant.any_read
    if need == "listen":
        return any(s.kind == "listen" for s in grant.scopes)
    if need in ("open_session", "write_session"):
        return any(s.kind == "write" and _whole_session(s.alias) for s in grant.scopes)
    if need == "write_aliases":
        return any(s.kind == "write" for s in grant.scopes)
    if need == "emit":
        return any(s.kind == "emit" or (s.kind == "write" and _whole_session(s.alias)) for s in grant.scopes)
    return False  # admin


def _whole_session(alias_glob: str | None) -> bool:
    return alias_glob is None or alias_glob == EVERY


def _in_session(grant: Grant, command: str, need: Need, target: Target) -> Verdict:
    alias = target.session_alias
    if need == "listen":
        return (
            ALLOWED if grant.listens(alias) else _denied("session_id", "a stream needs a listen: scope on the session")
        )
    if need == "write_session":
        ok = grant.writes_session(alias)
        return ALLOWED if ok else _denied("session_id", f"{command} needs a write: scope on the whole session")
    if need == "write_aliases":
        for n, written in enumerate(target.aliases):
            if not grant.writes_alias(alias, written):
                field = target.alias_fields[n] if n < len(target.alias_fields) else "alias"
                return _denied(field, f"no write: scope covers {written!r} in this session")
        return ALLOWED
    if need == "emit":
        for n, (event_type, allow) in enumerate(target.emits):
            if not grant.emits(event_type, allow, alias):
                field = target.emit_fields[n] if n < len(target.emit_fields) else "type"
                return _denied(field, f"no scope may emit {event_type!r} into this session")
        return ALLOWED
    # listeners_in_session
    return ALLOWED if grant.listeners else _denied("command", f"{command} needs the listeners scope")
