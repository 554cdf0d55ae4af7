"""An API with the bootstrap token set, served on the test's platform, and keys made through the local door."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from orchestrator.client import Client
from orchestrator.config import Settings
from orchestrator.dev.runtime import serve_api
from orchestrator.door.api import create_app
from orchestrator.platform import Platform

TOKEN = "bootstrap-t0ken-for-tests"


@dataclass
class Api:
    url: str
    platform: Platform
    admin: Client

    async def key(self, name: str, scopes: list[str], **more: Any) -> str:
        """A new key's secret (made by the platform's own door, as an operator would with `--local`)."""
        reply = await self.platform.command({"command": "create_api_key", "name": name, "scopes": scopes, **more})
        assert reply["status"] == "success", reply
        return str(reply["key"]["secret"])

    def as_key(self, secret: str) -> Client:
        return Client.http(self.url, token=secret)

    async def post(self, body: dict[str, Any], secret: str | None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {secret}"} if secret is not None else {}
        async with httpx.AsyncClient(base_url=self.url) as http:
            return await http.post("/v1/commands", json=body, headers=headers)


@pytest.fixture
async def api(platform: Platform, settings: Settings) -> AsyncIterator[Api]:
    guarded = settings.model_copy(update={"api_token": SecretStr(TOKEN)})
    async with serve_api(create_app(platform, guarded), "127.0.0.1", 0) as url, Client.http(url, token=TOKEN) as admin:
        yield Api(url, platform, admin)
