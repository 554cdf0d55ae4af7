"""What the docs' examples run against: the HTTP door of a platform on a fresh database, a session opened
through it, and the application's own connection to the same database."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform


@pytest.fixture
async def door(platform: Platform, settings: Settings) -> AsyncIterator[Client]:
    """A client of `POST /v1/commands`, served for `platform` on a free port."""
    async with serve_api(create_app(platform, settings), "127.0.0.1", 0) as url:
        client = Client.http(url)
        yield client
        await client.aclose()


@pytest.fixture
async def session_id(door: Client) -> str:
    """The session an example runs in (`ses_...` in the pages)."""
    return str((await door.open_session(alias="docs"))["session"]["id"])


@pytest.fixture
async def app_conn(fresh_db: str) -> AsyncIterator[asyncpg.Connection]:
    """The application's connection to the database it shares with the platform: its own tables in `public`."""
    conn = await asyncpg.connect(fresh_db)
    yield conn
    await conn.close()
