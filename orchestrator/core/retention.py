"""How long the platform keeps what it writes (SPEC section 14), as values passed to what deletes it.

A deployment sets its retention through settings (`ORCHESTRATOR_RETENTION__EVENT_SECONDS=86400`, ...), and a
session may carry its own (`open_session`'s `retention`). Generous by default, as the systems users trust
are: 30 days for an open session's events and for a closed session. The deleting itself is the workers'
(`orchestrator.lanes.retention`), in statements of at most `rows_per_statement` rows each.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

DAY_SECONDS = 86_400.0
# The longest retention a session or a deployment may set: about ten years.
MAX_RETENTION_SECONDS = 3_650 * DAY_SECONDS


class Retention(BaseModel):
    """A deployment's retention, and how its workers delete."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # A closed session and everything of it are deleted this long after it closed.
    closed_session_seconds: float = Field(default=30 * DAY_SECONDS, gt=0, le=MAX_RETENTION_SECONDS)
    # An open session's events (and the batches, outcomes, runs and schedule firings behind them) are deleted
    # this long after their commit, but never one a lane still waits on.
    event_seconds: float = Field(default=30 * DAY_SECONDS, gt=0, le=MAX_RETENTION_SECONDS)
    # How often each worker looks for sessions with something to delete.
    round_seconds: float = Field(default=5.0, gt=0)
    # The most rows one statement deletes of one table (a statement's locks and its WAL stay small).
    rows_per_statement: int = Field(default=1_000, ge=1)


class SessionRetention(BaseModel):
    """A session's own retention (`open_session`'s `retention`); what it leaves out is the deployment's."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    event_seconds: float | None = Field(default=None, gt=0, le=MAX_RETENTION_SECONDS)
    closed_session_seconds: float | None = Field(default=None, gt=0, le=MAX_RETENTION_SECONDS)
