"""The HTTP door: `POST /v1/commands` on an ASGI app, the commands' JSON Schemas (`GET /v1/schema`), an OpenAPI
document of it all (`GET /v1/openapi.json`, `openapi.py`), plus liveness and readiness probes.

Owns the HTTP framing only (body size, JSON parsing, who calls, status codes); every command's meaning is
`Platform.command`, so HTTP answers the same JSON as the Python client and the command line. Who calls is
`auth.who` (a key, the bootstrap token, a browser session, a stream ticket), a key's request rate the gate's
(`orchestrator.door.gate`), and what the caller may do each command's decision (`commands.access`). The status code
mirrors the reply's error code (`auth.STATUS_BY_ERROR`); the body is always the reply, within the request's
deadline whatever the database does (`deadlines.py`).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from importlib import resources
from typing import Any, TypeVar

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import Scope

from orchestrator.causes import request_id
from orchestrator.commands.access import Caller, authorize_stream
from orchestrator.commands.fields import session_id_of
from orchestrator.commands.reference import schema_index
from orchestrator.commands.registry import COMMANDS, unknown_command
from orchestrator.config import Settings
from orchestrator.core.command_deadlines import TicketState, deadline_of, key_state, not_answered
from orchestrator.core.connection_listener import parse_stream, unknown_stream_params
from orchestrator.core.errors import CommandError, unavailable
from orchestrator.core.json_checks import not_json, too_deep
from orchestrator.door.access_log import AccessLog
from orchestrator.door.auth import (
    STATUS_BY_ERROR,
    UNKNOWN_ERROR_STATUS,
    error_reply,
    look,
    presented_ticket,
    rate_limited,
    reply_response,
    status_for,
    ticket_refused,
    who,
)
from orchestrator.door.browser import BrowserRoutes
from orchestrator.door.deadlines import Deadlines, Missed
from orchestrator.door.gate import Gate
from orchestrator.door.openapi import openapi_document
from orchestrator.door.streams import EventStream, StreamHub, start_position, stream_head
from orchestrator.platform import Platform
from orchestrator.store import json_codec
from orchestrator.store.connection import DATABASE_UNAVAILABLE
from orchestrator.telemetry import continuing

__all__ = ["STATUS_BY_ERROR", "UNKNOWN_ERROR_STATUS", "create_app", "error_reply", "status_for"]

log = logging.getLogger(__name__)

T = TypeVar("T")


def _request_id(request: Request) -> str | None:
    """The caller's `X-Request-Id`, when it is a plain token of at most 128 characters (else one is made)."""
    given = request.headers.get("x-request-id")
    if given and len(given) <= 128 and given.isprintable() and " " not in given:
        return given
    return None


# How long `/readyz` waits for the store's answer before it says the API is not ready.
READY_SECONDS = 5.0


@dataclass
class TicketProgress:
    """How far a stream's opening went with its single-use ticket: what its late answer says of it when the
    opening is cut at its deadline (None: no ticket presented)."""

    state: TicketState | None = None


class _TooLarge(Exception):
    pass


# The dashboard's page and files are asked for again on each load (a 304 when unchanged): its scripts are modules
# that import one another, and a browser mixing a cached one with a newer one after an upgrade would break.
REVALIDATE = {"Cache-Control": "no-cache"}


async def dashboard_page(request: Request) -> Response:
    """The dashboard (`orchestrator/dashboard/`): static files, no build step, nothing from a CDN."""
    page = resources.files("orchestrator").joinpath("dashboard/index.html").read_text(encoding="utf-8")
    return HTMLResponse(page, headers=REVALIDATE)


class DashboardFiles(StaticFiles):
    """The dashboard's scripts and style, revalidated on each load."""

    async def get_response(self, path: str, scope: Scope) -> Response:
        response = await super().get_response(path, scope)
        response.headers.update(REVALIDATE)
        return response


def database_away(platform: Platform) -> Callable[[Request, Exception], Awaitable[Response]]:
    """The answer to a request whose door's own look before a command (who calls, its rate) found the database
    away: `unavailable`, said as the platform says its commands' (`Platform.database_away`)."""

    async def answer(request: Request, err: Exception) -> Response:
        platform.database_away(f"{request.method} {request.url.path}: {type(err).__name__}")
        return reply_response(unavailable().reply())

    return answer


async def http_error(request: Request, err: Exception) -> Response:
    """A path no route serves, or a method its route does not take, answered in the commands' JSON envelope (the
    status kept, with its `Allow` header), as every other refusal of the door is."""
    assert isinstance(err, HTTPException)
    if err.status_code == 404:
        reply = error_reply(
            "not_found",
            f"path: nothing is served at {request.url.path!r}; commands are POSTed to"
            " /v1/commands (GET /v1/openapi.json describes every path)",
        )
    elif err.status_code == 405:
        reply = error_reply(
            "invalid_request",
            f"method: {request.method} is not taken at {request.url.path!r}"
            f" (it takes {(err.headers or {}).get('Allow', 'another')})",
        )
    else:
        reply = error_reply("invalid_request", f"request: {err.detail}")
    return JSONResponse(reply, status_code=err.status_code, headers=err.headers)


def late_reply(
    platform: Platform,
    request: Request,
    missed: Missed,
    body: Any,
    ticket: TicketState | None = None,
    *,
    signing_out: bool = False,
) -> Response:
    """The answer to a request not done within its deadline (`missed`): `unavailable`, saying whether what the
    command (the body's; none: the door's look before one, or another route's reads and writes) writes may still be
    made, and whether a retry is safe (for a stream's opening with a ticket, whether it is still good: `ticket`; for
    a sign-out, that the browser session may have ended: `signing_out`).
    Said in the log as the platform says the database away (`Platform.database_away`: once, not at every request),
    or, when the command was not on the database then, as a command late (`Platform.command_late`)."""
    name = body.get("command") if isinstance(body, dict) else None
    spec = COMMANDS.get(name) if isinstance(name, str) else None
    takes_key = spec is not None and ("idempotency_key" in spec.model.model_fields or name == "emit_events")
    why = f"{request.method} {request.url.path}: no answer within {missed.seconds:g} s"
    if missed.on_database:
        platform.database_away(why)
    else:
        platform.command_late(why)  # on Temporal, or between statements: the database is not said away
    refusal = not_answered(
        name if spec is not None else None,
        missed.seconds,
        reached=missed.reached,
        on_database=missed.on_database,
        key=key_state(takes_key, body if isinstance(body, dict) else {}),
        ticket=ticket,
        signing_out=signing_out,
    )
    return reply_response(refusal.reply())


def create_app(platform: Platform, settings: Settings) -> Starlette:
    """The ASGI app serving `platform` under the keys, token, size limit and deadlines of `settings`."""
    if not platform.store.lent_noted:
        # Its deadlines could not close a late command's connections on a database that answers nothing.
        raise ValueError(
            "create_app: the platform's pool does not note the connections it lends (connected with door=False)"
        )
    max_bytes = settings.max_request_bytes
    gate = Gate(lambda: platform.store, settings)
    deadlines = Deadlines()
    # The door's look before a command (who calls, its rate), a stream's opening, the browser's sign-in and
    # sign-out and its stream tickets: a few reads and writes.
    look_seconds = deadline_of(None, settings.command_deadline_seconds, settings.long_command_deadline_seconds)

    async def within(request: Request, work: Coroutine[Any, Any, T], *, signing_out: bool = False) -> T | Response:
        """`work`'s answer, or the `unavailable` of work not done within the look's deadline."""
        done = await deadlines.run(work, look_seconds)
        if isinstance(done, Missed):
            return late_reply(platform, request, done, None, signing_out=signing_out)
        return done

    browser = BrowserRoutes(platform, settings, gate, within)

    async def read_body(request: Request) -> bytes:
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > max_bytes:
            raise _TooLarge
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_bytes:
                raise _TooLarge
        return bytes(body)

    async def commands(request: Request) -> Response:
        principal = await within(request, look(request, gate))
        if isinstance(principal, Response):
            return principal
        try:
            raw = await read_body(request)
        except ClientDisconnect:
            # The caller left before its body was whole: nobody to answer, and no fault of the platform's.
            log.debug("%s %s: the client left mid-body", request.method, request.url.path)
            return Response(status_code=400)
        except _TooLarge:
            return JSONResponse(
                error_reply("limit_exceeded", f"body: larger than the limit of {max_bytes} bytes"),
                status_code=413,
            )
        try:
            # msgspec reads a bulk write's thousand events in a third of `json.loads`' time, to the same values;
            # what it refuses (a number beyond a double, a lone surrogate, NaN, a byte order mark) `json.loads`
            # answers as before.
            body = json_codec.loads(raw, parse_constant=not_json)
        except (ValueError, UnicodeDecodeError) as err:
            return JSONResponse(error_reply("invalid_request", f"body: not valid JSON ({err})"), status_code=400)
        except RecursionError:
            message = too_deep("body")
            return JSONResponse(error_reply("invalid_request", message), status_code=400)
        name = body.get("command") if isinstance(body, dict) else None
        seconds = deadline_of(
            name if isinstance(name, str) else None,
            settings.command_deadline_seconds,
            settings.long_command_deadline_seconds,
        )
        # A caller's W3C `traceparent` makes its trace the parent of what this command writes; its
        # `X-Request-Id` names the request as the cause of what it writes.
        with continuing(request.headers.get("traceparent")), request_id(_request_id(request)):
            reply = await deadlines.run(platform.command(body, Caller(principal, gate), raw), seconds)
        if isinstance(reply, Missed):
            return late_reply(platform, request, reply, body)
        if reply.get("status") == "success" and body.get("command") == "create_api_key":
            gate.key_made()
        return reply_response(reply)

    hub = StreamHub(lambda: platform.direct_url)

    async def stream(request: Request) -> Response:
        # The opening within the deadline, cut at once past it (it would use its ticket up behind the answer);
        # the stream itself is never cut (it ends with its client, or with the server's stop).
        ticket = TicketProgress()
        opened = await deadlines.run(open_stream(request, ticket), look_seconds, whole=False)
        if isinstance(opened, Missed):
            return late_reply(platform, request, opened, None, ticket.state)
        return opened

    async def open_stream(request: Request, ticket: TicketProgress) -> Response:
        """The stream, or the answer that refuses it. A single-use ticket is used up as the last step, once all
        else is ready (`ticket` says how far it went): an opening refused, or late, leaves it good for a retry, and
        of two openings with one ticket only one spends it."""
        session_id = request.path_params["session_id"]
        principal = await who(request, gate, query_token=True, ticket_for=session_id)
        if isinstance(principal, Response):
            return principal
        presented = presented_ticket(request)
        if presented is not None:
            ticket.state = "unused"
        wait = await gate.take_request(principal)
        if wait is not None:
            return rate_limited(wait)
        params = request.query_params
        try:
            session_id_of(request.path_params)
            unknown_stream_params(params.keys())
            await authorize_stream(platform, Caller(principal, gate), session_id)
            spec = parse_stream(
                params.get("filter"),
                params.get("batch"),
                params.get("client"),
                settings.limits,
                await platform.store.event_schemas(),
            )
            end = await platform.store.session_end(session_id)
        except CommandError as err:
            return reply_response(err.reply())
        position = start_position(end, params.get("after"), request.headers.get("last-event-id"))
        if position is None:
            field = "Last-Event-ID" if request.headers.get("last-event-id") else "after"
            reply = error_reply("invalid_request", f"{field}: must be an event id (a non-negative integer)")
            return JSONResponse(reply, status_code=400)
        if request.method == "HEAD":
            # Checked as its GET is, answered without a stream; a ticket is left good for the GET.
            return stream_head  # type: ignore[return-value]
        if presented is not None:
            ticket.state = "spending"
            if not await gate.spend_ticket(presented, session_id):
                return ticket_refused()
        holds = gate.holds_on(principal)
        return EventStream(platform.store, hub, session_id, spec, position, holds)  # type: ignore[return-value]

    async def schemas(request: Request) -> Response:
        # No token: the schemas say what every deployment of this version accepts, and an editor that
        # validates a file against a `$schema` URL sends no header.
        return JSONResponse(schema_index())

    async def schema(request: Request) -> Response:
        name = request.path_params["name"]
        found = schema_index()
        if name == "listener":
            return JSONResponse(found["listener"])
        if name in found["commands"]:
            return JSONResponse(found["commands"][name])
        refusal = unknown_command(name)
        reply = error_reply("not_found", refusal.message.replace("command: unknown command", "name: no command", 1))
        return JSONResponse(reply, status_code=404)

    async def openapi(request: Request) -> Response:
        # No token, as the schemas: it describes this version's surface, not a deployment's data.
        return JSONResponse(openapi_document())

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    probe: asyncio.Future[dict[str, Any]] | None = None

    async def readyz(request: Request) -> Response:
        # A cheap read through the whole command path proves the store answers; one that does not answer in time
        # (a database that keeps its connections and answers nothing) is not ready either. Not cancelled when
        # late: a cancelled read waits on that database to give its connection back. One at a time, shared.
        nonlocal probe
        if probe is None or probe.done():
            probe = asyncio.ensure_future(platform.command({"command": "list_listeners"}))
        done, _ = await asyncio.wait({probe}, timeout=READY_SECONDS)
        reply = probe.result() if done else unavailable().reply()
        if reply.get("status") == "success":
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "unavailable", "error": reply.get("error")}, status_code=503)

    app = Starlette(
        routes=[
            Route("/v1/commands", commands, methods=["POST"]),
            Route("/v1/sessions/{session_id}/stream", stream, methods=["GET"]),
            Route("/v1/stream-tickets", browser.stream_ticket, methods=["POST"]),
            Route("/v1/schema", schemas, methods=["GET"]),
            Route("/v1/schema/{name}", schema, methods=["GET"]),
            Route("/v1/openapi.json", openapi, methods=["GET"]),
            Route("/", dashboard_page, methods=["GET"]),
            Route("/dashboard/config", browser.config, methods=["GET"]),
            Route("/dashboard/sign-in", browser.sign_in, methods=["POST"]),
            Route("/dashboard/sign-out", browser.sign_out, methods=["POST"]),
            Mount("/dashboard", app=DashboardFiles(packages=[("orchestrator", "dashboard")])),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
        ],
        middleware=[Middleware(AccessLog)],
        # What a door asks of the database before a command (who the caller is, its key's rate) fails as the
        # command would: `unavailable`, in JSON, not a bare 500 and a traceback a request.
        exception_handlers={
            HTTPException: http_error,
            **{kind: database_away(platform) for kind in DATABASE_UNAVAILABLE},
        },
    )
    # Closed by the server that serves the app (`orchestrator.dev.runtime.ApiServer`), as the work let go past its
    # deadline is waited for.
    app.state.stream_hub = hub
    app.state.deadlines = deadlines
    return app
