"""How the HTTP door learns who calls, and the replies that refuse.

Owns reading the credentials of a request: a bearer secret (the bootstrap token or a key; a stream may take it
as `access_token`, for clients that cannot send a header), a stream ticket (`ticket`), or a browser session's
cookie, whose requests other than GET must carry its CSRF token in `X-CSRF-Token`. While the API is open (no
token, no key ever created) nobody needs credentials and none are looked at. What a principal may do is
decided later, per command (`commands.access`); the status codes mirror the reply's error code.
"""

from __future__ import annotations

import hmac
import ipaddress
from typing import Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from orchestrator.core.access import Principal
from orchestrator.core.key_secrets import csrf_of
from orchestrator.core.rate_leases import retry_after
from orchestrator.door.gate import Gate

COOKIE = "orchestrator_session"
CSRF_HEADER = "x-csrf-token"
# Where the access log finds who made a request (`access_log`).
KEY_IN_SCOPE = "orchestrator.key"
# The stream ticket a request was let in with, for its opening to use up (`presented_ticket`).
TICKET_IN_SCOPE = "orchestrator.ticket"

# `limit_exceeded` is 422, not 429: a deployment limit refuses this request as it is (an oversize value,
# too many executions), and 429 invites clients and proxies to retry the same request automatically; a rate
# limit (`rate_limited`) is exactly the case for that.
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
    "rate_limited": 429,
    "internal_error": 500,
    "unavailable": 503,
}
# A code this table does not know yet is still a refusal of the request, not a crash.
UNKNOWN_ERROR_STATUS = 400


def error_reply(code: str, message: str) -> dict[str, str]:
    return {"status": "error", "error": code, "message": message}


def status_for(reply: dict[str, Any]) -> int:
    if reply.get("status") == "success":
        return 200
    return STATUS_BY_ERROR.get(str(reply.get("error")), UNKNOWN_ERROR_STATUS)


def reply_response(reply: dict[str, Any]) -> JSONResponse:
    """A reply with its status code, and `Retry-After` when it says when to try again."""
    headers = {"Retry-After": str(reply["retry_after"])} if reply.get("retry_after") is not None else None
    return JSONResponse(reply, status_code=status_for(reply), headers=headers)


def unauthorized(message: str, status: int = 401, *, invalid: bool = False) -> JSONResponse:
    """A request whose credentials are missing or not valid (401: RFC 6750's answer to a bearer token that is
    wrong, revoked or expired, `invalid` saying it), or whose browser session lacks its CSRF token (403)."""
    challenge = 'Bearer error="invalid_token"' if invalid else "Bearer"
    headers = {"WWW-Authenticate": challenge} if status == 401 else None
    return JSONResponse(error_reply("unauthorized", message), status_code=status, headers=headers)


def rate_limited(wait_seconds: float) -> JSONResponse:
    seconds = retry_after(wait_seconds)
    reply = {**error_reply("rate_limited", f"key: over its requests per second; retry in {seconds} s")}
    return reply_response({**reply, "retry_after": seconds})


def _loopback_address(host: str) -> bool:
    """Whether `host` is an IP address of this machine's loopback (an IPv4 one mapped into IPv6 too: a dual-stack
    socket's); a name is not, whatever it starts with (`127.attacker.example`)."""
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    mapped = getattr(address, "ipv4_mapped", None)
    return address.is_loopback or (mapped is not None and mapped.is_loopback)


def _loopback_name(host: str) -> bool:
    """Whether a request's `Host` names this machine's loopback: `localhost` (and RFC 6761's `*.localhost`) or a
    loopback address."""
    host = host.lower().rstrip(".")
    return host == "localhost" or host.endswith(".localhost") or _loopback_address(host)


def from_elsewhere(request: Request) -> JSONResponse | None:
    """The refusal of a request the open API must not trust though it asks no credentials: one a browser sends
    for a page of another origin (a form or `text/plain` POST needs no preflight, so such a page could write), or,
    on a server listening on this machine alone, one that names another host (a page whose name was pointed here,
    DNS rebinding). Only the open API asks this: a closed one reads credentials, which no such page holds."""
    origin = request.headers.get("origin")
    # Host to host: a proxy in front may speak TLS to the page and plain HTTP here.
    elsewhere = origin is not None and urlsplit(origin).netloc != request.headers.get("host", "")
    if elsewhere or request.headers.get("sec-fetch-site") == "cross-site":
        message = f"origin: {origin or 'another site'} is not this API's; a page elsewhere needs a key to call it"
        return JSONResponse(error_reply("access_denied", message), status_code=403)
    server = request.scope.get("server")
    if server and _loopback_address(str(server[0])) and not _loopback_name(request.url.hostname or ""):
        message = f"host: {request.url.hostname!r} is not this machine's name; the API listens on {server[0]} only"
        return JSONResponse(error_reply("invalid_request", message), status_code=421)
    return None


def ticket_refused() -> JSONResponse:
    return unauthorized("ticket: not valid (used already, lapsed, or for another session)", invalid=True)


def presented_ticket(request: Request) -> str | None:
    """The stream ticket `who` let the request in with (not used up: the stream's opening uses it once it opens)."""
    ticket = request.scope.get(TICKET_IN_SCOPE)
    return ticket if isinstance(ticket, str) else None


def remember(request: Request, principal: Principal) -> Principal:
    request.scope[KEY_IN_SCOPE] = principal.name
    return principal


async def who(
    request: Request,
    gate: Gate,
    *,
    cookie: bool = False,
    query_token: bool = False,
    ticket_for: str | None = None,
) -> Principal | Response:
    """The caller's principal, or the reply that refuses it: 401 with no credentials or credentials that are not
    valid (the same for a wrong, revoked or expired key, a used ticket, a browser session that has ended), 403 for
    a browser session's request without its CSRF token, 400 for an `Authorization` header given more than once."""
    anyone = await gate.open_principal()
    if anyone is not None:
        refused = from_elsewhere(request)
        return refused if refused is not None else remember(request, anyone)
    given = request.headers.getlist("authorization")
    if len(given) > 1:
        # Which one is meant? A proxy in front may have read the other: neither is taken.
        message = f"authorization: given {len(given)} times; send one bearer token"
        return JSONResponse(error_reply("invalid_request", message), status_code=400)
    header = given[0] if given else None
    params = request.query_params
    if header is None and query_token and "access_token" in params:
        header = f"Bearer {params['access_token']}"
    if header is not None:
        scheme, _, presented = header.partition(" ")
        bearer = scheme.lower() == "bearer" and presented.strip() != ""
        principal = await gate.bearer(presented.strip()) if bearer else None
        if principal is None:
            # RFC 6750: `invalid_token` for a bearer token that is not valid; none for another scheme or none given.
            return unauthorized("authorization: the bearer token is not valid", invalid=bearer)
        return remember(request, principal)
    if ticket_for is not None and "ticket" in params:
        principal = await gate.ticket(params["ticket"], ticket_for)
        if principal is None:
            return ticket_refused()
        request.scope[TICKET_IN_SCOPE] = params["ticket"]
        return remember(request, principal)
    value = request.cookies.get(COOKIE) if cookie else None
    if value:
        principal = await gate.cookie(value)
        if principal is None:
            return unauthorized("cookie: the browser session has ended; sign in again")
        if request.method != "GET" and not hmac.compare_digest(
            request.headers.get(CSRF_HEADER, "").encode(), csrf_of(value).encode()
        ):
            return unauthorized(f"{CSRF_HEADER}: missing or not this browser session's", 403)
        return remember(request, principal)
    if ticket_for is not None:
        # A stream: a browser's session cookie does not open it (an EventSource cannot send the CSRF header).
        return unauthorized(
            "authorization: a bearer token is required, or `access_token`, or a browser's single-use `ticket`"
            " (POST /v1/stream-tickets with the session's cookie)"
        )
    return unauthorized(
        "authorization: a bearer token is required (the CLI takes --token or ORCHESTRATOR_API_TOKEN; on the"
        " platform's own machine, `orchestrator call --local` reaches its database with no key)"
    )


async def look(request: Request, gate: Gate) -> Principal | Response:
    """Who calls (a key, the token or a browser session), and whether its key may make one more request now: its
    principal, or the answer that says why not."""
    principal = await who(request, gate, cookie=True)
    if isinstance(principal, Response):
        return principal
    wait = await gate.take_request(principal)
    return principal if wait is None else rate_limited(wait)
