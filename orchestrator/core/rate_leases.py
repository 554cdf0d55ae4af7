"""Rate limits that every API replica shares, spent from leases: the per-process half of a token bucket.

The bucket lives in PostgreSQL (`orchestrator_take_tokens`, 0004_keys.sql). A replica takes a tenth of a second's
worth at once (`LEASE_FRACTION`) and spends it here: a busy key costs about ten statements a second per replica,
not one per request, and what a lease leaves unspent lapses after `LEASE_SECONDS`. A bucket holds a second's
worth (`burst`) and a request never needs more (a bigger bulk write takes the whole bucket), so each can pass."""

from __future__ import annotations

import math
from dataclasses import dataclass

LEASE_SECONDS = 1.0
LEASE_FRACTION = 0.1
# Leases kept at most before the lapsed ones are dropped (a replica sees many sessions).
MAX_LEASES = 10_000


def burst(rate: float) -> float:
    """How many tokens a bucket of `rate` per second holds when full."""
    return max(1.0, rate)


def need(rate: float, count: int) -> float:
    """The tokens a request of `count` takes from a bucket of `rate` (never more than it can hold)."""
    return min(float(count), burst(rate))


def retry_after(wait_seconds: float) -> int:
    """The `Retry-After` a refusal answers: whole seconds, at least one."""
    return max(1, math.ceil(wait_seconds))


@dataclass
class Lease:
    tokens: float
    until: float


class Leases:
    """The tokens this process holds, per bucket; time comes in as `now` (monotonic seconds)."""

    def __init__(self) -> None:
        self._held: dict[str, Lease] = {}

    def spend(self, bucket: str, tokens: float, now: float) -> bool:
        """Spend `tokens` from the bucket's lease, when it holds that many and has not lapsed."""
        lease = self._held.get(bucket)
        if lease is None or lease.until <= now or lease.tokens < tokens:
            return False
        lease.tokens -= tokens
        return True

    @staticmethod
    def asked(rate: float, tokens: float) -> float:
        """How many tokens to ask the database for when the lease cannot pay: what is needed, or a lease's
        worth when that is more."""
        return min(burst(rate), max(tokens, rate * LEASE_FRACTION))

    def granted(self, bucket: str, granted: float, spent: float, now: float) -> None:
        """The database granted `granted` tokens, of which `spent` pay for this request: the rest joins the
        lease (what it still holds is kept, not thrown away), which lasts `LEASE_SECONDS` from now."""
        if len(self._held) >= MAX_LEASES:
            self._held = {k: v for k, v in self._held.items() if v.until > now}
        left = self.held(bucket, now)
        self._held[bucket] = Lease(max(0.0, left + granted - spent), now + LEASE_SECONDS)

    def held(self, bucket: str, now: float) -> float:
        lease = self._held.get(bucket)
        return 0.0 if lease is None or lease.until <= now else lease.tokens
