"""Inspection of one session: what `orchestrator status` shows and how `orchestrator events` tails the stream.

Owns turning the replies of `list_session_listeners`, `list_listeners`, `list_executions` and
`list_session_events` into a status view and a stream tail, and their text form. Everything goes through a
`Client` (HTTP or in-process), so the view is exactly what the command surface answers; the command line
parsing is `cli`'s.

Retries waiting are derived, not stored: a run that still holds its lane's slot and whose latest attempt
ended `failed` with attempts left is in its backoff wait, due `min(delay * 2^n, 900)` seconds after that
attempt ended. Without the lanes' runs (an API that does not say them) a failed latest attempt with attempts
left is taken as waiting.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

import httpx

from orchestrator.client import Client
from orchestrator.config import Settings, reveal
from orchestrator.core.backoff import retry_delay
from orchestrator.core.declaration import DEFAULT_RETRY_DELAY_SECONDS
from orchestrator.core.errors import CommandError
from orchestrator.dev.log import shown
from orchestrator.plain_http import default_api

# `orchestrator events` pages with the largest page the command allows, so a backlog drains in few calls.
EVENTS_PAGE = 1000
# How often `--follow` asks again when the stream had nothing new: quick enough to feel live, and one
# indexed read per second per follower is nothing to the database.
FOLLOW_POLL_SECONDS = 1.0
# `--follow` asks again after losing the API (a restart, a deploy): soon at first, then every few seconds, so a
# platform that is down for minutes is not asked hundreds of times.
RECONNECT_SECONDS = (0.5, 1.0, 2.0, 5.0)
# A message preview in the table is cut to this many characters.
PREVIEW_CHARS = 40


# Status


def _run_key(execution_id: str) -> tuple[str, int] | None:
    """`exe:S:K.N` -> (`run:S:K`, N): an execution's run (the same across its retries) and its attempt."""
    if not execution_id.startswith("exe:"):
        return None
    head, _, attempt = execution_id.rpartition(".")
    if not attempt.isdigit():
        return None
    return "run:" + head.removeprefix("exe:"), int(attempt)


def _body(listener: Mapping[str, Any]) -> dict[str, Any]:
    body = listener.get("body")
    if isinstance(body, str):
        body = json.loads(body)
    return body if isinstance(body, dict) else {}


def _retries_waiting(
    executions: Sequence[Mapping[str, Any]], retry: dict[str, Any] | None, in_flight: set[str] | None
) -> list[dict[str, Any]]:
    latest: dict[str, tuple[int, Mapping[str, Any]]] = {}
    for execution in executions:
        parsed = _run_key(str(execution.get("id", "")))
        if parsed is None:
            continue
        run_key, attempt = parsed
        if run_key not in latest or attempt > latest[run_key][0]:
            latest[run_key] = (attempt, execution)
    attempts = int(retry.get("attempts", 0)) if retry else None
    # A body keeps what was declared: a delay left out is the declaration's default (30 s), not none.
    delay = float(retry.get("delay_seconds", DEFAULT_RETRY_DELAY_SECONDS)) if retry else None
    waiting = []
    for run_key, (attempt, execution) in sorted(latest.items()):
        if execution.get("status") != "failed":
            continue
        if in_flight is not None and run_key not in in_flight:
            continue  # the run gave its slot back: no repeat is coming
        if attempts is not None and attempt >= attempts:
            continue  # the last attempt failed; `listener.failed` answers for it
        due_at = None
        ended_at = execution.get("ended_at")
        if delay is not None and isinstance(ended_at, str):
            due_at = (datetime.fromisoformat(ended_at) + timedelta(seconds=retry_delay(delay, attempt))).isoformat()
        waiting.append(
            {
                "run_key": run_key,
                "failed_execution": execution["id"],
                "lane": execution.get("lane"),
                "next_retry": attempt + 1,
                "attempts": attempts,
                "due_at": due_at,
            }
        )
    return waiting


async def session_status(client: Client, session_id: str) -> dict[str, Any]:
    """The status of every listener in `session_id`, from three commands.

    Raises:
        CommandError: a command was refused (an unknown session is `not_found`).
    """
    listeners = (await client.list_session_listeners(session_id))["listeners"]
    declarations = {item["name"]: _body(item) for item in (await client.list_listeners())["listeners"]}
    # Its running runs (every one, up to the command's page) and its newest ended ones (the outcomes and retries
    # shown are recent): the oldest page of a long-lived session says neither.
    running = (await client.list_executions(session_id, status="running", newest_first=True))["executions"]
    newest = (await client.list_executions(session_id, newest_first=True))["executions"]
    # The later read wins for a run in both: one that ended between the two reads is not shown running.
    executions = list({str(e["id"]): e for e in [*running, *newest]}.values())
    run_status = {str(e["id"]): str(e["status"]) for e in executions}
    view = []
    for listener in listeners:
        name = listener["name"]
        lanes: list[dict[str, Any]] = []
        live = True
        in_flight_keys: set[str] = set()
        for lane in listener.get("lanes", []):
            runs = lane.get("runs_in_flight")
            live = live and runs is not None
            in_flight_keys.update(run["run_key"] for run in runs or [])
            lanes.append(
                {
                    "lane": lane["lane"],
                    "workflow_id": lane["workflow_id"],
                    "live": runs is not None,
                    "pending": lane.get("pending", 0),
                    "in_flight": lane.get("in_flight", 0),
                    "runs_in_flight": [run["run_key"] for run in runs or []],
                    "batches": lane.get("batches"),
                    "trouble": lane.get("trouble"),
                    "waiting": waiting["text"] if (waiting := lane.get("waiting")) else None,
                }
            )
        mine = [e for e in executions if e.get("listener") == name]
        declaration = declarations.get(name, {})
        view.append(
            {
                "name": name,
                "version": listener.get("version"),
                "enabled": listener.get("enabled", True),
                "paused": listener.get("paused", False),
                "lanes": lanes,
                "pending": sum(lane["pending"] for lane in lanes),
                "runs_in_flight": sum(lane["in_flight"] for lane in lanes),
                "executions_running": sum(1 for e in mine if e.get("status") == "running"),
                # Its runs that wait for events, and on what (docs/waits.md).
                "waiting_runs": [
                    {"execution_id": e["id"], "lane": e.get("lane"), **waits}
                    for e in mine
                    if e.get("status") == "running" and (waits := e.get("waiting"))
                ],
                "retries_waiting": _retries_waiting(mine, declaration.get("retry"), in_flight_keys if live else None),
                # Each outcome beside its run's own status: `success` means the run started, not how it ended.
                "recent_outcomes": [
                    {**o, "run_status": run_status[ran]} if (ran := o.get("execution_id")) in run_status else o
                    for o in listener.get("recent_outcomes", [])
                ],
                "counts": listener.get("counts", {}),
                "warnings": listener.get("warnings", []),
            }
        )
    return {"session_id": session_id, "listeners": view}


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else shown(value)


def _table(headers: Sequence[str], rows: Sequence[Sequence[Any]], indent: str = "  ") -> list[str]:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(row[i]) for row in cells)) for i, h in enumerate(headers)]
    lines = [indent + "  ".join(h.ljust(w) for h, w in zip(headers, widths, strict=True)).rstrip()]
    lines += [indent + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return lines


def format_status(status: dict[str, Any]) -> str:
    """The status as a readable text table, one block per listener."""
    lines = [f"session {status['session_id']}"]
    if not status["listeners"]:
        lines.append("no listeners declared")
    for listener in status["listeners"]:
        counts = ", ".join(f"{k} {v}" for k, v in sorted(listener["counts"].items())) or "none"
        lines += [
            "",
            f"listener {listener['name']}  v{listener['version']}  {'enabled' if listener['enabled'] else 'disabled'}"
            + ("  paused" if listener.get("paused") else ""),
            f"  pending {listener['pending']}  runs in flight {listener['runs_in_flight']}  "
            f"executions running {listener['executions_running']}  retries waiting {len(listener['retries_waiting'])}",
            f"  outcomes: {counts}",
        ]
        lines += [f"  warning: {warning}" for warning in listener.get("warnings", [])]
        if listener["lanes"]:
            rows = [
                [
                    lane["lane"] or "(one lane)",
                    lane["pending"] if lane["live"] else "?",
                    lane["in_flight"] if lane["live"] else "?",
                    ", ".join(lane["runs_in_flight"]),
                ]
                for lane in listener["lanes"]
            ]
            lines += _table(["lane", "pending", "in flight", "runs"], rows)
            for lane in listener["lanes"]:
                if lane["waiting"]:
                    lines.append(shown(f"  lane {lane['lane'] or '(one lane)'} waits: {lane['waiting']}"))
            if not all(lane["live"] for lane in listener["lanes"]):
                lines.append("  (? = the API did not say the lane's runs)")
        if listener.get("waiting_runs"):
            lines.append("  runs waiting for events:")
            rows = [
                [
                    w["execution_id"],
                    w.get("lane") or "(one lane)",
                    w["seq"],
                    " | ".join(_condition_text(c) for c in w["conditions"]),
                    w["after"],
                    w["deadline"],
                ]
                for w in listener["waiting_runs"]
            ]
            lines += _table(["run", "lane", "wait", "on", "after", "until"], rows, indent="    ")
        if listener["retries_waiting"]:
            lines.append("  retries waiting:")
            rows = [
                [w["run_key"], w["next_retry"], w["attempts"], w["failed_execution"], w["due_at"]]
                for w in listener["retries_waiting"]
            ]
            lines += _table(["run", "retry", "of", "after failed", "due at"], rows, indent="    ")
        if listener["recent_outcomes"]:
            lines.append("  recent outcomes (newest first):")
            rows = [
                [
                    o.get("created_at"),
                    o.get("status")
                    + (f" ({o['reason']})" if o.get("reason") else "")
                    + (f" (replay {o['replay']})" if o.get("replay") else ""),
                    o.get("lane") or "(one lane)",
                    f"{o.get('first_id')}..{o.get('last_id')}",
                    o.get("retry"),
                    o.get("run_status"),
                    o.get("execution_id") or o.get("message"),
                ]
                for o in listener["recent_outcomes"]
            ]
            headers = ["at", "status", "lane", "events", "retry", "run", "execution / message"]
            lines += _table(headers, rows, indent="    ")
    return "\n".join(lines)


def _condition_text(condition: dict[str, Any]) -> str:
    """A wait's condition in a line: its types, and its aliases and how many `where` items when it has them."""
    text = ",".join(condition.get("types") or ["*"])
    if condition.get("aliases"):
        text += " on " + ",".join(condition["aliases"])
    if condition.get("where"):
        text += f" where {len(condition['where'])}"
    return text


# Events


def format_event(event: Mapping[str, Any]) -> str:
    """One event as one line: id, commit time, type, alias and what caused it."""
    parts = [str(event.get("id", "")).rjust(6), str(event.get("created_at", "")), str(event.get("type", ""))]
    if event.get("alias"):
        parts.append(str(event["alias"]))
    item = event.get("item")
    if isinstance(item, dict):
        preview = str(item.get("message") or "")
        if len(preview) > PREVIEW_CHARS:
            preview = preview[: PREVIEW_CHARS - 1] + "…"
        parts.append(f"item {item.get('type')}/{item.get('role')} {preview!r}")
    execution = event.get("execution")
    if isinstance(execution, dict):
        parts.append(f"execution {execution.get('id')} {execution.get('workflow')} {execution.get('status')}")
    actor = event.get("actor")
    if isinstance(actor, dict) and actor:
        parts.append("by " + ",".join(f"{k}={v}" for k, v in actor.items()))
    source = event.get("source")
    if isinstance(source, dict) and source.get("client"):
        parts.append(f"client {source['client']}")
    if event.get("depth"):
        parts.append(f"depth {event['depth']}")
    # What a writer chose (an item's role, a client id, a lane's key) is shown, never obeyed by the terminal.
    return shown("  ".join(parts))


def format_keys(keys: list[dict[str, Any]]) -> str:
    """`orchestrator keys list`: one line per key, never a secret."""
    if not keys:
        return "no keys (the API is open while no token is set and no key was ever created)"
    rows = [("name", "state", "requests/s", "expires", "scopes")]
    for key in keys:
        rate = key.get("requests_per_second")
        rows.append(
            (
                str(key["name"]),
                str(key["state"]),
                "-" if rate is None else f"{rate:g}",
                str(key.get("expires_at") or "-"),
                " ".join(key["scopes"]),
            )
        )
    widths = [max(len(row[i]) for row in rows) for i in range(4)]
    return "\n".join("  ".join([*(c.ljust(w) for c, w in zip(row[:4], widths, strict=True)), row[4]]) for row in rows)


async def tail_events(
    client: Client,
    session_id: str,
    emit: Callable[[Mapping[str, Any]], None],
    *,
    after: int = 0,
    types: list[str] | None = None,
    follow: bool = False,
    reconnect: bool = True,
    on_gap: Callable[[str], None] | None = None,
    poll_seconds: float = FOLLOW_POLL_SECONDS,
) -> int:
    """Emit the session's events after `after`, in id order; with `follow`, keep following until cancelled.

    Following survives the API going away (a restart, a deploy) and its answering `unavailable` (its database or
    Temporal out of reach): with `reconnect` it asks again, on a backoff,
    from the last id it emitted, so nothing is printed twice or skipped; `on_gap` hears when the API is lost
    and when it is back, and when retention deleted events after the position (the stream goes on past them).
    Returns the last id emitted (or `after`). Paging by id never skips a late commit:
    within a session ids are drawn in commit order (see docs/architecture.md, "The stream").

    Raises:
        CommandError: the command was refused (an unknown session is `not_found`).
        httpx.TransportError: the API is out of reach, and this is no follow that reconnects.
    """
    position = after
    failures = 0
    while True:
        try:
            async for last_id, events in _pages(client, session_id, position, types, follow, poll_seconds, on_gap):
                if failures and on_gap is not None:
                    on_gap(f"reconnected; following from event {position}")
                for event in events:
                    emit(event)
                position, failures = last_id, 0
            if not follow:
                return position
        except (httpx.TransportError, CommandError) as err:
            refused = isinstance(err, CommandError) and err.code != "unavailable"
            if not (follow and reconnect) or refused:
                raise
            if failures == 0 and on_gap is not None:
                answered = isinstance(err, CommandError)
                lost = f"the API answered unavailable: {err}" if answered else f"lost the API ({type(err).__name__})"
                on_gap(f"{lost}; reconnecting from event {position} until Ctrl-C")
            await asyncio.sleep(RECONNECT_SECONDS[min(failures, len(RECONNECT_SECONDS) - 1)])
            failures += 1


async def _pages(
    client: Client,
    session_id: str,
    position: int,
    types: list[str] | None,
    follow: bool,
    poll_seconds: float,
    on_gap: Callable[[str], None] | None = None,
) -> AsyncIterator[tuple[int, Sequence[Mapping[str, Any]]]]:
    """`(last_id, events)` after `position`: the history page by page, then (with `follow`) each batch of the
    stream until the server ends it. The caller keeps the position, so a connection lost midway loses nothing.
    A read past retention is told to `on_gap` (deleted history is not history that never was)."""

    def trimmed(after: int, first_id: int) -> None:
        if on_gap is None:
            return
        if first_id > after + 1:
            deleted = f"the events after {after} up to {first_id - 1}"
        else:  # what a lane still waits on is kept from before where retention reached
            deleted = f"events after {after} but those a lane still waits on"
        on_gap(f"retention deleted {deleted}; the stream starts at {first_id}")

    while True:
        reply = await client.list_session_events(session_id, after=position, limit=EVENTS_PAGE, types=types)
        first_id = reply.get("first_id")
        if first_id is not None:
            trimmed(position, first_id)
        position = reply["last_id"]
        yield position, reply["events"]
        if len(reply["events"]) < EVENTS_PAGE:
            break
    if not follow:
        return
    try:
        # Caught up: follow as a connection listener (woken by the commit), not by asking again.
        flt = {"types": types} if types else None
        told = lambda notice: trimmed(int(notice["after"]), int(notice["first_id"]))  # noqa: E731

        def closed(notice: dict[str, Any]) -> None:
            if on_gap is not None:
                on_gap(f"the API closed the stream: {notice.get('reason', notice)}")

        async for batch in client.stream(session_id, after=position, filter=flt, on_trimmed=told, on_closed=closed):
            yield int(batch["last_id"]), batch["events"]
    except NotImplementedError:
        await asyncio.sleep(poll_seconds)  # in-process: no stream, so poll


# The door


def settings_api_url(settings: Settings) -> str:
    """The API the settings name, by the rule `orchestrator call` reads them with (`plain_http.default_api`)."""
    named = settings.model_fields_set
    return default_api(
        settings.http_host if "http_host" in named else None,
        settings.http_port if "http_port" in named else None,
        settings.data_dir,
    )


@contextlib.asynccontextmanager
async def command_client(
    settings: Settings, *, url: str | None = None, token: str | None = None, local: bool = False
) -> AsyncIterator[Client]:
    """A client of the HTTP API (the default, like `orchestrator call`), or of a platform in this process.

    In-process (`local`) reads `settings.database_url`, else the running `orchestrator dev`'s database
    (`runtime.local_database_url`); a lane's trouble is asked of Temporal when `settings.temporal_address` is set.

    Raises:
        ConfigurationError: `local` with no database to read.
        DatabaseUrlInvalid: `local`, and the database URL is none PostgreSQL's client reads.
        DatabaseUnreachable: `local`, and the database does not answer.
        TemporalUnreachable: `local`, and the Temporal address set does not answer.
    """
    if not local:
        async with Client.http(url or settings_api_url(settings), token=token or reveal(settings.api_token)) as c:
            yield c
        return
    # Imported here: the platform, its store and Temporal are needed only in-process.
    from orchestrator.dev.runtime import local_platform

    async with local_platform(settings) as platform:
        yield Client.local(platform)
