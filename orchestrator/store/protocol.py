"""The store seam: what commands and activities may ask of the database.

`PostgresStore` is the one implementation; tests of pure code need none, and everything else runs on a
real PostgreSQL. Keeping the seam narrow is what lets a reader see every query the platform makes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from orchestrator.core.events import Event


class Store(Protocol):
    async def close(self) -> None: ...

    async def open_session(self, alias: str | None) -> dict[str, Any]: ...
    async def get_session(self, session_id: str) -> dict[str, Any]: ...
    async def set_session_status(self, session_id: str, status: str) -> dict[str, Any]: ...

    async def append_event(
        self,
        session_id: str,
        type_: str,
        *,
        require_open: bool = False,
        idempotency_key: str | None = None,
        **fields: Any,
    ) -> Event: ...
    async def list_events(
        self,
        session_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int = 100,
        types: Sequence[str] | None = None,
    ) -> list[Event]: ...

    async def write_object(
        self,
        session_id: str,
        alias: str,
        value: dict[str, Any],
        *,
        if_rev: int | None = None,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        idempotency_key: str | None = None,
    ) -> tuple[dict[str, Any], int]: ...
    async def read_object(self, session_id: str, alias: str) -> dict[str, Any]: ...
    async def delete_object(
        self,
        session_id: str,
        alias: str,
        *,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        idempotency_key: str | None = None,
    ) -> tuple[dict[str, Any], int]: ...
    async def list_objects(self, session_id: str, prefix: str | None) -> list[dict[str, Any]]: ...

    async def post_thread_item(
        self,
        session_id: str,
        alias: str,
        item: dict[str, Any],
        *,
        source: dict[str, Any] | None = None,
        depth: int = 0,
        idempotency_key: str | None = None,
    ) -> tuple[dict[str, Any], int]: ...
    async def list_thread_items(
        self, session_id: str, alias: str, *, after: str | None = None, limit: int = 100
    ) -> list[dict[str, Any]]: ...

    async def save_listener(self, name: str, body: dict[str, Any], delay_seconds: float) -> dict[str, Any]: ...
    async def get_listener(self, name: str) -> dict[str, Any]: ...
    async def list_listeners(self) -> list[dict[str, Any]]: ...
    async def listener_versions(self) -> list[dict[str, Any]]: ...
    async def delete_listener(self, name: str) -> dict[str, Any]: ...
    async def switch_listener(self, session_id: str, name: str, enabled: bool) -> bool: ...
    async def disabled_listeners(self, session_id: str) -> set[str]: ...
