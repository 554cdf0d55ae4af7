"""Limits per key and per session, shared through PostgreSQL: a burst over a key's request rate, or over a
session's write rate, is answered 429 `rate_limited` with `Retry-After`, and a refused request writes nothing."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.config import Settings
from orchestrator.core.limits import Limits
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform
from tests.access.conftest import TOKEN, Api

BURST = 20


async def burst(url: str, secret: str, session_id: str, count: int = BURST) -> list[httpx.Response]:
    headers = {"Authorization": f"Bearer {secret}"}
    async with httpx.AsyncClient(base_url=url, headers=headers) as http:
        return [
            await http.post(
                "/v1/commands",
                json={"command": "write_object", "session_id": session_id, "alias": f"b/{n}", "value": {"type": "t"}},
            )
            for n in range(count)
        ]


async def written(api_platform: Platform, session_id: str) -> list[int]:
    events = await api_platform.command({"command": "list_session_events", "session_id": session_id, "limit": 1000})
    return [e["id"] for e in events["events"]]


async def test_a_burst_over_a_keys_rate_is_answered_429_and_refused_requests_write_nothing(api: Api) -> None:
    slow = await api.key("slow", ["write:**", "read:**"], requests_per_second=2)
    sid = (await api.admin.open_session(alias="limited"))["session"]["id"]
    started = time.monotonic()
    replies = await burst(api.url, slow, sid)
    took = time.monotonic() - started

    accepted = [r for r in replies if r.status_code == 200]
    refused = [r for r in replies if r.status_code == 429]
    assert len(accepted) + len(refused) == BURST
    # A full bucket holds a second's worth (2), and it refills at 2 a second while the burst lasts.
    assert 2 <= len(accepted) <= 2 + 2 * took + 1, (len(accepted), took)
    assert refused, "a burst of twenty at two a second is refused in part"
    for reply in refused:
        assert reply.json()["error"] == "rate_limited" and reply.json()["status"] == "error"
        assert int(reply.headers["retry-after"]) >= 1
        assert reply.json()["retry_after"] == int(reply.headers["retry-after"])
    assert await written(api.platform, sid) == sorted(r.json()["event_id"] for r in accepted)

    # Waited out, the key is served again; the bootstrap token is never limited.
    await asyncio.sleep(int(refused[-1].headers["retry-after"]))
    assert (await burst(api.url, slow, sid, 1))[0].status_code == 200
    assert all(r.status_code == 200 for r in await burst(api.url, TOKEN, sid))


async def test_concurrent_requests_within_a_keys_rate_are_all_served(api: Api) -> None:
    """Requests that find the replica's lease empty at once share one take from the bucket instead of each
    taking a lease of their own (which would spend the bucket many times over)."""
    busy = await api.key("busy", ["read:**"], requests_per_second=100)
    async with httpx.AsyncClient(base_url=api.url, headers={"Authorization": f"Bearer {busy}"}) as http:
        replies = await asyncio.gather(
            *(http.post("/v1/commands", json={"command": "list_listeners"}) for _ in range(60))
        )
    assert [r.status_code for r in replies] == [200] * 60


@pytest.fixture
async def slow_sessions(platform: Platform, settings: Settings) -> AsyncIterator[Api]:
    from orchestrator.client import Client

    limited = settings.model_copy(
        update={
            "api_token": SecretStr(TOKEN),
            "limits": Limits(activation_delay_seconds=0, session_writes_per_second=3),
        }
    )
    async with serve_api(create_app(platform, limited), "127.0.0.1", 0) as url, Client.http(url, token=TOKEN) as admin:
        yield Api(url, platform, admin)


async def test_a_sessions_writes_are_limited_across_keys_and_a_bulk_write_counts_each_event(
    slow_sessions: Api,
) -> None:
    api = slow_sessions
    first, second = await api.key("one", ["write:**"]), await api.key("two", ["write:**"])
    sid = (await api.admin.open_session(alias="busy"))["session"]["id"]
    other = (await api.admin.open_session(alias="quiet"))["session"]["id"]
    replies = [*await burst(api.url, first, sid, 4), *await burst(api.url, second, sid, 4)]
    refused = [r for r in replies if r.status_code == 429]
    assert refused and all(r.json()["error"] == "rate_limited" and r.headers["retry-after"] for r in refused)
    assert "session_id" in refused[0].json()["message"]
    accepted = [r.json()["event_id"] for r in replies if r.status_code == 200]
    assert await written(api.platform, sid) == sorted(accepted)

    # Another session has a bucket of its own; a bulk write of three takes three.
    headers = {"Authorization": f"Bearer {first}"}
    objects = [{"alias": f"q/{n}", "value": {"type": "t"}} for n in range(3)]
    async with httpx.AsyncClient(base_url=api.url, headers=headers) as http:
        body = {"command": "write_objects", "session_id": other, "objects": objects}
        assert (await http.post("/v1/commands", json=body)).status_code == 200
        again = await http.post("/v1/commands", json={**body, "objects": objects[:1]})
    assert again.status_code == 429
    assert len(await written(api.platform, other)) == 3
