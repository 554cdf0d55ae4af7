"""The HTTP door: `POST /v1/commands` on an ASGI app, plus liveness and readiness probes.

Owns the HTTP framing only (body size, JSON parsing, the bearer token, status codes); every command's
meaning is `Platform.command`, so HTTP answers the same JSON as the Python client and the command line.
The status code mirrors the reply's error code (table `STATUS_BY_ERROR`); the body is always the reply.
"""

from __future__ import annotations

import hmac
import json
import logging
from importlib import resources
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from orchestrator.causes import request_id
from orchestrator.commands.registry import MAX_JSON_DEPTH
from orchestrator.config import Settings, reveal
from orchestrator.core.connection_listener import parse_stream
from orchestrator.core.errors import CommandError
from orchestrator.platform import Platform
from orchestrator.streams import EventStream, StreamHub, start_position
from orchestrator.telemetry import continuing

log = logging.getLogger(__name__)

# `limit_exceeded` is 422, not 429: a deployment limit refuses this request as it is (an oversize value,
# too many executions), and 429 invites clients and proxies to retry the same request automatically.
STATUS_BY_ERROR: dict[str, int] = {
    "invalid_request": 400,
    "unauthorized": 401,
    "access_denied": 403,
    "not_found": 404,
    # The history asked about was there and retention deleted it: gone, not merely unknown.
    "past_retention": 410,
    "rev_conflict": 409,
    "session_not_open": 409,
    "limit_exceeded": 422,
    "internal_error": 500,
}
# A code this table does not know yet is still a refusal of the request, not a crash.
UNKNOWN_ERROR_STATUS = 400


def _request_id(request: Request) -> str | None:
    """The caller's `X-Request-Id`, when it is a plain token of at most 128 characters (else one is made)."""
    given = request.headers.get("x-request-id")
    if given and len(given) <= 128 and given.isprintable() and " " not in given:
        return given
    return None


def error_reply(code: str, message: str) -> dict[str, str]:
    return {"status": "error", "error": code, "message": message}


def status_for(reply: dict[str, Any]) -> int:
    if reply.get("status") == "success":
        return 200
    return STATUS_BY_ERROR.get(str(reply.get("error")), UNKNOWN_ERROR_STATUS)


class _TooLarge(Exception):
    pass


def _reject_constant(name: str) -> Any:
    # NaN and Infinity are not JSON; Python's parser accepts them unless told otherwise.
    raise ValueError(f"{name} is not valid JSON")


async def dashboard_page(request: Request) -> Response:
    """The dashboard (`orchestrator/dashboard/`): static files, no build step, nothing from a CDN."""
    page = resources.files("orchestrator").joinpath("dashboard/index.html").read_text(encoding="utf-8")
    return HTMLResponse(page)


def create_app(platform: Platform, settings: Settings) -> Starlette:
    """The ASGI app serving `platform` under the token and size limit of `settings`."""
    token = reveal(settings.api_token)
    max_bytes = settings.max_request_bytes

    def refuse_unauthorized(request: Request, query_token: bool = False) -> Response | None:
        if not token:
            return None
        header = request.headers.get("authorization")
        if header is None and query_token and "access_token" in request.query_params:
            # A browser's EventSource cannot send a header: the stream takes the token as a parameter.
            header = f"Bearer {request.query_params['access_token']}"
        if header is None:
            return JSONResponse(
                error_reply("unauthorized", "authorization: a bearer token is required"),
                status_code=401,
                headers={"WWW-Authenticate": "Bearer"},
            )
        scheme, _, presented = header.partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(presented.strip().encode(), token.encode()):
            return JSONResponse(
                error_reply("unauthorized", "authorization: the bearer token is not valid"),
                status_code=403,
            )
        return None

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
        refusal = refuse_unauthorized(request)
        if refusal is not None:
            return refusal
        try:
            raw = await read_body(request)
        except _TooLarge:
            return JSONResponse(
                error_reply("limit_exceeded", f"body: larger than the limit of {max_bytes} bytes"),
                status_code=413,
            )
        try:
            body = json.loads(raw, parse_constant=_reject_constant)
        except (ValueError, UnicodeDecodeError) as err:
            return JSONResponse(error_reply("invalid_request", f"body: not valid JSON ({err})"), status_code=400)
        except RecursionError:
            message = f"body: JSON nested deeper than {MAX_JSON_DEPTH} levels"
            return JSONResponse(error_reply("invalid_request", message), status_code=400)
        # A caller's W3C `traceparent` makes its trace the parent of what this command writes; its
        # `X-Request-Id` names the request as the cause of what it writes.
        with continuing(request.headers.get("traceparent")), request_id(_request_id(request)):
            reply = await platform.command(body)
        return JSONResponse(reply, status_code=status_for(reply))

    hub = StreamHub(lambda: platform.direct_url)

    async def stream(request: Request) -> Response:
        refusal = refuse_unauthorized(request, query_token=True)
        if refusal is not None:
            return refusal
        session_id = request.path_params["session_id"]
        params = request.query_params
        try:
            spec = parse_stream(params.get("filter"), params.get("batch"), params.get("client"), settings.limits)
            end = await platform.store.session_end(session_id)
        except CommandError as err:
            reply = error_reply(err.code, err.message)
            return JSONResponse(reply, status_code=status_for(reply))
        position = start_position(end, params.get("after"), request.headers.get("last-event-id"))
        if position is None:
            field = "Last-Event-ID" if request.headers.get("last-event-id") else "after"
            reply = error_reply("invalid_request", f"{field}: must be an event id (a non-negative integer)")
            return JSONResponse(reply, status_code=400)
        return EventStream(platform.store, hub, session_id, spec, position)  # type: ignore[return-value]

    async def dashboard_config(request: Request) -> Response:
        # No secret here: whether a token is needed, and where the Temporal UI is for links to executions.
        return JSONResponse(
            {
                "token_required": bool(token),
                "temporal_ui": settings.temporal_ui_url,
                "namespace": settings.temporal_namespace,
            }
        )

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def readyz(request: Request) -> Response:
        # A cheap read through the whole command path proves the store answers.
        reply = await platform.command({"command": "list_listeners"})
        if reply.get("status") == "success":
            return JSONResponse({"status": "ready"})
        return JSONResponse({"status": "unavailable", "error": reply.get("error")}, status_code=503)

    app = Starlette(
        routes=[
            Route("/v1/commands", commands, methods=["POST"]),
            Route("/v1/sessions/{session_id}/stream", stream, methods=["GET"]),
            Route("/", dashboard_page, methods=["GET"]),
            Route("/dashboard/config", dashboard_config, methods=["GET"]),
            Mount("/dashboard", app=StaticFiles(packages=[("orchestrator", "dashboard")])),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
        ]
    )
    # Closed by the server that serves the app (`orchestrator.runtime.ApiServer`).
    app.state.stream_hub = hub
    return app
