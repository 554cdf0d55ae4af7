"""How long the HTTP door waits for a command, and what it answers when the command is not done by then.

Owns which commands may run long (`LONG`), which only read (`READS`), and the `unavailable` a late command is
answered with: whether what it wrote may still commit, and whether a retry is safe. The wait, the cut and the
connections it lets go are the door's (`door/deadlines.py`); a database that keeps its connections and answers
nothing (a stalled volume, a stopped server) held every command for as long as it did, since asyncpg's pool waits
on such a database without end. docs/decisions.md ("A command's deadline") has the reasoning and the figures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from orchestrator.core.errors import UNAVAILABLE_RETRY_SECONDS, CommandError

# Commands that change nothing the caller asked for (a read may append captured changes that committed before it,
# which any later reader appends the same): cut at the deadline, nothing was made.
READS: frozenset[str] = frozenset(
    {
        "explain_event",
        "get_event_type",
        "get_listener",
        "get_schedule",
        "get_session",
        "list_api_keys",
        "list_captures",
        "list_event_types",
        "list_executions",
        "list_listeners",
        "list_objects",
        "list_schedule_runs",
        "list_schedules",
        "list_session_events",
        "list_session_listeners",
        "list_sessions",
        "list_thread_items",
        "read_graph",
        "read_object",
        "simulate_listener",
        "whoami",
    }
)

# Commands whose work grows with what they are given or what they find, not a few statements: they wait for
# `long_command_deadline_seconds`. A purge (`delete_session` deletes for up to 10 s itself, then leaves the rest to
# the workers, after ending the session's workflows on Temporal); a bulk write of up to 1,000 entries in one
# transaction (a loaded machine takes seconds); DDL on the application's own table, which waits for that table's
# lock behind the application's transactions; a replay of a session's history through the lane step, or new
# batches for a range of it. A migration is not a command: it runs before the door serves.
LONG: frozenset[str] = frozenset(
    {
        "capture_table",
        "delete_session",
        "emit_events",
        "post_thread_items",
        "redeliver",
        "simulate_listener",
        "uncapture_table",
        "write_objects",
    }
)

# Whether a late write carried what makes its retry safe: `given` an idempotency_key (every event's, for
# `emit_events`), `missing` one the command takes, `none` the command takes none.
KeyState = Literal["given", "missing", "none"]

# What a stream's opening with a single-use ticket did with it by its deadline: `unused` (the opening uses it up as
# its last step, and was cut before it), `spending` (its use was sent, and may have been made).
TicketState = Literal["unused", "spending"]


def deadline_of(command: str | None, seconds: float, long_seconds: float) -> float | None:
    """How long the door waits for `command` (None: the body names no command yet), or None for no deadline (a
    setting of 0)."""
    chosen = long_seconds if command in LONG else seconds
    return chosen if chosen > 0 else None


def key_state(takes_key: bool, body: Mapping[str, Any]) -> KeyState:
    """Whether the request `body` of a command that takes an idempotency_key (`takes_key`) carries one."""
    if not takes_key:
        return "none"
    events = body.get("events")
    if body.get("command") == "emit_events" and isinstance(events, list) and events:
        given = all(isinstance(e, Mapping) and isinstance(e.get("idempotency_key"), str) for e in events)
    else:
        given = isinstance(body.get("idempotency_key"), str)
    return "given" if given else "missing"


def not_answered(
    command: str | None,
    seconds: float,
    *,
    reached: bool,
    on_database: bool,
    key: KeyState,
    ticket: TicketState | None = None,
    signing_out: bool = False,
) -> CommandError:
    """The `unavailable` of a command (None: the door's look before one, who calls, or a stream's opening) not done
    within `seconds`.

    `reached`: it took a connection of the database's pool (else nothing of it was sent); `on_database`: it held
    one, or waited for its first, when the time was up (else it was between statements: on Temporal, or waiting
    for a connection again); `ticket`: what a stream's opening with a ticket did with it; `signing_out`: it was
    ending a browser session (its look at the session done)."""
    field = "database" if on_database or not reached else "command"
    late = f"{field}: no answer within {seconds:g} s"
    if ticket == "unused":
        outcome = "nothing was changed and the ticket was not used; try again with it"
    elif ticket == "spending":
        outcome = (
            "the ticket may have been used up; try again with it, and if it is refused, with a new one"
            " (POST /v1/stream-tickets)"
        )
    elif signing_out:
        outcome = "the browser session may have ended; try again (once it has, the answer is unauthorized)"
    elif command is None or command in READS:
        outcome = "nothing was changed; try again"
    elif not reached:
        outcome = "the command never reached the database, so nothing was made; try again"
    elif key == "given":
        outcome = "the write may still commit; a retry with the same idempotency_key is safe (it is not made twice)"
    elif key == "missing":
        outcome = (
            "the write may still commit, and it carried no idempotency_key: look before you retry (a write retried"
            " with its idempotency_key is not made twice)"
        )
    else:
        outcome = "what the command changes may still be made: look before you retry"
    return CommandError("unavailable", f"{late}; {outcome}", retry_after=UNAVAILABLE_RETRY_SECONDS)
