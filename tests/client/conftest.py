"""A running platform for the client's tests, and a client through each door that notes what a test called.

The platform runs on the dev server (schedules need its Temporal Schedules, which the time-skipping server has
not), with the engine's worker and router and the recorder workflow (`tests/engine/harness.py`), and serves its
HTTP API with a bootstrap token. Every test that takes `client` runs twice, through `Client.local` and through
`Client.http`. A test says which methods it covers (`@covers(...)`); the fixture fails it if it called one of them
through neither door, and `test_client_calls.py` checks that the tests together cover every public method.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import pytest
from pydantic import SecretStr
from temporalio.service import RPCError
from temporalio.testing import WorkflowEnvironment

from orchestrator.client import Client
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.engine.harness import Engine, running_engine

# The two doors, by the class methods that make each client.
DOORS = ("local", "http")
TOKEN = "client-t0ken-for-tests"

T = TypeVar("T", bound=Callable[..., Any])


def covers(*methods: str) -> Callable[[T], T]:
    """Say which of the client's methods a test calls, and asserts the effect of, through each door."""

    def mark(test: T) -> T:
        test.covers = frozenset(methods)  # type: ignore[attr-defined]
        return test

    return mark


class NotingClient(Client):
    """A `Client` that notes the name of each public method called on it (the door that made it included)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.called: set[str] = set()


def _noting(name: str, method: Any) -> Any:
    if inspect.isasyncgenfunction(method):

        @functools.wraps(method)
        async def stream(self: NotingClient, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
            self.called.add(name)
            async for item in method(self, *args, **kwargs):
                yield item

        return stream

    @functools.wraps(method)
    async def call(self: NotingClient, *args: Any, **kwargs: Any) -> Any:
        self.called.add(name)
        return await method(self, *args, **kwargs)

    return call


def _noting_door(name: str, make: Any) -> Any:
    @functools.wraps(make)
    def door(cls: type[NotingClient], *args: Any, **kwargs: Any) -> NotingClient:
        made: NotingClient = make(cls, *args, **kwargs)
        made.called.add(name)
        return made

    return classmethod(door)


for _name, _member in vars(Client).items():
    if _name.startswith("_"):
        continue
    if isinstance(_member, classmethod):
        setattr(NotingClient, _name, _noting_door(_name, _member.__func__))
    elif inspect.iscoroutinefunction(_member) or inspect.isasyncgenfunction(_member):
        setattr(NotingClient, _name, _noting(_name, _member))


@dataclass
class Running:
    engine: Engine
    url: str  # the HTTP API's root
    database_url: str  # the platform's database, where an application's own tables go too

    @property
    def platform(self) -> Platform:
        return self.engine.platform


@pytest.fixture
async def running(platform: Platform, dev_env: WorkflowEnvironment, fresh_db: str) -> AsyncIterator[Running]:
    platform.settings = platform.settings.model_copy(update={"search_attributes": True})
    async with running_engine(platform, dev_env.client) as engine:
        guarded = platform.settings.model_copy(update={"api_token": SecretStr(TOKEN)})
        try:
            async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url:
                yield Running(engine, url, fresh_db)
        finally:
            # The shared dev server would go on firing a schedule a test left into a task queue nobody polls.
            for row in await platform.store.pool.fetch("SELECT schedule_id FROM orchestrator.schedules"):
                with contextlib.suppress(RPCError):
                    await dev_env.client.get_schedule_handle(row["schedule_id"]).delete()


@pytest.fixture(params=DOORS)
async def client(request: pytest.FixtureRequest, running: Running) -> AsyncIterator[NotingClient]:
    door: str = request.param
    failed_before = request.session.testsfailed
    made = NotingClient.local(running.platform) if door == "local" else NotingClient.http(running.url, token=TOKEN)
    async with made:
        yield made
    if request.session.testsfailed > failed_before:
        return  # the test failed already: what it did not reach says nothing more
    missing = sorted(getattr(request.function, "covers", frozenset()) - made.called)
    assert not missing, f"{request.function.__name__} says it covers {missing}, and called none of them ({door})"
