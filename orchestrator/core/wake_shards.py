"""Which router a session's wake-up reaches: sessions fall into shards, each shard's channel has one listener.

A PostgreSQL notification reaches every connection that listens on its channel, so with one channel for all,
every router of a deployment was woken (and ran a round that found the session taken) for every notification
that any writer raised: each router added its CPU and PostgreSQL's to every write (`bench.walls --cases
wakeups`). Now a session's writers notify the channel of its shard (`orchestrator_wake_channel`, the same rule
as `shard_of`), and each shard is held by one router at a time (an advisory lock on the connection that
listens, so a router's death frees its shards at once). The routers share the shards out evenly: each takes
free shards up to its fair share and gives back what it holds beyond it, at every poll. A notification sent
while its shard changes hands is lost, as a lost notification always could be: the writers' next commit after a
second, or the slow poll, finds the session (0029, 0030).

Pure: the shard of a session, the channel of a shard, and what a router takes or gives back.
"""

from __future__ import annotations

import hashlib
import zlib
from collections.abc import Collection, Sequence
from dataclasses import dataclass

SHARDS = 64
CHANNEL_PREFIX = "orchestrator_events_"
# The one channel of the releases before the shards: heard too, so that while a rolling upgrade has processes of
# both releases (each puts back its own function bodies when it starts), no notification goes unheard. Nothing
# of this release notifies it.
LEGACY_CHANNEL = "orchestrator_events"


def shard_of(session_id: str) -> int:
    """The first 16 bits of the MD5 of the id's UTF-8, modulo SHARDS: what `orchestrator_wake_channel` computes."""
    return int(hashlib.md5(session_id.encode()).hexdigest()[:4], 16) % SHARDS


def channel(shard: int) -> str:
    return f"{CHANNEL_PREFIX}{shard}"


def lock_space(schema: str) -> int:
    """The first key of the shards' advisory locks (the second is the shard): one deployment's (its schema's)
    apart from another's in the same database. A positive 31-bit number, so `pg_locks.classid` shows it as is."""
    return _key(f"{schema}:wake shards")


def presence_space(schema: str) -> int:
    """The first key of the lock every router of the deployment holds shared (the second is 0): how many there are."""
    return _key(f"{schema}:routers")


def _key(text: str) -> int:
    return zlib.crc32(text.encode()) & 0x7FFF_FFFF


def fair_share(routers: int) -> int:
    """The most shards one of `routers` routers holds."""
    return -(-SHARDS // max(routers, 1))


def shared_out(held: Sequence[Collection[int]]) -> bool:
    """Whether routers holding `held` (each one's shards) are where `rebalance` leaves them: every shard held by
    exactly one of them, none holding more than its fair share."""
    fair = fair_share(len(held))
    return all(len(shards) <= fair for shards in held) and sorted(s for h in held for s in h) == list(range(SHARDS))


@dataclass(frozen=True)
class Share:
    give_back: int
    take: int


def rebalance(held: int, routers: int) -> Share:
    """What a router holding `held` shards does, `routers` being listed: gives back what is beyond its fair share,
    or asks for free shards up to it (which it may not get: another holds them until its own turn)."""
    fair = fair_share(routers)
    if held > fair:
        return Share(give_back=held - fair, take=0)
    return Share(give_back=0, take=fair - held)
