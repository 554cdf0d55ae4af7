"""A revoked key is refused by every API replica within a second: here a second `orchestrator api` process, on
the same database, that was using the key a moment before it was revoked through the first."""

from __future__ import annotations

import asyncio
import signal
import sys
import time
from pathlib import Path

import httpx
import pytest
from pydantic import SecretStr
from temporalio.testing import WorkflowEnvironment

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.dev.embedded import free_port
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.ops.conftest import platform_env

pytestmark = pytest.mark.devserver

ORCHESTRATOR = str(Path(sys.executable).parent / "orchestrator")
START_SECONDS = 30
TOKEN = "bootstrap-of-two-replicas"
WITHIN_SECONDS = 1.0


async def test_a_revoked_key_is_refused_by_a_second_api_process_within_a_second(
    platform: Platform, settings: Settings, fresh_db: str, dev_env: WorkflowEnvironment
) -> None:
    port = free_port()
    env = platform_env(fresh_db, dev_env, ORCHESTRATOR_API_TOKEN=TOKEN)
    process = await asyncio.create_subprocess_exec(
        ORCHESTRATOR, "api", "--http-port", str(port), env=env,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT,
    )  # fmt: skip
    assert process.stdout is not None
    guarded = settings.model_copy(update={"api_token": SecretStr(TOKEN)})
    try:
        async with asyncio.timeout(START_SECONDS):
            while b"Ready." not in (line := await process.stdout.readline()):
                assert line, "the second API stopped while starting"
        async with (
            serve_api(create_app(platform, guarded), "127.0.0.1", 0) as first,
            Client.http(first, token=TOKEN) as admin,
            httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as second,
        ):
            secret = (await admin.create_api_key("replicated", ["read:**"]))["key"]["secret"]
            headers = {"Authorization": f"Bearer {secret}"}

            async def through_second() -> int:
                reply = await second.post("/v1/commands", json={"command": "list_listeners"}, headers=headers)
                return reply.status_code

            # The second replica knows the key (and holds it in its cache) up to the moment it is revoked.
            assert await through_second() == 200
            await admin.revoke_api_key("replicated")
            revoked = time.monotonic()
            refused_after = None
            while time.monotonic() - revoked < 5:
                sent = time.monotonic() - revoked
                if await through_second() == 401:
                    refused_after = sent
                    break
                await asyncio.sleep(0.05)
    finally:
        process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(process.communicate(), START_SECONDS)

    assert refused_after is not None, "the second replica never refused the revoked key"
    assert refused_after <= WITHIN_SECONDS, f"refused {refused_after:.2f} s after the revocation"
