"""A command's deadline at the door: the long ones wait longer, 0 waits without end, and a late command's
`unavailable` says whether a write may still commit and whether its retry is safe."""

from __future__ import annotations

import pytest

from orchestrator.commands import COMMANDS
from orchestrator.core.command_deadlines import LONG, READS, deadline_of, key_state, not_answered


def test_the_tables_name_registered_commands_and_every_lookup_is_a_read() -> None:
    assert set(COMMANDS) >= READS | LONG
    looks = {name for name in COMMANDS if name.startswith(("list_", "get_", "read_"))}
    assert looks <= READS, looks - READS


def test_a_long_command_waits_the_long_deadline_and_0_waits_without_end() -> None:
    assert deadline_of("write_object", 10, 25) == 10
    assert deadline_of("emit_events", 10, 25) == 25
    assert deadline_of(None, 10, 25) == 10, "the door's look before a command"
    assert deadline_of("write_object", 0, 25) is None
    assert deadline_of("delete_session", 10, 0) is None


def test_a_request_carries_its_key_or_does_not() -> None:
    assert key_state(False, {"command": "open_session"}) == "none"
    assert key_state(True, {"command": "write_object", "idempotency_key": "k"}) == "given"
    assert key_state(True, {"command": "write_object"}) == "missing"
    events = [{"type": "t", "data": {}, "idempotency_key": "a"}, {"type": "t", "data": {}}]
    assert key_state(True, {"command": "emit_events", "events": events}) == "missing", "every event's key"
    assert key_state(True, {"command": "emit_events", "events": events[:1]}) == "given"


@pytest.mark.parametrize(
    ("command", "reached", "on_database", "key", "said"),
    [
        ("read_object", True, True, "none", "database: no answer within 2 s; nothing was changed; try again"),
        (None, False, True, "none", "database: no answer within 2 s; nothing was changed; try again"),
        (
            "write_object",
            False,
            True,
            "given",
            "database: no answer within 2 s; the command never reached the database, so nothing was made; try again",
        ),
        (
            "write_object",
            True,
            True,
            "given",
            "database: no answer within 2 s; the write may still commit; a retry with the same idempotency_key is"
            " safe (it is not made twice)",
        ),
        (
            "emit_event",
            True,
            True,
            "missing",
            "database: no answer within 2 s; the write may still commit, and it carried no idempotency_key: look"
            " before you retry (a write retried with its idempotency_key is not made twice)",
        ),
        (
            "start_execution",
            True,
            False,
            "none",
            "command: no answer within 2 s; what the command changes may still be made: look before you retry",
        ),
    ],
)
def test_a_late_command_says_what_may_have_been_made(
    command: str | None, reached: bool, on_database: bool, key: str, said: str
) -> None:
    refusal = not_answered(command, 2.0, reached=reached, on_database=on_database, key=key)  # type: ignore[arg-type]
    assert refusal.reply() == {"status": "error", "error": "unavailable", "message": said, "retry_after": 1}
