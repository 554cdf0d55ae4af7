"""A lean keep-alive HTTP/1.1 client for the benchmarks' writers: one asyncio stream per client.

A benchmark's writers are its load, not what it measures, so they should cost little: an httpx client spends
about 5 ms of CPU per request on this machine, which made the writers half the box's CPU in a burst. This
one writes a request's bytes and reads the answer's status line, headers and body (by Content-Length), on a
connection it keeps. It speaks only what `POST /v1/commands` answers.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from urllib.parse import urlsplit


class KeepAlive:
    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port or 80
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def post(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` as JSON and answer the JSON reply."""
        if self._writer is None:
            self._reader, self._writer = await asyncio.open_connection(self.host, self.port)
        assert self._reader is not None
        payload = json.dumps(body, separators=(",", ":")).encode()
        head = (
            f"POST {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(payload)}\r\n\r\n"
        ).encode()
        self._writer.write(head + payload)
        status = await self._reader.readline()
        if not status:
            raise ConnectionError("the server closed the connection")
        length = 0
        while (line := await self._reader.readline()) not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value.strip())
        reply: dict[str, Any] = json.loads(await self._reader.readexactly(length))
        return reply

    async def aclose(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None
