"""The HTTP door's access log and the headers every response carries.

Owns one line per request on the `orchestrator.access` logger (client, method, path, query, status, time, and
the name of the key that made it): never a secret. Headers are not logged, and every query parameter but the
few that carry none (`SHOWN`) has its value replaced by `***`, so an `access_token` or a stream `ticket` never
reaches a log. Every response also forbids inline script (`Content-Security-Policy`: the dashboard's script is
a file of its own), framing, and sending the URL on as a referrer.
"""

from __future__ import annotations

import logging
import time
from urllib.parse import parse_qsl, urlencode

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from orchestrator.door.auth import KEY_IN_SCOPE

log = logging.getLogger("orchestrator.access")

# Query parameters whose values the log may show: positions and a stream's declaration, never a credential.
SHOWN = frozenset({"after", "filter", "batch", "client", "session"})
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self';"
    " object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "no-referrer",
}


def shown_query(query: str) -> str:
    """The query string as the log shows it: every value outside `SHOWN` replaced by `***`."""
    pairs = parse_qsl(query, keep_blank_values=True)
    return urlencode([(k, v if k in SHOWN else "***") for k, v in pairs], safe="*")


class AccessLog:
    """ASGI middleware: the security headers on every response, and a line per request once it has ended."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.monotonic()
        status = 0

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = MutableHeaders(scope=message)
                for name, value in SECURITY_HEADERS.items():
                    headers.setdefault(name, value)
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            if log.isEnabledFor(logging.INFO):
                query = scope.get("query_string", b"").decode("latin-1")
                path = str(scope.get("path", "")) + (f"?{shown_query(query)}" if query else "")
                client = scope.get("client") or ("-", 0)
                log.info(
                    '%s "%s %s" %d %.0fms key=%s',
                    client[0],
                    scope.get("method", "-"),
                    path,
                    status,
                    (time.monotonic() - started) * 1000,
                    scope.get(KEY_IN_SCOPE, "-"),
                )
