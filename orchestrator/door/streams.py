"""Connection listeners over Server-Sent Events: `GET /v1/sessions/{id}/stream` (SPEC section 7).

Owns the stream's I/O: waking on the same PostgreSQL notifications as the router (one LISTEN connection per
API process, `StreamHub`, on the wake-up shards of the sessions it streams), reading the session's stream by id
after the client's position, and sending each
batch (`orchestrator.core.connection_listener` decides what and when) as one SSE message, with a comment
every 15 s while nothing is due. It starts no run and no lane workflow, and holds nothing but the client's
waiting events: a reader too slow to take a message within `SLOW_READER_SECONDS` is disconnected rather than
buffered for, after a last message (`event: closed`) that reaches it only if its connection has room left (one
that stopped reading has none, and sees its connection end, perhaps partway through a message, which is a
dropped connection: it reconnects from its last whole message and loses nothing); a stream whose session is
deleted (each read of the stream says so) ends with `event: closed` too. When the process stops
(`StreamHub.shutdown`) every stream is sent `event: shutdown` and ended, so a stream never holds a stopping
server up and an `EventSource` reconnects (to another replica, or to this one once it is back) after
`RECONNECT_MS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable

import asyncpg
from starlette.types import Receive, Scope, Send

from orchestrator.commands.fields import MAX_BIGINT
from orchestrator.core.connection_listener import StreamBatches, StreamSpec, sse_message
from orchestrator.core.wake_shards import channel, shard_of
from orchestrator.store.connection import LISTENING_STATEMENT_SECONDS as STATEMENT_SECONDS
from orchestrator.store.connection import listening_connection
from orchestrator.store.engine_records import EngineRecords

log = logging.getLogger(__name__)

HEARTBEAT_SECONDS = 15.0
SLOW_READER_SECONDS = 30.0
# Events read per query; a stream behind by more reads again at once.
PAGE = 1000
# How long a stream waits for a notification before it reads anyway (a lost NOTIFY, a restarted database).
POLL_SECONDS = 5.0
# How soon a stream that just read events reads again unasked: a session's writers notify once until its router
# catches up (0029_wakeups_coalesced.sql), so under steady writes most commits notify nobody.
HOT_SECONDS = 0.1
# What a stream outlives in its hub's listening: it reads on its own poll until the next subscriber connects again.
LISTEN_TROUBLE = (OSError, TimeoutError, asyncpg.PostgresError, asyncpg.InterfaceError)
# The reconnection delay a stopping server asks of an `EventSource` (the SSE `retry:` field).
RECONNECT_MS = 1000
# How often a stream asks whether its key still works (the gate caches the answer as long).
KEY_CHECK_SECONDS = 0.5
# How long a stopping server waits for a reader to take the last message.
LAST_MESSAGE_SECONDS = 1.0
# What a stream's response starts with (and a HEAD of it answers).
STREAM_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),
]


class StreamHub:
    """One LISTEN connection for an API process; wakes the streams of each session whose events commit. It listens
    on the channels of its streams' shards only (`core/wake_shards.py`), so writes to sessions nobody streams here
    do not wake it."""

    def __init__(self, database_url: Callable[[], str]) -> None:
        # Asked for when the first stream subscribes: building the app needs no database.
        self.database_url = database_url
        self._waiters: dict[str, set[asyncio.Event]] = {}
        # The sessions streamed here, by shard.
        self._shards: dict[int, set[str]] = {}
        # The shards the connection listens on.
        self._listened: set[int] = set()
        self._conn: asyncpg.Connection | None = None
        self._lock = asyncio.Lock()
        # Set once the process stops: every stream sends its last message and ends.
        self.stopping = asyncio.Event()

    async def _listening(self) -> None:
        """Connected, and listening on the shard of every session streamed here (and on the releases' before,
        `LEGACY_CHANNEL`). A statement that does not answer within `STATEMENT_SECONDS` (a connection the
        network left half open) drops the connection, for the next subscriber to make again."""
        async with self._lock:
            try:
                if self._conn is None or self._conn.is_closed():
                    self._conn = await listening_connection(self.database_url(), self._on_notify)
                    self._listened = set()
                    # While no connection listened, notifications were lost: every stream looks again.
                    for waiters in self._waiters.values():
                        for waiter in waiters:
                            waiter.set()
                for shard in [s for s in self._shards if s not in self._listened]:
                    async with asyncio.timeout(STATEMENT_SECONDS):
                        await self._conn.add_listener(channel(shard), self._on_notify)
                    self._listened.add(shard)
            except (TimeoutError, asyncpg.InterfaceError):
                self._drop()
                raise

    async def _unlisten(self, shard: int) -> None:
        async with self._lock:
            if shard in self._shards or shard not in self._listened:
                return
            self._listened.discard(shard)
            if self._conn is not None and not self._conn.is_closed():
                try:
                    async with asyncio.timeout(STATEMENT_SECONDS):
                        await self._conn.remove_listener(channel(shard), self._on_notify)
                except (TimeoutError, asyncpg.InterfaceError):
                    self._drop()
                    raise

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.terminate()
        self._conn = None
        self._listened = set()

    def _on_notify(self, _conn: object, _pid: int, _channel: str, payload: object) -> None:
        for waiter in self._waiters.get(str(payload), ()):
            waiter.set()

    @contextlib.asynccontextmanager
    async def subscribed(self, session_id: str) -> AsyncIterator[asyncio.Event]:
        waiter = asyncio.Event()
        shard = shard_of(session_id)
        self._waiters.setdefault(session_id, set()).add(waiter)
        self._shards.setdefault(shard, set()).add(session_id)
        try:
            with contextlib.suppress(*LISTEN_TROUBLE):
                await self._listening()
            yield waiter
        finally:
            waiters = self._waiters.get(session_id, set())
            waiters.discard(waiter)
            if not waiters:
                self._waiters.pop(session_id, None)
                sessions = self._shards.get(shard, set())
                sessions.discard(session_id)
                if not sessions:
                    self._shards.pop(shard, None)
                    with contextlib.suppress(*LISTEN_TROUBLE):
                        await self._unlisten(shard)

    def shutdown(self) -> None:
        """End every open stream (and any opened from now on) with `event: shutdown`."""
        self.stopping.set()
        for waiters in self._waiters.values():
            for waiter in waiters:
                waiter.set()

    async def close(self) -> None:
        self.shutdown()
        if self._conn is not None:
            with contextlib.suppress(Exception):
                await self._conn.close()
            self._conn = None


class EventStream:
    """The ASGI response of one connection listener, from `position` on."""

    def __init__(
        self,
        store: EngineRecords,
        hub: StreamHub,
        session_id: str,
        spec: StreamSpec,
        position: int,
        holds: Callable[[], Awaitable[bool]] | None = None,
    ):
        self.store, self.hub, self.session_id, self.spec = store, hub, session_id, spec
        self.position = position
        self.batches = StreamBatches(spec)
        # Whether the key that opened it still works (None: nothing can take it away), asked every
        # KEY_CHECK_SECONDS: a revoked or expired key's stream ends within a second, as its requests do.
        self.holds = holds

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS})
        disconnected = asyncio.ensure_future(self._disconnect(receive))
        streaming = asyncio.ensure_future(self._stream(send))
        try:
            await asyncio.wait([disconnected, streaming], return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in (disconnected, streaming):
                task.cancel()
            await asyncio.gather(disconnected, streaming, return_exceptions=True)
        if streaming.done() and not streaming.cancelled() and streaming.exception() is None and streaming.result():
            # Ended by the server's stop: the response is finished, so the reader sees a clean end.
            with contextlib.suppress(Exception):
                async with asyncio.timeout(LAST_MESSAGE_SECONDS):
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
        # Otherwise its reader went, or was let go for being too slow: the response is left unfinished, which
        # makes the server close the connection at once instead of draining it first.

    @staticmethod
    async def _disconnect(receive: Receive) -> None:
        while (await receive())["type"] != "http.disconnect":
            pass

    async def _send(self, send: Send, text: str) -> bool:
        """Send `text`; False when the reader did not take it in time (it is then told, and let go)."""
        try:
            async with asyncio.timeout(SLOW_READER_SECONDS):
                await send({"type": "http.response.body", "body": text.encode(), "more_body": True})
        except TimeoutError:
            log.info("a stream of session %s was too slow to read; closing it", self.session_id)
            reason = {"reason": f"the reader took more than {SLOW_READER_SECONDS:g} s to take a message"}
            with contextlib.suppress(Exception):
                closing = f"event: closed\ndata: {json.dumps(reason)}\n\n".encode()
                async with asyncio.timeout(1):
                    await send({"type": "http.response.body", "body": closing, "more_body": True})
            return False
        return True

    async def _stream(self, send: Send) -> bool:
        """Send batches until the reader goes (False), or the server stops, the key no longer holds or the session
        is deleted (True, after `event: shutdown` or `event: closed`)."""
        async with self.hub.subscribed(self.session_id) as woken:
            # The position it opens at, as an id without data (which sets `Last-Event-ID` and is no event): a
            # stream opened at the session's end and dropped before its first batch resumes from there, not from
            # a later end that would skip what was committed meanwhile.
            if not await self._send(send, f": stream open\nid: {self.position}\n\n"):
                return False
            trimmed, first = await self.store.stream_start(self.session_id)
            if self.position < trimmed:
                # A reconnect (or `after`) from before what retention kept: say where the stream starts now, as
                # `list_session_events` does, rather than go on from there as if nothing were missing.
                told = {"after": self.position, "first_id": first}
                if not await self._send(send, f"event: trimmed\ndata: {json.dumps(told)}\n\n"):
                    return False
            last_sent = time.monotonic()
            checked = last_sent
            while True:
                if self.holds is not None and time.monotonic() >= checked + KEY_CHECK_SECONDS:
                    checked = time.monotonic()
                    if not await self.holds():
                        reason = {"reason": "the key that opened the stream was revoked or has expired"}
                        # Finished cleanly: a reader that connects again is refused, as the key's requests are.
                        return await self._send(send, f"event: closed\ndata: {json.dumps(reason)}\n\n")
                if self.hub.stopping.is_set():
                    last = {"reason": "the server is stopping", "last_id": self.position}
                    text = f"event: shutdown\nretry: {RECONNECT_MS}\ndata: {json.dumps(last)}\n\n"
                    with contextlib.suppress(Exception):
                        async with asyncio.timeout(LAST_MESSAGE_SECONDS):
                            await send({"type": "http.response.body", "body": text.encode(), "more_body": True})
                    return True
                woken.clear()
                events = await self.store.stream_events(self.session_id, self.position, PAGE)
                if events is None:
                    # Finished cleanly, as for a revoked key: a reader that connects again is told `not_found`.
                    gone = {"reason": "the session was deleted"}
                    return await self._send(send, f"event: closed\ndata: {json.dumps(gone)}\n\n")
                if events:
                    self.position = events[-1]["id"]
                    self.batches.add(events, time.monotonic())
                while (batch := self.batches.take(time.monotonic())) is not None:
                    if not await self._send(send, sse_message(batch)):
                        return False
                    last_sent = time.monotonic()
                if len(events) == PAGE:
                    continue
                now = time.monotonic()
                if now - last_sent >= HEARTBEAT_SECONDS:
                    if not await self._send(send, ": heartbeat\n\n"):
                        return False
                    last_sent = now
                deadlines = [last_sent + HEARTBEAT_SECONDS, now + (HOT_SECONDS if events else POLL_SECONDS)]
                if self.holds is not None:
                    deadlines.append(checked + KEY_CHECK_SECONDS)
                due = self.batches.due_at()
                if due is not None:
                    deadlines.append(due)
                # `asyncio.timeout`, not `wait_for`: Python 3.11's `wait_for` loses a cancellation (the reader
                # gone) that lands as the stream is woken, and the stream would outlive its connection.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(max(min(deadlines) - now, 0.0)):
                        await woken.wait()


async def stream_head(scope: Scope, receive: Receive, send: Send) -> None:
    """A HEAD of a stream: the status and headers its GET answers, and no stream (one would never end, and would
    hold its connection from the next request)."""
    await send({"type": "http.response.start", "status": 200, "headers": STREAM_HEADERS})
    await send({"type": "http.response.body", "body": b"", "more_body": False})


def start_position(store_last: int, after: str | None, last_event_id: str | None) -> int | None:
    """Where a stream starts: after `Last-Event-ID` or `after` when given, else at the session's end.

    None when one is given but is not a non-negative integer an event id can be (ASCII digits, within a bigint).
    """
    given = last_event_id if last_event_id not in (None, "") else after
    if given is None:
        return store_last
    if not (given.isascii() and given.isdigit()) or int(given) > MAX_BIGINT:
        return None
    return int(given)
