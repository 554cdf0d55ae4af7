"""The API process's gate: who a request is (a key, the bootstrap token, a browser session, a stream ticket, or
nobody on an open API), and whether its key or its session may take one more request now.

Owns the per-process caches in front of the store: a key's row and a browser session's pass for at most
`CACHE_SECONDS`, so a revoked or expired key is refused by every replica within that (SPEC section 13 asks for
one second); a session's alias for as long as the process lives (it never changes); and the leases of the
shared rate buckets (`core.rate_leases`). What a principal may do is `core.access`'s decision.
"""

from __future__ import annotations

import asyncio
import hmac
import secrets
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypeVar

from orchestrator.config import Settings, reveal
from orchestrator.core.access import Principal
from orchestrator.core.key_secrets import ANONYMOUS, BOOTSTRAP, digest, key_id_of, matches
from orchestrator.core.rate_leases import Leases, burst, need
from orchestrator.core.scopes import Grant
from orchestrator.store.engine_records import EngineRecords

# A revoked key is refused by every replica within this, plus a request's own time.
CACHE_SECONDS = 0.5
# A browser session lasts an hour; a stream ticket half a minute, and opens one stream once.
COOKIE_SECONDS = 3600.0
TICKET_SECONDS = 30.0
# How often a process forgets lapsed passes and buckets that are full again.
TIDY_SECONDS = 600.0
MAX_ALIASES = 50_000

ADMIN = Grant.of(["admin"])
K = TypeVar("K")
V = TypeVar("V")


class Gate:
    """One per API process (`create_app`), in front of the store."""

    def __init__(
        self, store: Callable[[], EngineRecords], settings: Settings, clock: Callable[[], float] = time.monotonic
    ) -> None:
        # Asked for at the first request: building the app needs no database.
        self._store = store
        # Without the whitespace around it, as a presented token is read (`auth.who`): a token set from a file keeps
        # its line end, and no request could present it. One of whitespace alone stays as it is: set, it closes the API.
        token = reveal(settings.api_token) or None
        self.token = (token.strip() or token) if token else None
        self.limits = settings.limits
        self.clock = clock
        self._keys: dict[str, tuple[float, Mapping[str, Any] | None]] = {}
        # Whether a key (by name) still works, for the streams it opened.
        self._names: dict[str, tuple[float, bool]] = {}
        self._cookies: dict[bytes, tuple[float, Principal | None]] = {}
        self._any_keys: tuple[float, bool] = (-1.0, False)
        self._aliases: OrderedDict[str, str | None] = OrderedDict()
        self._leases = Leases()
        # A take from the database under way, per bucket (one at a time per process).
        self._asking: dict[str, asyncio.Future[None]] = {}
        self._tidied = clock()

    @property
    def store(self) -> EngineRecords:
        return self._store()

    # -- who is it -------------------------------------------------------------------------------------------

    def key_made(self) -> None:
        """A key was made through this door: the API is closed from this request on, not once the cache lapses
        (other replicas close within CACHE_SECONDS). Keys are never deleted, so it stays closed."""
        self._any_keys = (self.clock() + CACHE_SECONDS, True)

    async def open_principal(self) -> Principal | None:
        """Anyone, as an admin, while no token is set and no key was ever created (the embedded default)."""
        if self.token is not None:
            return None
        until, exists = self._any_keys
        now = self.clock()
        if until <= now and not exists:
            exists = await self.store.any_keys()
            self._any_keys = (now + CACHE_SECONDS, exists)
        return None if exists else Principal(ANONYMOUS, ADMIN)

    async def bearer(self, secret: str) -> Principal | None:
        """The bootstrap token's or a key's principal; None for anything else (a revoked or expired key too)."""
        if self.token is not None and hmac.compare_digest(secret.encode(), self.token.encode()):
            return Principal(BOOTSTRAP, ADMIN)
        key_id = key_id_of(secret)
        if key_id is None:
            return None
        row = await self._key(key_id)
        if row is None or not matches(secret, bytes(row["hash"])):
            return None
        return _principal(row["name"], row)

    def holds_on(self, principal: Principal) -> Callable[[], Awaitable[bool]] | None:
        """For what outlives its request (a stream): whether `principal` still holds, asked as it goes on;
        None when nothing can take it away (the bootstrap token and the open API are the process's own)."""
        if principal.name in (BOOTSTRAP, ANONYMOUS):
            return None

        async def holds() -> bool:
            async def fetch() -> bool:
                row = await self.store.key_by_name(principal.name)
                return row is not None and _principal(principal.name, dict(row)) is not None

            return await self._cached(self._names, principal.name, fetch)

        return holds

    async def _key(self, key_id: str) -> Mapping[str, Any] | None:
        async def fetch() -> Mapping[str, Any] | None:
            row = await self.store.key_by_id(key_id)
            return None if row is None else dict(row)

        return await self._cached(self._keys, key_id, fetch)

    async def cookie(self, cookie: str) -> Principal | None:
        """The principal of a browser session's cookie while it lasts and its key works."""
        hashed = digest(cookie)

        async def fetch() -> Principal | None:
            row = await self.store.cookie_pass(hashed)
            return None if row is None else self._pass_principal(dict(row))

        return await self._cached(self._cookies, hashed, fetch)

    async def _cached(self, cache: dict[K, tuple[float, V]], key: K, fetch: Callable[[], Awaitable[V]]) -> V:
        """The answer kept for `key` while it is younger than CACHE_SECONDS, else `fetch`'s, kept in its place
        (what has lapsed is forgotten once the cache holds more than MAX_ALIASES)."""
        now = self.clock()
        cached = cache.get(key)
        if cached is not None and cached[0] > now:
            return cached[1]
        value = await fetch()
        if len(cache) > MAX_ALIASES:
            for lapsed in [k for k, (until, _) in cache.items() if until <= now]:
                del cache[lapsed]
        cache[key] = (now + CACHE_SECONDS, value)
        return value

    async def ticket(self, ticket: str, session_id: str) -> Principal | None:
        """The principal of a stream ticket for this session's stream, not used up yet: the stream's opening uses it
        (`spend_ticket`) as its last step, so an opening that fails or is late leaves it for a retry."""
        row = await self.store.ticket_pass(digest(ticket))
        if row is None or row["session_id"] != session_id:
            return None
        return self._pass_principal(dict(row))

    async def spend_ticket(self, ticket: str, session_id: str) -> bool:
        """Use the ticket up, as a stream opens with it: False when it was used already (by another opening with
        it), or has lapsed meanwhile."""
        return await self.store.spend_ticket(digest(ticket), session_id)

    def _pass_principal(self, row: Mapping[str, Any]) -> Principal | None:
        if row["key_name"] == BOOTSTRAP:
            # Signed in with the bootstrap token: worth nothing once the token is changed or unset.
            token = self.token
            return Principal(BOOTSTRAP, ADMIN) if token and matches(token, bytes(row["key_hash"])) else None
        if not row["key_found"]:
            return None
        return _principal(row["key_name"], row)

    # -- passes ----------------------------------------------------------------------------------------------

    async def sign_in(self, principal: Principal, secret: str) -> str:
        """A browser session for the key whose `secret` the browser presented: its cookie's value."""
        cookie = secrets.token_urlsafe(32)
        key_hash = digest(secret) if principal.name == BOOTSTRAP else None
        await self.store.add_pass(digest(cookie), "cookie", principal.name, None, COOKIE_SECONDS, key_hash)
        await self._tidy()
        return cookie

    async def sign_out(self, cookie: str) -> None:
        hashed = digest(cookie)
        self._cookies.pop(hashed, None)
        await self.store.drop_pass(hashed)

    async def new_ticket(self, principal: Principal, session_id: str) -> str:
        """A single-use ticket that opens one stream of the session as `principal`, within `TICKET_SECONDS`."""
        ticket = secrets.token_urlsafe(32)
        key_hash = digest(self.token) if principal.name == BOOTSTRAP and self.token else None
        await self.store.add_pass(digest(ticket), "ticket", principal.name, session_id, TICKET_SECONDS, key_hash)
        await self._tidy()
        return ticket

    async def _tidy(self) -> None:
        now = self.clock()
        if now - self._tidied >= TIDY_SECONDS:
            self._tidied = now
            await self.store.drop_lapsed()

    # -- rates -----------------------------------------------------------------------------------------------

    async def take_request(self, principal: Principal) -> float | None:
        """None when the key may make one more request now; else the seconds until it may."""
        if principal.requests_per_second is None:
            return None
        return await self._take(f"key:{principal.name}", principal.requests_per_second, 1)

    async def session_writes(self, session_id: str, count: int) -> float | None:
        return await self._take(f"session:{session_id}", self.limits.session_writes_per_second, count)

    async def _take(self, bucket: str, rate: float, count: int) -> float | None:
        tokens = need(rate, count)
        while True:
            if self._leases.spend(bucket, tokens, self.clock()):
                return None
            asking = self._asking.get(bucket)
            if asking is None:
                break
            # Another request of this process is taking a lease for the bucket: wait for what it brings.
            await asyncio.shield(asking)
        asking = asyncio.get_running_loop().create_future()
        self._asking[bucket] = asking
        try:
            asked = self._leases.asked(rate, tokens)
            granted, wait = await self.store.take_tokens(bucket, rate, burst(rate), asked, tokens)
            if granted < tokens:
                return wait
            self._leases.granted(bucket, granted, tokens, self.clock())
        finally:
            del self._asking[bucket]
            asking.set_result(None)
        await self._tidy()
        return None

    # -- what a decision looks up ----------------------------------------------------------------------------

    async def session_alias(self, session_id: str) -> tuple[bool, str | None]:
        if session_id in self._aliases:
            self._aliases.move_to_end(session_id)
            return True, self._aliases[session_id]
        found, alias = await self.store.session_alias(session_id)
        if found:
            self._aliases[session_id] = alias
            if len(self._aliases) > MAX_ALIASES:
                self._aliases.popitem(last=False)
        return found, alias


def _principal(name: str, row: Mapping[str, Any]) -> Principal | None:
    """A key's principal, unless it is revoked or has expired."""
    if row["revoked_at"] is not None:
        return None
    if row["expires_at"] is not None and row["expires_at"] <= datetime.now(UTC):
        return None
    return Principal(name, Grant.of(row["scopes"]), row["requests_per_second"])
