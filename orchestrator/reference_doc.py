"""`docs/commands.md`, generated from the command registry: `make docs`, or
`python -m orchestrator.reference_doc [PATH]` (`--check` exits 1 when the file is not what it would write).

Owns the page's layout: the error codes with their HTTP status (the API's own table), then every command by
the module that holds it. Each command's section is `commands.reference_text`'s, from the models, so a
command or an argument added to the registry shows here once the page is generated again (a test compares).
"""

from __future__ import annotations

import sys
from pathlib import Path

from orchestrator.commands import COMMANDS
from orchestrator.commands.reference import ERROR_MEANINGS, CommandReference, reference
from orchestrator.commands.reference_text import command_markdown
from orchestrator.door.auth import STATUS_BY_ERROR
from orchestrator.generated_file import generate

DEFAULT_PATH = Path("docs/commands.md")
# Headings of the modules that hold the commands, in the page's order; a module not named here comes last.
GROUPS = {
    "sessions": "Sessions",
    "objects": "Objects",
    "threads": "Threads",
    "events": "The stream",
    "app_events": "The application's own events",
    "graphs": "The graph",
    "listeners": "Listeners",
    "runs": "What listeners and runs did",
    "explain": "Explaining an event",
    "replays": "Replays",
    "simulate": "Trying a listener before saving it",
    "schedules": "Schedules",
}
INTRO = """\
# Commands

<!-- Generated from the command registry by `make docs` (python -m orchestrator.reference_doc): edit the
     models and handlers in orchestrator/commands/, not this page. -->

Every operation is one JSON command, the same through the three doors: `POST /v1/commands`, `orchestrator
call '<json>'` and the Python client (`await client.command({...})`). A reply is `{"status": "success", ...}`
or `{"status": "error", "error": CODE, "message": TEXT}`. Arguments are checked strictly: a field the command
does not know, or `"100"` where a number belongs, is refused with the field named, and nothing changes. So
is what nothing can store: a NUL character (`\\u0000`) in any string or key (PostgreSQL's text cannot hold
one), an id or rev past 2^63 - 1, JSON nested deeper than 100 levels. Through the HTTP door with a key
(docs/security.md), any command may also answer `access_denied` (outside the key's scopes; a session it may
not read answers `not_found`) and `rate_limited`; the errors listed under each command are its own.

Each command's JSON Schema is served at `GET /v1/schema/{command}`, a listener body's at
`GET /v1/schema/listener`, and all of them at once at `GET /v1/schema` (no token needed: an editor can
validate a body with them). `orchestrator call --help COMMAND` prints a command's arguments in the terminal.
The whole HTTP surface is described by an OpenAPI 3.1 document generated from the same registry,
[`GET /v1/openapi.json`](#openapi) (no token needed either), for a client generator or an API explorer.

What each command answers (**Reply**) is read off its reply model, the one the OpenAPI document and the
TypeScript client's types are generated from: `{...}` holds an object's fields and `[{...}]` a list's, a `?`
marks a field answered only sometimes (left out, or null, when not), and a field's meaning follows it in
parentheses. Besides these, a reply holds `status`, `"success"`. A reply holds only the fields its model names
(the test suite checks every reply it gets against its model); a later release may add some, so a client should
ignore those it does not know.

The example under each command is a body the test suite sends through `POST /v1/commands`
(`tests/docs/test_commands_examples.py`), which must answer `success`. Each runs on a platform of its own, where
`ses_...` is a session (alias `support`) whose stream begins with event 1, the object `tickets/42/meta` written,
and event 2, a `request` item posted on the thread `chats/7`; the event type `ticket.escalated` is declared, the
listener `respond` (the body under `simulate_listener`) is saved, and the application's table `tickets`
(docs/transactions.md) holds ticket 42. Where a command needs Temporal (runs, replays, schedules), a worker runs
the workflow `responder`, whose run of `respond`'s batch of event 2 is running (`exe:ses_...:respond:chats/7:2.0`),
and the schedule `ops/clock` is in place. A command that needs another's work first finds it done: a closed
session for `reopen_session`, a paused listener for `resume_listener`, a capture for `uncapture_table`, the key
`ci` for `revoke_api_key`.
"""


def _errors_table() -> list[str]:
    lines = ["## Errors", "", "| code | HTTP status | when |", "| --- | --- | --- |"]
    for code, status in STATUS_BY_ERROR.items():
        lines.append(f"| `{code}` | {status} | {ERROR_MEANINGS.get(code, '')} |")
    return [*lines, "", *FRAMING.splitlines(), ""]


FRAMING = """\
The HTTP framing answers some statuses of its own, in the same envelope: 405 `invalid_request` for a method a
path does not take (its `Allow` header lists those it does), 413 `limit_exceeded` for a body over
`max_request_bytes`, 403 `access_denied` and 421 `invalid_request` for what the open API refuses from elsewhere
(docs/security.md). A request that is not HTTP at all is answered by the server with a plain-text 400 before any
of this. `GET /readyz` answers 503 when the database does not answer within 5 s, a database that hangs as one
that is down. A command not done within the door's deadline (`ORCHESTRATOR_COMMAND_DEADLINE_SECONDS`, 10 s; 25 s
for a purge, a bulk write, a table's capture and a replay of history) answers 503 `unavailable`, its message saying
whether a write may still commit and whether a retry is safe (docs/decisions.md, "A command's deadline")."""


def _grouped() -> list[tuple[str, list[CommandReference]]]:
    refs = [reference(name) for name in COMMANDS]
    order = list(GROUPS)
    groups = sorted({ref.group for ref in refs}, key=lambda g: (order.index(g) if g in order else len(order), g))
    return [
        (GROUPS.get(group, group.replace("_", " ").capitalize()), [r for r in refs if r.group == group])
        for group in groups
    ]


OPENAPI = """\
## OpenAPI

`GET /v1/openapi.json` answers an OpenAPI 3.1 document of the HTTP door, built from the registry this page is:
`POST /v1/commands` takes a `oneOf` of every command's body with a discriminator on `command` (each body is the
command's JSON Schema, its `description` the summary above, `x-orchestrator-reply` and `x-orchestrator-errors`
what it answers), with one named example per command (the examples on this page); it answers `CommandReply`, an
`anyOf` of every command's reply model (each a component, `OpenSessionReply`, ..., which a body names in
`x-orchestrator-reply-schema`: a reply does not name its command, and some commands answer the same fields, so
one reply may fit several), or an error reply per HTTP status; then the session streams (`GET
/v1/sessions/{session_id}/stream`, Server-Sent Events, `filter` and `batch` as JSON query parameters), `POST
/v1/stream-tickets`, the schemas, the health probes and the credentials (a bearer token; a browser's cookie; a
stream's ticket). A command added to the registry is in it without another edit. docs/decisions.md says why one
path with a union rather than a path per command.
"""


def render() -> str:
    """The whole page."""
    grouped = _grouped()
    lines = [INTRO, *_errors_table(), "## The commands", ""]
    for title, refs in grouped:
        names = ", ".join(f"[`{ref.name}`](#{ref.name})" for ref in refs)
        lines.append(f"- {title}: {names}")
    lines.append("")
    for title, refs in grouped:
        lines += [f"## {title}", ""]
        for ref in refs:
            lines.append(command_markdown(ref))
    lines.append(OPENAPI)
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    return generate("orchestrator.reference_doc", __doc__, DEFAULT_PATH, render, argv)


if __name__ == "__main__":
    sys.exit(main())
