"""Browsers without long-lived secrets: signing in with a key, the session cookie, and stream tickets.

Owns `POST /dashboard/sign-in` (a key in the body answers an HttpOnly, SameSite=Strict cookie that lasts an hour
and the CSRF token the page sends with each command), `POST /dashboard/sign-out`, `GET /dashboard/config` (no
secret: whether sign-in is needed, who is signed in) and `POST /v1/stream-tickets` (a single-use ticket that
opens one session's stream within half a minute, so an `EventSource` never carries a key in its URL). The
cookie's value is a pass (`store/keys.py`), worth nothing once its key is revoked or expired. What each reads and
writes of the database is answered within the door's deadline, as a command is (`create_app`'s `within`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Coroutine
from typing import Any, Protocol, TypeVar

from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from orchestrator.commands.access import Caller, authorize_stream
from orchestrator.commands.fields import session_id_of
from orchestrator.config import Settings
from orchestrator.core.access import Principal
from orchestrator.core.errors import CommandError
from orchestrator.core.json_checks import MAX_JSON_DEPTH, json_trouble, too_deep
from orchestrator.core.key_secrets import csrf_of
from orchestrator.door.auth import (
    COOKIE,
    error_reply,
    look,
    rate_limited,
    remember,
    reply_response,
    unauthorized,
    who,
)
from orchestrator.door.gate import COOKIE_SECONDS, TICKET_SECONDS, Gate
from orchestrator.platform import Platform

# The most a sign-in or ticket request's body may hold: a key or a session id, in a little JSON.
MAX_BODY = 4096

T = TypeVar("T")


async def _json_body(request: Request) -> dict[str, Any] | Response:
    """The body as a JSON object; a form a page on another origin could post (not JSON) is refused."""
    if not request.headers.get("content-type", "").startswith("application/json"):
        return JSONResponse(error_reply("invalid_request", "content-type: must be application/json"), 400)
    try:
        raw = await request.body()
    except ClientDisconnect:
        return Response(status_code=400)  # the caller left mid-body: nobody to answer
    try:
        body = json.loads(raw) if len(raw) <= MAX_BODY else None
    except ValueError:
        body = None
    except RecursionError:
        # A few thousand brackets fit the limit and are past the parser's depth: refused as a command's body is.
        return JSONResponse(error_reply("invalid_request", too_deep("body")), 400)
    if not isinstance(body, dict):
        return JSONResponse(error_reply("invalid_request", "body: must be a small JSON object"), 400)
    return body


def _secure(request: Request) -> bool:
    return request.url.scheme == "https" or request.headers.get("x-forwarded-proto") == "https"


class Within(Protocol):
    """Runs a route's reads and writes of the database within the door's deadline (`create_app`'s): their answer,
    or the `unavailable` of those not done in time."""

    def __call__(
        self, request: Request, work: Coroutine[Any, Any, T], *, signing_out: bool = False
    ) -> Awaitable[T | Response]: ...


class BrowserRoutes:
    """The routes' handlers, on one platform and its gate. What each reads and writes of the database is done
    within the door's deadline (`within`), as a command's look is: a body is read before it, as a command's is."""

    def __init__(self, platform: Platform, settings: Settings, gate: Gate, within: Within) -> None:
        self.platform = platform
        self.settings = settings
        self.gate = gate
        self.within = within

    async def config(self, request: Request) -> Response:
        """What the page needs before its first command; the CSRF token only to the page's own origin."""
        cookie = request.cookies.get(COOKIE)
        found = await self.within(request, self._signed_in(cookie))
        if isinstance(found, Response):
            return found
        anyone, signed_in = found
        return JSONResponse(
            {
                "token_required": anyone is None,
                "signed_in": signed_in.name if signed_in is not None else None,
                "csrf": csrf_of(cookie) if signed_in is not None and cookie else None,
                "temporal_ui": self.settings.temporal_ui_url,
                "namespace": self.settings.temporal_namespace,
            },
            headers={"Cache-Control": "no-store"},
        )

    async def _signed_in(self, cookie: str | None) -> tuple[Principal | None, Principal | None]:
        """Anyone's principal on an open API, and the browser session's of `cookie`."""
        anyone = await self.gate.open_principal()
        return anyone, await self.gate.cookie(cookie) if cookie and anyone is None else None

    async def sign_in(self, request: Request) -> Response:
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        # Refused as a command's body is: what no key can hold (a lone surrogate, a NUL), then a field it does not
        # know, each by name, before anything is looked up.
        trouble = json_trouble(body, MAX_JSON_DEPTH) or next((f"{k}: is not known" for k in body if k != "key"), None)
        if trouble is not None:
            return JSONResponse(error_reply("invalid_request", trouble), 400)
        secret = body.get("key")
        if not isinstance(secret, str) or not secret:
            return JSONResponse(error_reply("invalid_request", "key: required, the key's secret"), 400)
        return await self.within(request, self._sign_in(request, secret))

    async def _sign_in(self, request: Request, secret: str) -> Response:
        principal = await self.gate.bearer(secret)
        if principal is None:
            return unauthorized("key: not valid (wrong, revoked or expired)", invalid=True)
        remember(request, principal)
        # A sign-in is a request of its key, counted as any other: each one keeps a browser session for an hour.
        wait = await self.gate.take_request(principal)
        if wait is not None:
            return rate_limited(wait)
        cookie = await self.gate.sign_in(principal, secret)
        response = JSONResponse(
            {"status": "success", "signed_in": principal.name, "csrf": csrf_of(cookie), "expires_in": COOKIE_SECONDS},
            headers={"Cache-Control": "no-store"},
        )
        response.set_cookie(
            COOKIE,
            cookie,
            max_age=int(COOKIE_SECONDS),
            path="/",
            httponly=True,
            samesite="strict",
            secure=_secure(request),
        )
        return response

    async def sign_out(self, request: Request) -> Response:
        cookie = request.cookies.get(COOKIE)
        if cookie:
            principal = await self.within(request, who(request, self.gate, cookie=True))
            if isinstance(principal, Response):
                return principal
            ended = await self.within(request, self.gate.sign_out(cookie), signing_out=True)
            if ended is not None:
                return ended
        response = JSONResponse({"status": "success", "signed_in": None})
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict", secure=_secure(request))
        return response

    async def stream_ticket(self, request: Request) -> Response:
        principal = await self.within(request, look(request, self.gate))
        if isinstance(principal, Response):
            return principal
        body = await _json_body(request)
        if isinstance(body, Response):
            return body
        return await self.within(request, self._new_ticket(principal, body))

    async def _new_ticket(self, principal: Principal, body: dict[str, Any]) -> Response:
        try:
            session_id = session_id_of(body)
            await authorize_stream(self.platform, Caller(principal, self.gate), session_id)
            await self.platform.store.session_end(session_id)
        except CommandError as err:
            return reply_response(err.reply())
        ticket = await self.gate.new_ticket(principal, session_id)
        return JSONResponse(
            {"status": "success", "ticket": ticket, "expires_in": TICKET_SECONDS},
            headers={"Cache-Control": "no-store"},
        )
