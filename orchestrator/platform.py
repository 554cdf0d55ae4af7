"""The platform as one object: the store, the Temporal client and the settings behind every door.

Owns the command dispatch that the Python client, the command line and HTTP share, so the three doors
answer the same JSON for the same command. A command never raises past `command()`: bad input and
refusals become `{"status": "error", ...}` replies, a database out of reach `unavailable`, and a bug
`internal_error`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from temporalio.service import RPCError

from orchestrator.commands import dispatch
from orchestrator.commands.access import Caller
from orchestrator.config import Settings
from orchestrator.core.errors import CommandError, unavailable
from orchestrator.core.outages import Outage
from orchestrator.lanes.executions import TEMPORAL_AWAY
from orchestrator.store.connection import DATABASE_AWAY, DATABASE_UNAVAILABLE, unreachable
from orchestrator.store.engine_records import EngineRecords

log = logging.getLogger(__name__)

# How long after the last command refused for the database one that goes through says the outage ended: a busy
# API's commands in flight as the database went, or a database that comes and goes, make no new outage each.
OUTAGE_QUIET_SECONDS = 5.0


class Platform:
    """What a command needs: the store, Temporal (None where no command needs it), the settings."""

    def __init__(
        self,
        store: EngineRecords,
        settings: Settings,
        temporal: Any | None = None,
        database_url: str = "",
        direct_url: str | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.temporal = temporal
        # The pools' database (perhaps a pooler in transaction mode), and PostgreSQL itself: the router and the
        # streams listen for NOTIFY on connections of their own, which a pooler cannot hand out per transaction.
        self.database_url = database_url
        self.direct_url = direct_url or database_url
        # The database away for commands: said when it goes, once a minute and when it is back, not a request.
        self._database_outage = Outage()
        # Commands past the door's deadline while not on the database (on Temporal, between statements): the same.
        self._late_commands = Outage()

    @classmethod
    async def connect(
        cls, settings: Settings, database_url: str, temporal: Any | None = None, *, door: bool = True
    ) -> Platform:
        """Open the store (applying migrations) for a database that is already running: pools on `database_url`,
        sessions of their own on `settings.database_direct_url` when set. `door`: whether an HTTP door may serve
        it (`create_app`), whose deadlines need the pool to note each connection it lends; a process with no door
        (a worker, a command line's local command) says False, and its acquires take no hook."""
        direct_url = settings.database_direct_url or database_url
        try:
            store = await EngineRecords.open(
                database_url,
                pool_size=settings.database_pool_size,
                direct_url=direct_url,
                statement_cache_size=settings.statement_cache_size,
                schema=settings.database_schema,
                lent_noted=door,
            )
        except DATABASE_AWAY as err:
            raise unreachable(database_url, err) from err
        return cls(store, settings, temporal, database_url, direct_url)

    async def close(self) -> None:
        await self.store.close()

    async def command(self, body: Any, caller: Caller | None = None, raw: bytes | None = None) -> dict[str, Any]:
        """Run one JSON command and answer with its JSON reply; a door that checks keys says who calls, and one
        that read the JSON text gives it (`raw`)."""
        began = time.monotonic()
        try:
            reply = await dispatch(self, body, caller, raw)
        except CommandError as err:
            return err.reply()
        except DATABASE_UNAVAILABLE as err:
            self.database_away(type(err).__name__)
            return unavailable().reply()
        except Exception as err:
            if isinstance(err, RPCError) and err.status in TEMPORAL_AWAY:
                log.warning("command answered unavailable: Temporal is out of reach (%s)", err.status.name)
                return unavailable("temporal").reply()
            log.exception("command failed")
            return CommandError("internal_error", "the command failed inside the platform").reply()
        if (lasted := self._database_outage.ended(time.monotonic(), began, OUTAGE_QUIET_SECONDS)) is not None:
            log.warning("commands reach the database again, after %.0f s", lasted)
        return reply

    def command_late(self, why: str) -> None:
        """A command answered `unavailable` at the door's deadline while it was not on the database (on Temporal,
        or between statements): said as `database_away` says the database away, and not as the database away."""
        _say_unavailable(self._late_commands, "past the door's deadline, not on the database", why)

    def database_away(self, why: str) -> None:
        """A command, or the door's look before one, answered `unavailable` for the database: said when it
        starts and once a minute while it lasts (with how many were), not at every request (a busy door's outage
        of seconds was a thousand lines); the access log, when on, has each request."""
        _say_unavailable(self._database_outage, "the database is out of reach", why)


def _say_unavailable(outage: Outage, reason: str, why: str) -> None:
    """Commands answering `unavailable` for `reason`: said when it starts and once a minute while it lasts."""
    lasted = outage.failed(time.monotonic())
    if lasted == 0.0:
        log.warning("commands answer unavailable: %s (%s)", reason, why)
    elif lasted is not None:
        log.warning(
            "commands still answer unavailable, for %.0f s (%d so far): %s (%s)", lasted, outage.failures, reason, why
        )
