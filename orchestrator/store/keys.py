"""Keys, passes and shared rate buckets in PostgreSQL (0004_keys.sql), and what authorization looks up.

Owns the statements of `create_api_key`, `list_api_keys` and `revoke_api_key`; the passes a key hands a
browser (a session cookie, a single-use stream ticket), each found by the SHA-256 of its secret and joined with
its key, so a revoked key's passes are worth nothing at once; one token-bucket take per call
(`orchestrator_take_tokens`); and the two facts a decision on a command needs: a session's alias and an event
type's `allow`. Caching them per process is the gate's (`orchestrator.door.gate`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

import asyncpg

from orchestrator.core.errors import CommandError

_KEY_COLUMNS = "id, name, hash, scopes, requests_per_second, created_at, expires_at, revoked_at"
# A pass with its key's state beside it (none for the bootstrap token's passes).
_PASS_JOIN = (
    "p.kind, p.key_name, p.key_hash, p.session_id, p.expires_at AS pass_expires_at, k.scopes, k.requests_per_second,"
    " k.expires_at, k.revoked_at, k.name IS NOT NULL AS key_found"
)
# A bucket untouched this long is full again, the same as no row.
BUCKET_IDLE_SECONDS = 3600


def key_view(row: asyncpg.Record | dict[str, Any], now: datetime) -> dict[str, Any]:
    """A key as `list_api_keys` shows it: never its hash, and whether it works now."""
    state = "active"
    if row["revoked_at"] is not None:
        state = "revoked"
    elif row["expires_at"] is not None and row["expires_at"] <= now:
        state = "expired"
    return {
        "name": row["name"],
        "id": row["id"],
        "scopes": row["scopes"],
        "requests_per_second": row["requests_per_second"],
        "created_at": row["created_at"].isoformat(),
        "expires_at": row["expires_at"].isoformat() if row["expires_at"] is not None else None,
        "revoked_at": row["revoked_at"].isoformat() if row["revoked_at"] is not None else None,
        "state": state,
    }


class KeyRecords:
    """Mixed into the store, which provides `pool`."""

    pool: asyncpg.Pool

    # -- keys -------------------------------------------------------------------------------------------------

    async def create_key(
        self,
        key_id: str,
        name: str,
        digest: bytes,
        scopes: list[str],
        requests_per_second: float | None,
        expires_at: datetime | None,
    ) -> asyncpg.Record:
        row = await self.pool.fetchrow(
            "INSERT INTO orchestrator.api_keys (id, name, hash, scopes, requests_per_second, expires_at)"
            f" VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING RETURNING {_KEY_COLUMNS}",
            key_id,
            name,
            digest,
            scopes,
            requests_per_second,
            expires_at,
        )
        if row is None:
            raise CommandError("invalid_request", f"name: a key named {name!r} exists (names are never reused)")
        return row

    async def list_keys(self) -> list[asyncpg.Record]:
        return list(
            await self.pool.fetch(f"SELECT {_KEY_COLUMNS} FROM orchestrator.api_keys ORDER BY created_at, name")
        )

    async def revoke_key(self, name: str) -> asyncpg.Record:
        """Revoke a key (once: revoking it again answers it as it is) and drop its passes."""
        async with self.pool.acquire() as conn, conn.transaction():
            row = await conn.fetchrow(
                "UPDATE orchestrator.api_keys SET revoked_at = coalesce(revoked_at, clock_timestamp()) WHERE name = $1"
                f" RETURNING {_KEY_COLUMNS}",
                name,
            )
            if row is None:
                raise CommandError("not_found", f"name: no key {name!r}")
            await conn.execute("DELETE FROM orchestrator.key_passes WHERE key_name = $1", name)
            return row

    async def key_by_name(self, name: str) -> asyncpg.Record | None:
        return await self.pool.fetchrow(f"SELECT {_KEY_COLUMNS} FROM orchestrator.api_keys WHERE name = $1", name)

    async def key_by_id(self, key_id: str) -> asyncpg.Record | None:
        return await self.pool.fetchrow(f"SELECT {_KEY_COLUMNS} FROM orchestrator.api_keys WHERE id = $1", key_id)

    async def any_keys(self) -> bool:
        """Whether a key was ever created: from then on the API is closed to requests without one."""
        return bool(await self.pool.fetchval("SELECT EXISTS (SELECT 1 FROM orchestrator.api_keys)"))

    # -- passes -----------------------------------------------------------------------------------------------

    async def add_pass(
        self,
        digest: bytes,
        kind: str,
        key_name: str,
        session_id: str | None,
        seconds: float,
        key_hash: bytes | None,
    ) -> None:
        """A pass for `key_name`; `key_hash`: the digest of the secret that asked for it, kept for the bootstrap
        token's passes, which are worth nothing once the token changes."""
        await self.pool.execute(
            "INSERT INTO orchestrator.key_passes (hash, kind, key_name, session_id, expires_at, key_hash)"
            " VALUES ($1, $2, $3, $4, clock_timestamp() + make_interval(secs => $5), $6)",
            digest,
            kind,
            key_name,
            session_id,
            seconds,
            key_hash,
        )

    async def cookie_pass(self, digest: bytes) -> asyncpg.Record | None:
        """A session cookie's pass, while it lasts, with its key's state."""
        return await self.pool.fetchrow(
            f"SELECT {_PASS_JOIN} FROM orchestrator.key_passes p LEFT JOIN orchestrator.api_keys k ON k.name ="
            " p.key_name"
            " WHERE p.hash = $1 AND p.kind = 'cookie' AND p.expires_at > clock_timestamp()",
            digest,
        )

    async def ticket_pass(self, digest: bytes) -> asyncpg.Record | None:
        """A stream ticket while it lasts and is not used, with its key's state; it is used by `spend_ticket`."""
        return await self.pool.fetchrow(
            f"SELECT {_PASS_JOIN} FROM orchestrator.key_passes p LEFT JOIN orchestrator.api_keys k ON k.name ="
            " p.key_name"
            " WHERE p.hash = $1 AND p.kind = 'ticket' AND p.expires_at > clock_timestamp()",
            digest,
        )

    async def spend_ticket(self, digest: bytes, session_id: str) -> bool:
        """Use a stream ticket up (it is single-use): whether it was there, for `session_id`, unused and lasting.
        One statement: of two openings with one ticket, one spends it."""
        spent = await self.pool.fetchval(
            "DELETE FROM orchestrator.key_passes WHERE hash = $1 AND kind = 'ticket' AND session_id = $2"
            " AND expires_at > clock_timestamp() RETURNING true",
            digest,
            session_id,
        )
        return bool(spent)

    async def drop_pass(self, digest: bytes) -> None:
        await self.pool.execute("DELETE FROM orchestrator.key_passes WHERE hash = $1", digest)

    async def drop_lapsed(self) -> None:
        """Forget passes that have lapsed and buckets that are full again by now."""
        await self.pool.execute("DELETE FROM orchestrator.key_passes WHERE expires_at < clock_timestamp()")
        await self.pool.execute(
            "DELETE FROM orchestrator.rate_buckets WHERE refilled_at < clock_timestamp() - make_interval(secs => $1)",
            BUCKET_IDLE_SECONDS,
        )

    # -- rate buckets -----------------------------------------------------------------------------------------

    async def take_tokens(
        self, bucket: str, rate: float, burst: float, want: float, need: float
    ) -> tuple[float, float]:
        """(granted, wait): the tokens taken from the shared bucket (0 when it holds fewer than `need`), and
        when refused, the seconds until it will hold them."""
        row = await self.pool.fetchrow(
            "SELECT o_granted, o_wait FROM orchestrator.orchestrator_take_tokens($1, $2, $3, $4, $5)",
            bucket,
            rate,
            burst,
            want,
            need,
        )
        assert row is not None
        return float(row["o_granted"]), float(row["o_wait"])

    # -- what a decision looks up -----------------------------------------------------------------------------

    async def session_alias(self, session_id: str) -> tuple[bool, str | None]:
        """(found, alias) of a session."""
        row = await self.pool.fetchrow("SELECT alias FROM orchestrator.sessions WHERE id = $1", session_id)
        return (False, None) if row is None else (True, row["alias"])

    async def event_type_allows(self, names: Sequence[str]) -> dict[str, list[str] | None]:
        """Each declared type's `allow` (None: not set); a type not declared is not in the answer."""
        rows = await self.pool.fetch(
            "SELECT name, allow FROM orchestrator.event_types WHERE name = ANY($1::text[])", list(names)
        )
        return {r["name"]: r["allow"] for r in rows}
