"""Clients that hold a session's stream open, as dashboards do, for the tests of a stopping server."""

from __future__ import annotations

import asyncio

import httpx


class StreamClients:
    """`count` connection listeners on one session, each read to its end."""

    def __init__(self, url: str, session_id: str, count: int) -> None:
        self.url, self.session_id, self.count = url, session_id, count
        self._opened = 0
        self._all_open = asyncio.Event()
        self._tasks: list[asyncio.Task[str]] = []

    async def open(self) -> None:
        """Open them all, and return once the server has answered each one (within 30 s)."""
        self._tasks = [asyncio.create_task(self._hold()) for _ in range(self.count)]
        await asyncio.wait_for(self._all_open.wait(), 30)

    async def received(self) -> list[str]:
        """What each stream was sent, once all have ended (within 5 s)."""
        return list(await asyncio.wait_for(asyncio.gather(*self._tasks), 5))

    async def _hold(self) -> str:
        lines = []
        async with (
            httpx.AsyncClient(base_url=self.url, timeout=httpx.Timeout(10, read=None)) as http,
            http.stream("GET", f"/v1/sessions/{self.session_id}/stream") as response,
        ):
            assert response.status_code == 200
            async for line in response.aiter_lines():
                lines.append(line)
                if line == ": stream open":
                    self._opened += 1
                    if self._opened == self.count:
                        self._all_open.set()
        return "\n".join(lines)
