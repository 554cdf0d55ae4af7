"""When a loop that keeps failing on the same cause (the database away) says so: once, not every attempt.

Owns the timing only; the callers (the router, retention, the API's commands) log what it answers. A router
retries every second, retention every round and a busy API fails every request, so an outage of minutes said at
each attempt is hundreds of lines that bury what else happened. An outage is said when it starts, again at most
every `every` seconds while it lasts (with how long), and its end once, if its start was said. What goes through
is no end while it began before the last failure (a command in flight as the database went) or within `quiet`
seconds of it (a database that comes and goes); a failure `every` seconds after the last one starts a new outage
(the last one's end was never seen: nothing went through since).
"""

from __future__ import annotations

from dataclasses import dataclass

# How often a lasting outage is said again.
OUTAGE_REPEAT_SECONDS = 60.0


@dataclass
class Outage:
    """One caller's outage: `failed` at each failed attempt, `ended` at each one that went through."""

    every: float = OUTAGE_REPEAT_SECONDS
    since: float | None = None
    said_at: float | None = None
    last_failed: float | None = None
    # Failed attempts in this outage (the one that started it included).
    failures: int = 0

    def failed(self, now: float) -> float | None:
        """A failed attempt at `now`: how long the outage has lasted when it is to be said now (0.0 at its
        start), else None."""
        if self.since is not None and self.last_failed is not None and now - self.last_failed >= self.every:
            self.since = None
        self.last_failed = now
        if self.since is None:
            self.since = self.said_at = now
            self.failures = 1
            return 0.0
        self.failures += 1
        if self.said_at is not None and now - self.said_at < self.every:
            return None
        self.said_at = now
        return now - self.since

    def ended(self, now: float, began: float | None = None, quiet: float = 0.0) -> float | None:
        """An attempt begun at `began` went through at `now`: how long the outage lasted (its first failure to its
        last) when this ends one, else None."""
        if self.since is None or self.last_failed is None:
            return None
        if (began is not None and began <= self.last_failed) or now - self.last_failed < quiet:
            return None
        lasted, self.since, self.said_at = self.last_failed - self.since, None, None
        return lasted
