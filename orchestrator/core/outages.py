"""When a loop that keeps failing on the same cause (the database away) says so: once, not every attempt.

Owns the timing only; the loops (the router, retention) log what it answers. A router retries every second
and retention every round, so an outage of minutes said at each attempt is hundreds of lines that bury what
else happened. An outage is said when it starts, again at most every `every` seconds while it lasts (with how
long), and its end once, if its start was said.
"""

from __future__ import annotations

from dataclasses import dataclass

# How often a lasting outage is said again.
OUTAGE_REPEAT_SECONDS = 60.0


@dataclass
class Outage:
    """One loop's outage: `failed` at each failed attempt, `ended` at each one that went through."""

    every: float = OUTAGE_REPEAT_SECONDS
    since: float | None = None
    said_at: float | None = None
    # Failed attempts in this outage (the one that started it included).
    failures: int = 0

    def failed(self, now: float) -> float | None:
        """A failed attempt at `now`: how long the outage has lasted when it is to be said now (0.0 at its
        start), else None."""
        self.failures += 1
        if self.since is None:
            self.since = self.said_at = now
            self.failures = 1
            return 0.0
        if self.said_at is not None and now - self.said_at < self.every:
            return None
        self.said_at = now
        return now - self.since

    def ended(self, now: float) -> float | None:
        """An attempt that went through at `now`: how long the outage lasted when there was one, else None."""
        if self.since is None:
            return None
        lasted, self.since, self.said_at = now - self.since, None, None
        return lasted
