"""The processes: `run_dev` (everything in one process tree), `run_worker` and `run_api` (the parts alone).

Owns the order things start and stop in: servers first, then the platform, then the worker and the HTTP
API; on Ctrl-C or SIGTERM the reverse, so nothing in flight loses the thing under it. A part that fails
stops the rest and its error is raised once everything is down. What the lane engine adds comes from
`engine.wiring.platform_components`; the command-line parsing lives in `cli`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import signal
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Generator, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp
from temporalio.client import Client as TemporalClient

from orchestrator.app_loader import UserApp, load_app, workflow_names
from orchestrator.client import api_url
from orchestrator.config import HTTP_KEEP_ALIVE_SECONDS, Settings
from orchestrator.core.plan import changes
from orchestrator.crossings import install_from_environment
from orchestrator.dev import app_migrate, app_plan
from orchestrator.dev.embedded import (
    TemporalDevServer,
    running_postgres_url,
    start_postgres,
    stop_abandoned_dev_servers,
)
from orchestrator.dev.keeper import Kept, keep
from orchestrator.dev.log import activity_lines
from orchestrator.dev.ports import PortTaken, plan_ports, remember, running_temporal_address
from orchestrator.dev.reload import ReloadingEngine, import_app
from orchestrator.door.api import create_app
from orchestrator.engine.wiring import platform_components
from orchestrator.engine.worker import build_worker, connect_temporal, settle_heap
from orchestrator.lanes.registry import WorkflowRegistry
from orchestrator.platform import Platform
from orchestrator.telemetry import install as install_telemetry

log = logging.getLogger(__name__)

Announce = Callable[[str], None]

# The example app `orchestrator dev` runs when no --app is given; without it the platform runs alone.
DEFAULT_APP = "examples.missions.app"
# `Ready.` waits this much past the listeners' `effective_at`, for a database clock a little ahead of ours.
CLOCK_MARGIN_SECONDS = 0.2


class ConfigurationError(Exception):
    """The settings do not say enough to run this part (e.g. `worker` without a database URL)."""


class TemporalUnreachable(Exception):
    """The Temporal frontend at the address did not answer the client's connect (nothing listens there, a name no
    resolver knows): said in one line, naming the address, rather than the SDK's traceback."""


# Set once a connect to Temporal failed in this process: its SDK's core may then call into Python from its own
# thread while the interpreter finalizes, which aborts the process (SIGABRT) after its message was printed, so the
# command line ends such a process at once (`cli.main`).
temporal_connect_failed = False


async def _temporal(address: str, settings: Settings) -> TemporalClient:
    """`connect_temporal` for a process of the command line: an address that cannot be is a `ConfigurationError`,
    one that does not answer a `TemporalUnreachable`."""
    global temporal_connect_failed
    try:
        return await connect_temporal(address, settings.temporal_namespace, settings)
    except ValueError as err:
        raise ConfigurationError(f"temporal_address: {address!r} is not a Temporal address HOST:PORT ({err})") from None
    except RuntimeError as err:
        temporal_connect_failed = True
        if "client connect" not in str(err):
            raise
        raise TemporalUnreachable(
            f"temporal_address: cannot reach Temporal at {address} ({err}): start it, or point"
            " ORCHESTRATOR_TEMPORAL_ADDRESS at one that runs (`orchestrator dev` with it unset runs one of its own)"
        ) from None


@dataclass(frozen=True)
class Endpoints:
    """Where the running parts are, as printed by `orchestrator dev`."""

    database_url: str
    temporal_address: str
    temporal_namespace: str
    temporal_ui_url: str | None
    api_url: str | None


def _log_announce(line: str) -> None:
    log.info("%s", line)


# The HTTP server


class _QuietSignalsServer(uvicorn.Server):
    """uvicorn's server without its own signal handlers (the runtime decides when the API stops), and whose
    stop ends the open streams once it no longer accepts, so that they cannot hold it up."""

    def __init__(self, config: uvicorn.Config, on_stop_accepting: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_stop_accepting = on_stop_accepting

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        for server in self.servers:
            server.close()
        self._on_stop_accepting()
        await super().shutdown(sockets)


class ApiServer:
    """uvicorn serving an ASGI app on this event loop.

    The socket is bound here, not by uvicorn, so a port in use fails with a clear OSError instead of
    uvicorn's `sys.exit`, and port 0 gives a free port whose number is known before the first request. Its
    stop is bounded by `shutdown_seconds`: it stops accepting, ends the open streams with their last message,
    lets the requests in flight finish, and cancels whatever still runs once the time is up.
    """

    def __init__(
        self,
        app: ASGIApp,
        host: str,
        port: int,
        shutdown_seconds: float = 10.0,
        keep_alive_seconds: float = HTTP_KEEP_ALIVE_SECONDS,
    ) -> None:
        self.app = app
        self.host = host
        self.port = port
        config = uvicorn.Config(
            app,
            log_config=None,
            access_log=False,
            lifespan="off",
            log_level="warning",
            # A second of the bound is left for what stops after the API (the worker, the servers).
            timeout_graceful_shutdown=max(1, math.floor(shutdown_seconds) - 1),
            # uvicorn's own 5 s closes a client's idle connection as the client reuses it (`http_keep_alive_seconds`).
            timeout_keep_alive=math.ceil(keep_alive_seconds),
        )
        self._server = _QuietSignalsServer(config, self._end_streams)
        self._socket: socket.socket | None = None
        self._task: asyncio.Task[None] | None = None

    def _end_streams(self) -> None:
        hub = getattr(getattr(self.app, "state", None), "stream_hub", None)
        if hub is not None:
            hub.shutdown()

    @property
    def url(self) -> str:
        return api_url(self.host, self.port)

    async def start(self) -> str:
        try:
            self._socket = listening_socket(self.host, self.port)
        except OSError as err:
            raise OSError(err.errno, f"the HTTP API cannot listen on {self.host}:{self.port}: {err.strerror}") from err
        self.port = self._socket.getsockname()[1]
        self._task = asyncio.create_task(self._server.serve(sockets=[self._socket]), name="http-api")
        while not self._server.started:
            if self._task.done():
                self._task.result()
                raise RuntimeError("the HTTP API stopped while starting")
            await asyncio.sleep(0.01)
        return self.url

    def connections(self) -> list[socket.socket]:
        """The sockets of the connections open now (for checks of their options)."""
        found = []
        for protocol in self._server.server_state.connections:
            transport = getattr(protocol, "transport", None)
            sock = transport.get_extra_info("socket") if transport is not None else None
            if sock is not None:
                found.append(sock)
        return found

    async def wait(self) -> None:
        """Until the server stops: a part of its own, so a crash of the API stops the process."""
        if self._task is not None:
            await asyncio.shield(self._task)

    async def stop(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            self._server.should_exit = True
            try:
                # `wait`, not `await task`: the server's own end (an error, a cancel) is not this stop's.
                await asyncio.wait([task])
            except asyncio.CancelledError:
                task.cancel()
                raise
            if not task.cancelled() and task.exception() is not None:
                log.error("the HTTP API failed while stopping", exc_info=task.exception())
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        hub = getattr(getattr(self.app, "state", None), "stream_hub", None)
        if hub is not None:
            await hub.close()
        deadlines = getattr(getattr(self.app, "state", None), "deadlines", None)
        if deadlines is not None:
            await deadlines.close()


def listening_socket(host: str, port: int) -> socket.socket:
    """A TCP socket listening on `host:port` whose accepted connections send small replies at once.

    asyncio turns Nagle's algorithm off (TCP_NODELAY) only on sockets whose protocol is IPPROTO_TCP, and a
    socket made with protocol 0 (as `socket.create_server` makes it) passes that on to every accepted one:
    a keep-alive client then waits for the delayed ACK, about 40 ms, on every request.
    """
    family, kind, proto, _, address = socket.getaddrinfo(
        host or None, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP, flags=socket.AI_PASSIVE
    )[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind(address)
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock


@contextlib.asynccontextmanager
async def serve_api(
    app: ASGIApp,
    host: str,
    port: int,
    shutdown_seconds: float = 10.0,
    keep_alive_seconds: float = HTTP_KEEP_ALIVE_SECONDS,
) -> AsyncIterator[str]:
    """Serve `app` until the block exits; yields the base URL (port 0 picks a free port)."""
    server = ApiServer(app, host, port, shutdown_seconds, keep_alive_seconds)
    url = await server.start()
    try:
        yield url
    finally:
        await server.stop()


# Signals


@contextlib.contextmanager
def _stop_on_signals(stop: asyncio.Event) -> Iterator[None]:
    """SIGINT and SIGTERM set `stop`; a second one cancels the main task, for when a clean stop hangs."""
    loop = asyncio.get_running_loop()
    main = asyncio.current_task()

    def on_signal() -> None:
        if stop.is_set() and main is not None:
            main.cancel()
        stop.set()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):
            loop.add_signal_handler(sig, on_signal)
            installed.append(sig)
    try:
        yield
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


# The shared steps


def _load_app(spec: str | None, announce: Announce) -> tuple[UserApp | None, set[str]]:
    """The app (None when no --app is given and the example is not here), and the modules it imported."""
    if spec is not None:
        return import_app(spec)
    try:
        return import_app(DEFAULT_APP)
    except Exception as err:
        cause = err.__cause__
        if isinstance(cause, ModuleNotFoundError) and cause.name is not None and DEFAULT_APP.startswith(cause.name):
            announce(f"app          none ({DEFAULT_APP} is not here; pass --app MODULE)")
            return None, set()
        raise


async def apply_app(platform: Platform, app: UserApp, announce: Announce) -> datetime | None:
    """Apply the app's declarations as a plan (`app_plan`); answers when its listeners take effect. An app whose
    declarations are refused stops the start, naming each field, and nothing of it is applied."""
    try:
        return (await app_plan.apply(platform, app, announce)).effective
    except app_plan.InvalidApp as err:
        raise ConfigurationError(str(err)) from None


async def migrate_and_apply(platform: Platform, app: UserApp, announce: Announce) -> datetime | None:
    """The app's `migrate` (its own tables), then its declarations applied as a plan; answers when its listeners
    take effect. A `migrate` that fails stops the start naming it, before anything of the app is applied."""
    try:
        await app_migrate.run_migrate(platform, app, announce)
    except app_migrate.MigrateFailed as err:
        raise ConfigurationError(str(err)) from err
    return await apply_app(platform, app, announce)


@dataclass(frozen=True)
class ShownPlan:
    """What `orchestrator plan` prints: a line per change, and notes on what it could not look at."""

    changes: list[str]
    notes: list[str]


def _counted(n: int, noun: str) -> str:
    """`1 workflow`, `2 workflows`, `0 activities`."""
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n} {noun if n == 1 else plural}"


def local_database_url(settings: Settings, who: str) -> str:
    """The database a command line reads in-process (`plan`, `--local`): ORCHESTRATOR_DATABASE_URL, else the
    embedded PostgreSQL of the `orchestrator dev` that runs on the data folder (`.orchestrator` unless set), as
    `status` finds its API."""
    if settings.database_url:
        return settings.database_url
    found = running_postgres_url(settings.data_dir.resolve())
    if found is None:
        raise ConfigurationError(
            f"{who} needs the platform's database: set ORCHESTRATOR_DATABASE_URL, or start `orchestrator dev`"
            f" (no embedded PostgreSQL runs in {settings.data_dir / 'postgres'})"
        )
    return found


async def plan_app(settings: Settings, spec: str) -> ShownPlan:
    """`orchestrator plan`: what applying the app's declarations would change. It changes nothing, so it does not
    run the app's `migrate`: a table that `migrate` is to make is planned as captured, and a note says so."""
    database_url = local_database_url(settings, "plan")
    app = load_app(spec)
    platform = await Platform.connect(settings, database_url, door=False)
    tables_to_come: list[str] | None = [] if app.migrate is not None else None
    try:
        steps = await app_plan.plan_of(platform, app, tables_to_come=tables_to_come)
        warnings = await app_plan.plan_warnings(platform, app, steps)
    except app_plan.InvalidApp as err:
        raise ConfigurationError(str(err)) from None
    finally:
        await platform.close()
    notes = [
        f"note    no table {table} yet: the app's migrate makes it when `dev` or a worker starts"
        " (plan does not run migrate)"
        for table in tables_to_come or []
    ]
    notes += warnings
    return ShownPlan([step.line() for step in changes(steps)], notes)


async def announce_ready(announce: Announce, effective: datetime | None) -> None:
    """`Ready.` once the app's listeners are in effect: a write made before then is not theirs (the
    activation delay), so the line waits for it, saying when it will be."""
    if effective is not None:
        wait = (effective - datetime.now(UTC)).total_seconds() + CLOCK_MARGIN_SECONDS
        if wait > CLOCK_MARGIN_SECONDS:
            local = effective.astimezone().strftime("%H:%M:%S")
            announce(
                f"listeners    in effect at {local}, in {wait:.0f} s"
                " (the activation delay, ORCHESTRATOR_LIMITS__ACTIVATION_DELAY_SECONDS)"
            )
        if wait > 0:
            await asyncio.sleep(wait)
    announce("Ready. Press Ctrl-C to stop.")


async def _run_parts(
    stop: asyncio.Event,
    parts: dict[str, Callable[[], Awaitable[Any]]],
    graceful: list[Callable[[], Awaitable[None]]],
    shutdown_seconds: float,
) -> None:
    """Run `parts` until `stop` is set or one of them ends, then stop them all.

    `graceful` stops go first (the API drains, the worker finishes its in-flight tasks), all of them within
    `shutdown_seconds`; whatever still runs then is cancelled. A part that failed re-raises its error once
    everything is down.
    """
    tasks = {asyncio.ensure_future(part()): name for name, part in parts.items()}
    stopper = asyncio.ensure_future(stop.wait())
    try:
        done, _ = await asyncio.wait([*tasks, stopper], return_when=asyncio.FIRST_COMPLETED)
    finally:
        stopper.cancel()
    for task in done:
        if task in tasks and not task.cancelled() and task.exception() is not None:
            log.error("%s failed; stopping the rest", tasks[task], exc_info=task.exception())
    try:
        async with asyncio.timeout(shutdown_seconds):
            for shutdown in graceful:
                try:
                    await shutdown()
                except Exception:
                    log.exception("a graceful stop failed")
    except TimeoutError:
        log.warning("the graceful stop took more than %g s; cancelling what still runs", shutdown_seconds)
    for task in tasks:
        task.cancel()
    results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, Exception):
            raise result


async def _run_worker_and_api(
    stop: asyncio.Event,
    platform: Platform,
    temporal: TemporalClient,
    settings: Settings,
    app: UserApp | None,
    *,
    serve_http: bool,
    announce: Announce,
    on_ready: Callable[[str | None], None],
    engine: ReloadingEngine | None = None,
) -> None:
    user_app = app if app is not None else UserApp(name="(none)")
    # A fault a crash test asks for (ORCHESTRATOR_FAULTS): this process dies at that crossing.
    install_from_environment()
    async with contextlib.AsyncExitStack() as stack:
        parts: dict[str, Callable[[], Awaitable[Any]]] = {}
        graceful: list[Callable[[], Awaitable[None]]] = []
        # Said before Ready (and again every minute by the worker's registry): a start right after finds them.
        await WorkflowRegistry(platform.store, workflow_names(user_app.workflows)).say()
        if engine is not None:
            # The worker and the router, started again on the app's new code when its files change.
            parts["engine"] = engine.run
            graceful.append(engine.shutdown)
        else:
            components = platform_components(platform, temporal, user_app)
            try:
                worker = build_worker(temporal, settings, user_app, components.workflows, components.activities)
            except ValueError:
                announce("worker       nothing to run (no app workflows and no platform workflows)")
            else:
                parts["worker"] = worker.run
                graceful.append(worker.shutdown)
            for index, background in enumerate(components.background_tasks):
                parts[f"background-{index}"] = background
        url = None
        if serve_http:
            api = ApiServer(
                create_app(platform, settings),
                settings.http_host,
                settings.http_port,
                settings.shutdown_seconds,
                settings.http_keep_alive_seconds,
            )
            url = await api.start()
            stack.push_async_callback(api.stop)
            parts["api"] = api.wait
            # The API stops first, so no command arrives while the worker drains.
            graceful.insert(0, api.stop)
        settle_heap()
        on_ready(url)
        await _run_parts(stop, parts, graceful, settings.shutdown_seconds)


# The three processes


async def run_dev(
    settings: Settings,
    app_spec: str | None = None,
    *,
    announce: Announce = _log_announce,
    quiet: bool = False,
    reload: bool = False,
) -> None:
    """The whole platform in one process tree: embedded servers where the settings name none.

    Its ports are settled first (`dev/ports.py`): one that is taken stops it before anything starts. Servers:
    PostgreSQL under `settings.data_dir / "postgres"` unless `database_url` is set, and the Temporal dev
    server (with its UI) on `settings.data_dir / "temporal.sqlite"` unless `temporal_address` is set. Then
    the platform, the app's `migrate` and its declarations applied, the worker and the HTTP API, until Ctrl-C;
    `Ready.` once the listeners are in effect. Unless `quiet`, each batch and each run's end is announced as it
    happens. With `reload`, the worker starts again on the app's new code when its files change (`dev/reload.py`).
    """
    install_telemetry()
    stop = asyncio.Event()
    app, app_modules = _load_app(app_spec, announce)
    data_dir = settings.data_dir.resolve()
    if not settings.temporal_address:
        # A dev server a crashed platform left on this folder holds the ports it remembered: gone first.
        await asyncio.to_thread(stop_abandoned_dev_servers, data_dir / "temporal.sqlite")
    try:
        ports = plan_ports(settings, data_dir)
    except PortTaken as err:
        raise ConfigurationError(str(err)) from None
    except OSError as err:  # the ports are free: the data folder is the first thing written
        raise ConfigurationError(
            f"--data-dir (ORCHESTRATOR_DATA_DIR): cannot write the data folder {data_dir}: {err.strerror or err}"
        ) from None
    lines = contextlib.nullcontext() if quiet else activity_lines(announce)
    with _stop_on_signals(stop), lines:
        async with contextlib.AsyncExitStack() as stack:
            kept: list[tuple[str, Kept]] = []
            if settings.database_url:
                database_url = settings.database_url
            else:
                postgres = await start_postgres(data_dir)
                stack.push_async_callback(postgres.stop)
                database_url = postgres.url
                kept.append(("postgres", postgres))
            if stop.is_set():
                return
            ui_url = None
            if settings.temporal_address:
                temporal_address = settings.temporal_address
            else:
                server = await TemporalDevServer(
                    data_dir,
                    port=ports.temporal,
                    ui_port=ports.temporal_ui,
                    namespace=settings.temporal_namespace,
                    wished=(True, not ports.ui_demanded),
                ).start()
                if (server.port, server.ui_port) != (ports.temporal, ports.temporal_ui):
                    # Another start took a port between the plan and the bind: the ones it moved to, remembered.
                    assert server.port is not None and server.ui_port is not None
                    remember(data_dir, temporal=server.port, temporal_ui=server.ui_port)
                stack.push_async_callback(server.stop)
                temporal_address, ui_url = server.address, server.ui_url
                kept.append(("temporal", server))
            if stop.is_set():
                return
            if kept:
                # Stopped before the servers are: a server stopping is not one to start again.
                keeper = asyncio.create_task(keep(kept, announce))
                stack.push_async_callback(_cancelled, keeper)
            temporal = await _temporal(temporal_address, settings)
            if ui_url is not None and settings.temporal_ui_url is None:
                settings = settings.model_copy(update={"temporal_ui_url": ui_url})
            platform = await Platform.connect(settings, database_url, temporal=temporal)
            stack.push_async_callback(platform.close)
            effective = None
            if app is not None:
                counts = ", ".join(
                    _counted(len(found), noun)
                    for found, noun in (
                        (app.workflows, "workflow"),
                        (app.activities, "activity"),
                        (app.listeners, "listener"),
                    )
                )
                announce(f"app          {app.title}: {counts}")
                effective = await migrate_and_apply(platform, app, announce)
            readiness: list[asyncio.Task[None]] = []

            def ready(url: str | None) -> None:
                if url is not None:
                    # Where `orchestrator call`, `status` and `events` find this API, whatever port it took.
                    remember(data_dir, api=url)
                    stack.callback(remember, data_dir, api=None)
                endpoints = Endpoints(database_url, temporal_address, settings.temporal_namespace, ui_url, url)
                for line in describe(endpoints, settings):
                    announce(line)
                readiness.append(asyncio.create_task(announce_ready(announce, effective)))

            async def restarted(new_app: UserApp) -> None:
                try:
                    saved = await migrate_and_apply(platform, new_app, announce)
                except ConfigurationError as err:
                    # The reloaded code runs; its declarations wait for a fix (the platform keeps the last ones).
                    announce(f"not applied  {err}")
                    return
                readiness.append(asyncio.create_task(announce_ready(announce, saved)))

            engine = None
            if reload and app is not None:
                spec = app_spec or DEFAULT_APP
                engine = ReloadingEngine(
                    platform, temporal, settings, spec, app, app_modules, announce=announce, restarted=restarted
                )
                announce(f"reload       on: watching {engine.folder} for changes")
            try:
                await _run_worker_and_api(
                    stop,
                    platform,
                    temporal,
                    settings,
                    app,
                    serve_http=True,
                    announce=announce,
                    on_ready=ready,
                    engine=engine,
                )
            finally:
                for task in readiness:
                    task.cancel()
            announce("Stopping...")
    announce("Stopped.")


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def redact_url(url: str) -> str:
    """`url` with its password replaced by `***`: announcements and logs never carry a secret."""
    parts = urlsplit(url)
    if not parts.password:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username or ''}:***@{host}"))


def describe(endpoints: Endpoints, settings: Settings) -> list[str]:
    lines = [
        f"database     {redact_url(endpoints.database_url)}",
        f"temporal     {endpoints.temporal_address} (namespace {endpoints.temporal_namespace}, "
        f"task queue {settings.task_queue})",
    ]
    if endpoints.temporal_ui_url is not None:
        lines.append(f"temporal ui  {endpoints.temporal_ui_url}")
    if endpoints.api_url is not None:
        lines.append(f"api          {endpoints.api_url}/v1/commands")
        lines.append(f"dashboard    {endpoints.api_url}/")
    return lines


def _require_external(settings: Settings, part: str) -> tuple[str, str]:
    missing = [
        f"ORCHESTRATOR_{name.upper()}" for name in ("database_url", "temporal_address") if not getattr(settings, name)
    ]
    if missing:
        raise ConfigurationError(
            f"`orchestrator {part}` runs against external servers: set {' and '.join(missing)} "
            "(or use `orchestrator dev` for embedded ones)"
        )
    assert settings.database_url is not None and settings.temporal_address is not None
    return settings.database_url, settings.temporal_address


def health_app() -> Starlette:
    """`GET /healthz` for a process with no API: it answers while the event loop runs."""

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/healthz", healthz, methods=["GET"])])


async def run_worker(
    settings: Settings,
    app_spec: str,
    *,
    announce: Announce = _log_announce,
    health_port: int | None = None,
) -> None:
    """The worker alone: the app's and the platform's workflows and activities, against external servers.

    With `health_port`, `GET /healthz` is served on `settings.http_host` once the worker's servers answer,
    for a liveness probe: a part that fails stops the process, so an answer means a live event loop.
    """
    install_telemetry()
    database_url, temporal_address = _require_external(settings, "worker")
    app = load_app(app_spec)
    stop = asyncio.Event()
    with _stop_on_signals(stop):
        temporal = await _temporal(temporal_address, settings)
        # The worker's pool: the engine's alone (a health probe reads nothing), so its acquires take no hook.
        platform = await Platform.connect(settings, database_url, temporal=temporal, door=False)
        try:
            await migrate_and_apply(platform, app, announce)
            async with contextlib.AsyncExitStack() as stack:
                if health_port is not None:
                    url = await stack.enter_async_context(serve_api(health_app(), settings.http_host, health_port))
                    announce(f"health       {url}/healthz")

                def ready(url: str | None) -> None:
                    announce(f"worker       {temporal_address} task queue {settings.task_queue}, app {app.title}")
                    announce("Ready. Press Ctrl-C to stop.")

                await _run_worker_and_api(
                    stop, platform, temporal, settings, app, serve_http=False, announce=announce, on_ready=ready
                )
        finally:
            await platform.close()


async def run_api(settings: Settings, *, announce: Announce = _log_announce) -> None:
    """The HTTP API alone, against external servers."""
    install_telemetry()
    database_url, temporal_address = _require_external(settings, "api")
    stop = asyncio.Event()
    with _stop_on_signals(stop):
        temporal = await _temporal(temporal_address, settings)
        platform = await Platform.connect(settings, database_url, temporal=temporal)
        try:
            app = create_app(platform, settings)
            async with serve_api(
                app, settings.http_host, settings.http_port, settings.shutdown_seconds, settings.http_keep_alive_seconds
            ) as url:
                announce(f"api          {url}/v1/commands")
                settle_heap()
                announce("Ready. Press Ctrl-C to stop.")
                await stop.wait()
        finally:
            await platform.close()


@contextlib.asynccontextmanager
async def local_platform(settings: Settings) -> AsyncIterator[Platform]:
    """The platform in this process against `settings.database_url`, else the running `orchestrator dev`'s
    (`--local`: no API in between), with Temporal when `settings.temporal_address` is set, else with the running
    dev's when its database is the one used (so `start_execution`, `stop_execution` and schedules work)."""
    global temporal_connect_failed
    database_url = local_database_url(settings, "--local")
    temporal = None
    if settings.temporal_address:
        temporal = await _temporal(settings.temporal_address, settings)
    elif not settings.database_url and (found := running_temporal_address(settings.data_dir.resolve())):
        # Only a guess from the port the data folder remembers: what answers there may be no Temporal, and then
        # the commands that need one say so (`unavailable`) while the others run.
        try:
            async with asyncio.timeout(5):
                temporal = await connect_temporal(found, settings.temporal_namespace, settings)
        except Exception:
            temporal_connect_failed = True
    platform = await Platform.connect(settings, database_url, temporal=temporal, door=False)
    try:
        yield platform
    finally:
        await platform.close()


async def run_local_command(settings: Settings, body: Any) -> dict[str, Any]:
    """One command in this process against `settings.database_url`, with no API in between."""
    async with local_platform(settings) as platform:
        return await platform.command(body)
