"""The per-deployment limits of SPEC section 9, as one value passed to whatever enforces them.

The defaults are the specification's. A deployment changes them through settings
(`ORCHESTRATOR_LIMITS__LISTENER_CHAIN_DEPTH=4`, ...); nothing reads them from a global.
"""

from __future__ import annotations

from pydantic import AliasChoices, BaseModel, ConfigDict, Field

# The specification's bounds on a batch: a deployment may lower them, never raise them (a setting past them
# is refused when the settings are read, not accepted and then ignored).
MAX_WINDOW_SECONDS = 300
MAX_EVENTS_PER_BATCH = 1000
# The most events, objects or items one request may carry at all, whatever a deployment allows.
MAX_WRITES_PER_REQUEST = 10_000


def executions_refusal(running: int) -> str:
    """Why a run is refused past `executions_per_session`: a batch's `refused` outcome, `start_execution`'s
    `limit_exceeded`."""
    return f"executions_per_session: {running} running"


class Limits(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    listener_chain_depth: int = Field(default=8, ge=1)
    listener_fires_per_minute: int = Field(default=120, ge=1)
    listener_parallel_runs: int = Field(default=16, ge=1)
    executions_per_session: int = Field(default=256, ge=1)
    # Also by the names of SPEC section 9's table (`ORCHESTRATOR_LIMITS__MAX_EVENTS`, `..._WINDOW_SECONDS`,
    # `..._EVENT_PAYLOAD_BYTES`), the most a listener's `max_events` and `window_seconds` may say.
    max_events_per_batch: int = Field(
        default=MAX_EVENTS_PER_BATCH,
        ge=1,
        le=MAX_EVENTS_PER_BATCH,
        validation_alias=AliasChoices("max_events_per_batch", "max_events"),
    )
    max_window_seconds: float = Field(
        default=MAX_WINDOW_SECONDS,
        ge=0,
        le=MAX_WINDOW_SECONDS,
        validation_alias=AliasChoices("max_window_seconds", "window_seconds"),
    )
    max_payload_bytes: int = Field(
        default=256 * 1024, ge=1, validation_alias=AliasChoices("max_payload_bytes", "event_payload_bytes")
    )
    # The most events, objects or items one `emit_events`, `write_objects` or `post_thread_items` takes.
    max_writes_per_request: int = Field(default=1000, ge=1, le=MAX_WRITES_PER_REQUEST)
    # How long a saved listener waits before it takes effect (SPEC section 3); 0 in tests.
    activation_delay_seconds: float = Field(default=10, ge=0)
    # A created key's requests per second when `create_api_key` names none (SPEC section 13), and the events per
    # second any keys together may write into one session; both shared by every API replica. Generous: they
    # stop a runaway client, not a busy one. The bootstrap token and an open API are not limited.
    key_requests_per_second: float = Field(default=1000, gt=0)
    session_writes_per_second: float = Field(default=5000, gt=0)
