"""The Python door: `Client`, over HTTP or in-process, with one typed method per command (`docs/commands.md`).

Owns turning method calls into command dicts and replies into results; the commands' meaning is the
platform's. `command()` returns every reply as it is, errors included, like the other two doors. The
typed methods return the success reply and raise `CommandError` on an error reply, so a caller's code reads
straight through. A transport failure (the API cannot be reached) is not a reply and raises httpx's error.

Every method is called one way. `session_id` comes first when the command needs one; then, positionally, what
the command acts on (an alias, a name, a listener, an event) and the body it carries, if any (a value, an item,
a patch); everything else is keyword-only: every optional argument, a second name or number, a flag, and a
session a command may do without (`pause_listener(name, session_id=...)`). Each method takes its command's
arguments and no others. `tests/client/test_client_signatures.py` holds every method to this.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Mapping
from types import TracebackType
from typing import Any, Protocol, Self, TypeVar, cast

import httpx

from orchestrator.core.errors import CommandError
from orchestrator.plain_http import api_url, authorization, command_reply, encoded_body
from orchestrator.reply_types import (
    CaptureReply,
    CreateApiKeyReply,
    DeletedEventTypeReply,
    DeleteListenerReply,
    DeleteObjectReply,
    DeleteScheduleReply,
    DeleteSessionReply,
    EmitEventReply,
    EmitEventsReply,
    EventTypeReply,
    ExplainEventReply,
    GetListenerReply,
    GetScheduleReply,
    GetSessionReply,
    ListApiKeysReply,
    ListCapturesReply,
    ListEventTypesReply,
    ListExecutionsReply,
    ListListenersReply,
    ListObjectsReply,
    ListScheduleRunsReply,
    ListSchedulesReply,
    ListSessionEventsReply,
    ListSessionListenersReply,
    ListSessionsReply,
    ListThreadItemsReply,
    OpenSessionReply,
    PauseListenerReply,
    PostThreadItemReply,
    PostThreadItemsReply,
    ReadGraphReply,
    ReadObjectReply,
    RedeliverReply,
    ReplayBatchReply,
    ResumeListenerReply,
    RevokeApiKeyReply,
    SaveListenerReply,
    ScheduleReply,
    SessionReply,
    SimulateListenerReply,
    StartExecutionReply,
    StopExecutionReply,
    SwitchListenerReply,
    UncaptureTableReply,
    UpdateGraphReply,
    WhoamiReply,
    WriteObjectReply,
    WriteObjectsReply,
)

__all__ = ["Client", "Commands", "api_url"]

DEFAULT_TIMEOUT_SECONDS = 30.0
# How every session's id starts (the store draws them as `ses_<hex>`); aliases are what an application names.
SESSION_ID_PREFIX = "ses_"
JSON_CONTENT = {"Content-Type": "application/json"}
# A command's reply type (orchestrator/reply_types.py).
R = TypeVar("R", bound=Mapping[str, object])


class Commands(Protocol):
    """What runs commands in this process (a `Platform`)."""

    async def command(self, body: Any) -> dict[str, Any]: ...


class _Transport(Protocol):
    async def send(self, body: Any) -> dict[str, Any]: ...

    async def aclose(self) -> None: ...


class _LocalTransport:
    def __init__(self, platform: Commands) -> None:
        self._platform = platform

    async def send(self, body: Any) -> dict[str, Any]:
        return await self._platform.command(body)

    async def aclose(self) -> None:
        # The platform belongs to whoever created it; the client only borrows it.
        return None


class _HttpTransport:
    def __init__(self, http: httpx.AsyncClient) -> None:
        self._http = http

    async def send(self, body: Any) -> dict[str, Any]:
        data = encoded_body(body)
        if isinstance(data, dict):
            return data
        response = await self._http.post("/v1/commands", content=data, headers=JSON_CONTENT)
        return command_reply(response.content, response.status_code, str(response.url))

    async def aclose(self) -> None:
        await self._http.aclose()

    async def stream(
        self,
        session_id: str,
        params: dict[str, str],
        on_trimmed: Callable[[dict[str, int]], None] | None = None,
        on_closed: Callable[[dict[str, Any]], None] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """The batches of a connection listener on the session, as they come (the `data` of each `batch`
        message), until the server lets the stream go with another (`shutdown`: it is stopping; `closed`: its
        key revoked, its session deleted, ..., whose message goes to `on_closed`). A `trimmed` message goes to
        `on_trimmed`."""
        # Sent and closed by hand, not in `httpx.AsyncClient.stream`'s context manager: a reader that leaves the
        # loop early leaves this generator to the event loop's finalizer, which closes every open generator at once,
        # and that context manager's own generator, closed by the finalizer and by this one's exit together, was
        # "already running" (a RuntimeError said at the end of every `asyncio.run`).
        request = self._http.build_request(
            "GET", f"/v1/sessions/{session_id}/stream", params=params, timeout=httpx.Timeout(30, read=None)
        )
        response = await self._http.send(request, stream=True)
        try:
            if response.status_code != 200:
                await response.aread()
                reply = (
                    response.json() if response.headers.get("content-type", "").startswith("application/json") else {}
                )
                raise CommandError.of_reply({"message": f"HTTP {response.status_code}", **reply})
            data: list[str] = []
            event = "message"
            async for line in response.aiter_lines():
                if line.startswith("data: "):
                    data.append(line[6:])
                elif line.startswith("event: "):
                    event = line[7:]
                elif line == "" and data:
                    if event == "trimmed":  # retention deleted some of what was asked for; the rest follows
                        if on_trimmed is not None:
                            on_trimmed(json.loads("\n".join(data)))
                        data, event = [], "message"
                        continue
                    if event != "batch":
                        if event == "closed" and on_closed is not None:
                            on_closed(json.loads("\n".join(data)))
                        return
                    yield json.loads("\n".join(data))
                    data, event = [], "message"
        finally:
            await response.aclose()


class Client:
    """A door to the platform's commands.

    Example:
        async with Client.http("http://127.0.0.1:8700") as client:
            session = (await client.open_session())["session"]
            await client.write_object(session["id"], "tickets/1/meta", {"type": "ticket"})
            await client.list_executions(session["id"], listener="orchestrate")
    """

    def __init__(self, transport: _Transport) -> None:
        self._transport = transport

    @classmethod
    def http(
        cls,
        url: str,
        *,
        token: str | None = None,
        timeout: float = DEFAULT_TIMEOUT_SECONDS,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> Self:
        """A client of the HTTP API at `url` (its root, e.g. `http://127.0.0.1:8700`)."""
        headers = authorization(token)
        http = httpx.AsyncClient(base_url=url, headers=headers, timeout=timeout, transport=transport)
        return cls(_HttpTransport(http))

    @classmethod
    def local(cls, platform: Commands) -> Self:
        """A client calling `platform` in this process, with no HTTP in between."""
        return cls(_LocalTransport(platform))

    async def command(self, body: Any) -> dict[str, Any]:
        """Send one JSON command and return its reply, `{"status": "error", ...}` replies included."""
        return await self._transport.send(body)

    async def stream(
        self,
        session_id: str,
        *,
        after: int | None = None,
        filter: dict[str, Any] | None = None,
        batch: dict[str, Any] | None = None,
        client: str | None = None,
        on_trimmed: Callable[[dict[str, int]], None] | None = None,
        on_closed: Callable[[dict[str, Any]], None] | None = None,
    ) -> AsyncIterator[dict[str, Any]]:
        """A connection listener on the session (HTTP only): each batch as `{first_id, last_id, count, events}`.
        It ends when the server lets it go (stopping, a reader too slow), and raises `httpx.TransportError` when
        the connection drops, partway through a batch included (a batch is yielded only whole): follow again from
        the last batch's `last_id`, as a browser's `EventSource` reconnects. `on_trimmed` is told
        `{after, first_id}` when retention deleted some of what was asked for (the stream goes on from
        `first_id`); `on_closed` is told the `closed` message's `{reason}` when the server closed the stream for
        good (its key revoked, its session deleted).

        Raises:
            CommandError: the stream was refused (bad parameters, an unknown session).
            NotImplementedError: an in-process client, which has no stream.
        """
        if not isinstance(self._transport, _HttpTransport):
            raise NotImplementedError("a connection listener needs the HTTP door")
        params = {"filter": filter, "batch": batch}
        query = {k: json.dumps(v) for k, v in params.items() if v is not None}
        if after is not None:
            query["after"] = str(after)
        if client is not None:
            query["client"] = client
        async for data in self._transport.stream(session_id, query, on_trimmed, on_closed):
            yield data

    async def aclose(self) -> None:
        await self._transport.aclose()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def _call(self, reply_type: type[R], name: str, /, **arguments: Any) -> R:
        session_id, alias = arguments.get("session_id"), arguments.get("alias")
        if isinstance(session_id, str) and isinstance(alias, str):
            _refuse_the_old_order(name, session_id, alias)
        body = {"command": name, **{key: value for key, value in arguments.items() if value is not None}}
        reply = await self.command(body)
        if reply.get("status") != "success":
            raise CommandError.of_reply(reply)
        # What the platform answered; `reply_type` says so to a type checker (a test holds each to its command).
        return cast(R, reply)

    # Sessions

    async def open_session(
        self, *, alias: str | None = None, retention: dict[str, Any] | None = None
    ) -> OpenSessionReply:
        return await self._call(OpenSessionReply, "open_session", alias=alias, retention=retention)

    async def list_sessions(self, *, status: str | None = None, limit: int | None = None) -> ListSessionsReply:
        return await self._call(ListSessionsReply, "list_sessions", status=status, limit=limit)

    async def get_session(self, session_id: str) -> GetSessionReply:
        return await self._call(GetSessionReply, "get_session", session_id=session_id)

    async def close_session(self, session_id: str, *, drain: bool | None = None) -> SessionReply:
        return await self._call(SessionReply, "close_session", session_id=session_id, drain=drain)

    async def reopen_session(self, session_id: str) -> SessionReply:
        return await self._call(SessionReply, "reopen_session", session_id=session_id)

    async def delete_session(self, session_id: str) -> DeleteSessionReply:
        return await self._call(DeleteSessionReply, "delete_session", session_id=session_id)

    # Listeners

    async def save_listener(self, listener: dict[str, Any]) -> SaveListenerReply:
        return await self._call(SaveListenerReply, "save_listener", listener=listener)

    async def delete_listener(self, name: str) -> DeleteListenerReply:
        return await self._call(DeleteListenerReply, "delete_listener", name=name)

    async def get_listener(self, name: str) -> GetListenerReply:
        return await self._call(GetListenerReply, "get_listener", name=name)

    async def list_listeners(self) -> ListListenersReply:
        return await self._call(ListListenersReply, "list_listeners")

    async def switch_listener(self, session_id: str, name: str, *, enabled: bool) -> SwitchListenerReply:
        return await self._call(
            SwitchListenerReply, "switch_listener", session_id=session_id, name=name, enabled=enabled
        )

    # Objects

    async def write_object(
        self,
        session_id: str,
        alias: str,
        value: dict[str, Any],
        *,
        if_rev: int | None = None,
        client: str | None = None,
        idempotency_key: str | None = None,
        explain: bool | None = None,
    ) -> WriteObjectReply:
        return await self._call(
            WriteObjectReply,
            "write_object",
            session_id=session_id,
            alias=alias,
            value=value,
            if_rev=if_rev,
            client=client,
            idempotency_key=idempotency_key,
            explain=explain,
        )

    async def read_object(self, session_id: str, alias: str, *, client: str | None = None) -> ReadObjectReply:
        return await self._call(ReadObjectReply, "read_object", session_id=session_id, alias=alias, client=client)

    async def delete_object(self, session_id: str, alias: str, *, client: str | None = None) -> DeleteObjectReply:
        return await self._call(DeleteObjectReply, "delete_object", session_id=session_id, alias=alias, client=client)

    async def list_objects(self, session_id: str, *, prefix: str | None = None) -> ListObjectsReply:
        return await self._call(ListObjectsReply, "list_objects", session_id=session_id, prefix=prefix)

    async def write_objects(
        self,
        session_id: str,
        objects: list[dict[str, Any]],
        *,
        client: str | None = None,
        idempotency_key: str | None = None,
    ) -> WriteObjectsReply:
        return await self._call(
            WriteObjectsReply,
            "write_objects",
            session_id=session_id,
            objects=objects,
            client=client,
            idempotency_key=idempotency_key,
        )

    # Threads

    async def post_thread_item(
        self,
        session_id: str,
        alias: str,
        item: dict[str, Any],
        *,
        client: str | None = None,
        idempotency_key: str | None = None,
        explain: bool | None = None,
    ) -> PostThreadItemReply:
        return await self._call(
            PostThreadItemReply,
            "post_thread_item",
            session_id=session_id,
            alias=alias,
            item=item,
            client=client,
            idempotency_key=idempotency_key,
            explain=explain,
        )

    async def list_thread_items(
        self, session_id: str, alias: str, *, after: str | None = None, limit: int | None = None
    ) -> ListThreadItemsReply:
        return await self._call(
            ListThreadItemsReply, "list_thread_items", session_id=session_id, alias=alias, after=after, limit=limit
        )

    async def post_thread_items(
        self,
        session_id: str,
        alias: str,
        items: list[dict[str, Any]],
        *,
        client: str | None = None,
        idempotency_key: str | None = None,
    ) -> PostThreadItemsReply:
        return await self._call(
            PostThreadItemsReply,
            "post_thread_items",
            session_id=session_id,
            alias=alias,
            items=items,
            client=client,
            idempotency_key=idempotency_key,
        )

    # The application's own events

    async def save_event_type(
        self,
        name: str,
        schema: dict[str, Any],
        *,
        allow: list[str] | None = None,
        description: str | None = None,
    ) -> EventTypeReply:
        return await self._call(
            EventTypeReply, "save_event_type", name=name, schema=schema, allow=allow, description=description
        )

    async def get_event_type(self, name: str) -> EventTypeReply:
        return await self._call(EventTypeReply, "get_event_type", name=name)

    async def delete_event_type(self, name: str) -> DeletedEventTypeReply:
        return await self._call(DeletedEventTypeReply, "delete_event_type", name=name)

    async def list_event_types(self) -> ListEventTypesReply:
        return await self._call(ListEventTypesReply, "list_event_types")

    async def capture_table(
        self,
        table: str,
        *,
        type_prefix: str,
        session_column: str | None = None,
        session_id: str | None = None,
        exclude: list[str] | None = None,
    ) -> CaptureReply:
        """Make the table's changes events, each to the session its `session_column` names, or all to `session_id`."""
        return await self._call(
            CaptureReply,
            "capture_table",
            table=table,
            type_prefix=type_prefix,
            session_column=session_column,
            session_id=session_id,
            exclude=exclude,
        )

    async def uncapture_table(self, table: str) -> UncaptureTableReply:
        return await self._call(UncaptureTableReply, "uncapture_table", table=table)

    async def list_captures(self) -> ListCapturesReply:
        return await self._call(ListCapturesReply, "list_captures")

    async def emit_event(
        self,
        session_id: str,
        type: str,
        data: dict[str, Any],
        *,
        client: str | None = None,
        idempotency_key: str | None = None,
    ) -> EmitEventReply:
        return await self._call(
            EmitEventReply,
            "emit_event",
            session_id=session_id,
            type=type,
            data=data,
            client=client,
            idempotency_key=idempotency_key,
        )

    async def emit_events(
        self, session_id: str, events: list[dict[str, Any]], *, client: str | None = None
    ) -> EmitEventsReply:
        return await self._call(EmitEventsReply, "emit_events", session_id=session_id, events=events, client=client)

    # The graph

    async def update_graph(
        self,
        session_id: str,
        patch: dict[str, Any],
        *,
        if_rev: int | None = None,
        client: str | None = None,
        idempotency_key: str | None = None,
    ) -> UpdateGraphReply:
        return await self._call(
            UpdateGraphReply,
            "update_graph",
            session_id=session_id,
            patch=patch,
            if_rev=if_rev,
            client=client,
            idempotency_key=idempotency_key,
        )

    async def read_graph(self, session_id: str, *, nodes: list[str] | None = None) -> ReadGraphReply:
        return await self._call(ReadGraphReply, "read_graph", session_id=session_id, nodes=nodes)

    # Executions, what happened, and the session's listeners

    async def start_execution(
        self, session_id: str, workflow: str, *, input: Any = None, task_queue: str | None = None
    ) -> StartExecutionReply:
        return await self._call(
            StartExecutionReply,
            "start_execution",
            session_id=session_id,
            workflow=workflow,
            input=input,
            task_queue=task_queue,
        )

    async def stop_execution(
        self,
        session_id: str,
        execution_id: str,
        *,
        mode: str | None = None,
        reason: str | None = None,
        grace_seconds: float | None = None,
        terminate: bool | None = None,
    ) -> StopExecutionReply:
        return await self._call(
            StopExecutionReply,
            "stop_execution",
            session_id=session_id,
            execution_id=execution_id,
            mode=mode,
            reason=reason,
            grace_seconds=grace_seconds,
            terminate=terminate,
        )

    async def list_executions(
        self,
        session_id: str,
        *,
        listener: str | None = None,
        status: str | None = None,
        newest_first: bool | None = None,
        limit: int | None = None,
    ) -> ListExecutionsReply:
        return await self._call(
            ListExecutionsReply,
            "list_executions",
            session_id=session_id,
            listener=listener,
            status=status,
            newest_first=newest_first,
            limit=limit,
        )

    async def list_session_events(
        self,
        session_id: str,
        *,
        after: int | None = None,
        before: int | None = None,
        limit: int | None = None,
        types: list[str] | None = None,
    ) -> ListSessionEventsReply:
        return await self._call(
            ListSessionEventsReply,
            "list_session_events",
            session_id=session_id,
            after=after,
            before=before,
            limit=limit,
            types=types,
        )

    async def list_session_listeners(self, session_id: str) -> ListSessionListenersReply:
        return await self._call(ListSessionListenersReply, "list_session_listeners", session_id=session_id)

    async def explain_event(self, session_id: str, event_id: int) -> ExplainEventReply:
        return await self._call(ExplainEventReply, "explain_event", session_id=session_id, event_id=event_id)

    async def simulate_listener(
        self,
        session_id: str,
        listener: dict[str, Any],
        *,
        after: int | None = None,
        before: int | None = None,
        run_seconds: float | None = None,
    ) -> SimulateListenerReply:
        return await self._call(
            SimulateListenerReply,
            "simulate_listener",
            session_id=session_id,
            listener=listener,
            after=after,
            before=before,
            run_seconds=run_seconds,
        )

    # Flow control: pause and resume (everywhere, or in one session), replay a batch, redeliver a range.

    async def pause_listener(self, name: str, *, session_id: str | None = None) -> PauseListenerReply:
        return await self._call(PauseListenerReply, "pause_listener", name=name, session_id=session_id)

    async def resume_listener(self, name: str, *, session_id: str | None = None) -> ResumeListenerReply:
        return await self._call(ResumeListenerReply, "resume_listener", name=name, session_id=session_id)

    async def replay_batch(
        self, session_id: str, listener: str, *, batch: int, client: str | None = None
    ) -> ReplayBatchReply:
        """Run the batch that starts at event `batch` again, as a batch of its own."""
        return await self._call(
            ReplayBatchReply, "replay_batch", session_id=session_id, listener=listener, batch=batch, client=client
        )

    async def redeliver(
        self, session_id: str, listener: str, *, after: int, through: int, client: str | None = None
    ) -> RedeliverReply:
        """Hand the listener the session's events after `after` up to `through` (included) as new batches."""
        return await self._call(
            RedeliverReply,
            "redeliver",
            session_id=session_id,
            listener=listener,
            after=after,
            through=through,
            client=client,
        )

    # Keys: an admin key's commands (docs/security.md).

    async def create_api_key(
        self,
        name: str,
        scopes: list[str],
        *,
        requests_per_second: float | None = None,
        expires_at: str | None = None,
    ) -> CreateApiKeyReply:
        """A new key; the reply's `key.secret` is shown this once."""
        return await self._call(
            CreateApiKeyReply,
            "create_api_key",
            name=name,
            scopes=scopes,
            requests_per_second=requests_per_second,
            expires_at=expires_at,
        )

    async def list_api_keys(self) -> ListApiKeysReply:
        return await self._call(ListApiKeysReply, "list_api_keys")

    async def revoke_api_key(self, name: str) -> RevokeApiKeyReply:
        return await self._call(RevokeApiKeyReply, "revoke_api_key", name=name)

    async def whoami(self) -> WhoamiReply:
        return await self._call(WhoamiReply, "whoami")

    # Schedules: a session's, each at an alias there (docs/commands.md has the bodies).

    async def create_schedule(
        self,
        session_id: str,
        alias: str,
        *,
        repeat: dict[str, Any] | str,
        invocation_target_type: str | None = None,
        target: dict[str, Any] | None = None,
        start_date: str | None = None,
        end_date: str | None = None,
        origin: dict[str, Any] | None = None,
        enabled: bool | None = None,
        replace: bool | None = None,
        cron_expression: str | None = None,
        timezone: str | None = None,
        every_seconds: int | None = None,
        invocation_time: str | None = None,
        invocation_target: dict[str, Any] | None = None,
    ) -> ScheduleReply:
        """The nested form (`repeat` an object, `target`), or the seed's flat one (`repeat` a string, its fields
        beside it, `invocation_target`); `invocation_target_type` defaults to what the target says. The session and
        the alias are the schedule's address, so this method asks for both (the command finds them in a flat
        body's target when they are left out)."""
        return await self._call(
            ScheduleReply,
            "create_schedule",
            session_id=session_id,
            alias=alias,
            repeat=repeat,
            invocation_target_type=invocation_target_type,
            target=target,
            start_date=start_date,
            end_date=end_date,
            origin=origin,
            enabled=enabled,
            replace=replace,
            cron_expression=cron_expression,
            timezone=timezone,
            every_seconds=every_seconds,
            invocation_time=invocation_time,
            invocation_target=invocation_target,
        )

    async def update_schedule(
        self,
        session_id: str,
        alias: str,
        *,
        repeat: dict[str, Any] | None = None,
        invocation_target_type: str | None = None,
        target: dict[str, Any] | None = None,
        start_date: str | None = None,
        end_date: str | None = None,
        enabled: bool | None = None,
    ) -> ScheduleReply:
        """Change what is given and keep the rest."""
        return await self._call(
            ScheduleReply,
            "update_schedule",
            session_id=session_id,
            alias=alias,
            repeat=repeat,
            invocation_target_type=invocation_target_type,
            target=target,
            start_date=start_date,
            end_date=end_date,
            enabled=enabled,
        )

    async def get_schedule(self, session_id: str, alias: str) -> GetScheduleReply:
        return await self._call(GetScheduleReply, "get_schedule", session_id=session_id, alias=alias)

    async def delete_schedule(self, session_id: str, alias: str) -> DeleteScheduleReply:
        return await self._call(DeleteScheduleReply, "delete_schedule", session_id=session_id, alias=alias)

    async def list_schedules(self, session_id: str) -> ListSchedulesReply:
        return await self._call(ListSchedulesReply, "list_schedules", session_id=session_id)

    async def list_schedule_runs(
        self, session_id: str, alias: str, *, limit: int | None = None
    ) -> ListScheduleRunsReply:
        return await self._call(
            ListScheduleRunsReply, "list_schedule_runs", session_id=session_id, alias=alias, limit=limit
        )


def _refuse_the_old_order(name: str, session_id: str, alias: str) -> None:
    """Refuse a call that gives the alias where the session's id goes: the order the schedule methods took
    until 2026-12-05, `(alias, session_id)`, which the platform would answer with a `not_found` about a session
    named by the alias. Only a session's id starts `ses_`; this goes in the release after the next (CHANGELOG.md)."""
    if alias.startswith(SESSION_ID_PREFIX) and not session_id.startswith(SESSION_ID_PREFIX):
        raise TypeError(
            f"{name}: the session's id comes first, {name}(session_id, alias, ...); this call gave "
            f"{session_id!r} as the session and the session's id {alias!r} as the alias"
        )
