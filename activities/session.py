"""The session activities a run calls through the run-side SDK (`orchestrator.sdk.RunSession`).

Owns reading and writing a session on a run's behalf. Every write carries the run's `source.listener` and
`source.execution` (so it never wakes the run's own listener) and `depth` one more than the batch's
deepest event, and an idempotency key from the SDK (the run, the call's place among its calls, a hash of
its input), so an activity retried after its write committed, or a batch retried after a failed run,
finds its earlier write instead of writing twice. A listener that declares `owns` may write only there.
"""

from __future__ import annotations

import asyncio
import functools
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

import pydantic
from pydantic import BaseModel
from temporalio import activity
from temporalio.exceptions import ApplicationError

from orchestrator.activities.base import PlatformActivities
from orchestrator.causes import caused_by, run_cause
from orchestrator.commands.app_events import Emitted, checked
from orchestrator.commands.events import past_retention
from orchestrator.commands.fields import Rev, check_payload
from orchestrator.commands.schedules import (
    CreateSchedule,
    ScheduleRef,
    delete_schedule,
    make_schedule,
    written_alias,
)
from orchestrator.commands.threads import check_item
from orchestrator.core.declaration import ListenerDeclaration
from orchestrator.core.errors import CommandError
from orchestrator.core.globs import owned, validate_alias
from orchestrator.core.graphs import GraphPatch
from orchestrator.core.validation import field_errors_message
from orchestrator.core.waits import parse_wait
from orchestrator.core.written import ThreadItem
from orchestrator.store.waits import answer_events, compiled_conditions
from orchestrator.telemetry import TRACER


class SessionCall(BaseModel):
    """One call of a run on its session: the operation, its arguments, and who is calling."""

    op: str
    args: dict[str, Any]
    session_id: str
    listener: str | None = None
    execution_id: str | None = None
    depth: int = 0
    idempotency_key: str | None = None
    # The batch whose run calls (`lane`, `first_id`, `last_id`): with the execution, what caused its writes.
    batch: dict[str, Any] | None = None


# The most events one `batch_events` or `batch_messages` call reads (a batch holds at most 1,000 entries;
# what `distinct_by` superseded comes on top).
MAX_BATCH_EVENTS = 1000
ALIAS_WRITES = frozenset({"write_object", "delete_object", "post_thread_item"})
WRITES = ALIAS_WRITES | {"emit_events", "update_graph", "schedule", "unschedule"}
ALIAS_OPS = ALIAS_WRITES | {"read_object", "list_thread_items"}


# A run's `if_rev`, checked by the door's own type, strictly as the door checks (revs are integers: a larger one
# could never match).
_IF_REV: pydantic.TypeAdapter[int | None] = pydantic.TypeAdapter(Rev | None)


def if_rev_of(args: dict[str, Any]) -> int | None:
    try:
        return _IF_REV.validate_python(args.get("if_rev"), strict=True)
    except pydantic.ValidationError as err:
        raise CommandError("invalid_request", field_errors_message(err, "if_rev")) from None


def refusal(err: CommandError) -> ApplicationError:
    """A refusal crosses back into the workflow as a non-retryable error whose type is the error code."""
    return ApplicationError(err.message, type=err.code, non_retryable=True)


# How often, and how far apart, a wait asks again while routing is behind an event its first condition may hold
# for (a round takes tens of milliseconds; the poll's interval bounds a lost wake-up).
BEHIND_TRIES = 40
BEHIND_PAUSE_SECONDS = 0.05
# How many runs a worker remembers as started (their `execution.started` recorded); one forgotten is only
# asked about again, at its next write.
KNOWN_STARTED = 10_000


class SessionActivities(PlatformActivities):
    def all(self) -> list[Callable[..., Any]]:
        return [self.session_call]

    @functools.cached_property
    def _started(self) -> OrderedDict[str, None]:
        return OrderedDict()

    async def _started_before_writing(self, execution_id: str) -> None:
        """Causes before effects: the run's start is recorded before its first write commits. Its lane's driver
        records it when it finishes the batch, which may come after a quick run's writes (or, after a crash
        between the run's start and that record, much later); the run's own first write records it first."""
        if execution_id in self._started:
            return
        await self.store.run_has_started(execution_id)
        self._started[execution_id] = None
        if len(self._started) > KNOWN_STARTED:
            self._started.popitem(last=False)

    async def _check_owns(self, call: SessionCall, alias: str | None, field: str = "alias") -> None:
        """Refuse a write outside what the calling run's listener owns; `alias` None: a timer that starts a
        workflow, whose run no `owns` would hold, so only a listener that owns anywhere may set one."""
        if call.listener is None:
            return

        try:
            listener = await self.store.get_listener(call.listener)
        except CommandError:
            return
        owns = ListenerDeclaration.model_validate(listener["body"]).owns
        if alias is None:
            if owns is not None:
                raise CommandError(
                    "access_denied",
                    f"{field}: a timer that starts a workflow would write beyond what listener {call.listener!r}"
                    f" owns ({owns}); set one that writes an object there",
                )
            return
        if not owned(owns, alias):
            raise CommandError("access_denied", f"{field}: {alias!r} is outside what listener {call.listener!r} owns")

    @activity.defn(name="orchestrator.session")
    async def session_call(self, call: SessionCall) -> Any:
        try:
            if call.op in WRITES:
                # The write's event keeps this span's traceparent: what the run wrote continues the batch's trace.
                attributes = {
                    "orchestrator.session": call.session_id,
                    "orchestrator.alias": str(call.args.get("alias")),
                }
                if call.execution_id is not None:
                    attributes["orchestrator.execution"] = call.execution_id
                    await self._started_before_writing(call.execution_id)
                cause = run_cause(call.execution_id, call.batch) if call.execution_id else None
                with TRACER.start_as_current_span(f"session.{call.op}", attributes=attributes), caused_by(cause):
                    return await self._call(call)
            return await self._call(call)
        except CommandError as err:
            raise refusal(err) from None
        except ValueError as err:
            raise refusal(CommandError("invalid_request", str(err))) from None

    async def _wait_open(self, call: SessionCall) -> dict[str, Any]:
        """Put the run's wait in place (`RunSession.wait_for_event`), answered at once when the log holds its
        answer already. By default it counts from the last event of the run's batch."""
        if call.execution_id is None:
            raise CommandError("invalid_request", "execution_id: only a run waits for events")
        args = dict(call.args)
        seq = args.pop("seq", None)
        run_id = str(args.pop("run_id", "") or "")
        if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
            raise CommandError("invalid_request", "seq: the wait's number among the run's, from 1")
        spec = parse_wait(args, await self.store.event_schemas())
        if spec.after is not None:
            # A position no event of the log holds yet never counts from anything: a caller's mistake, said now
            # rather than a wait that can only time out.
            end = await self.store.session_end(call.session_id)
            if spec.after > end:
                raise CommandError("invalid_request", f"after: {spec.after} is past the session's last event ({end})")
        after = spec.after
        if after is None and call.batch is not None and call.batch.get("last_id"):
            after = int(call.batch["last_id"])
        if after is not None:
            # A read past retention says where the stream starts (SPEC 14), never answers from what is left.
            trimmed, first = await self.store.stream_start(call.session_id)
            if after < trimmed:
                raise past_retention("after", call.session_id, trimmed, first)
        request = {
            "session_id": call.session_id,
            "execution_id": call.execution_id,
            "run_id": run_id,
            "seq": seq,
            "kind": "wait",
            "listener": call.listener,
            "after": after,
            "max_events": spec.max_events,
            "timeout_seconds": spec.timeout_seconds,
            "conditions": [c.model_dump(mode="json", exclude_unset=True) for c in spec.conditions],
            "compiled": compiled_conditions(spec.conditions),
        }
        # An earlier condition may hold for an event committed and not routed yet: asked again once routing has
        # caught up, so the first declared wins; past the last try, the answer stands on what is routed.
        for _ in range(BEHIND_TRIES):
            opened = await self.store.open_wait({**request, "settled": False})
            if opened["state"] != "behind":
                break
            await asyncio.sleep(BEHIND_PAUSE_SECONDS)
        else:
            opened = await self.store.open_wait({**request, "settled": True})
        return await self._wait_reply(call.session_id, opened)

    async def _wait_reply(self, session_id: str, wait: dict[str, Any]) -> dict[str, Any]:
        """A wait as the run reads it: its state, and once answered the winning condition, the ids it took and the
        events whole when they are small enough to cross in one payload (else the run reads them by id)."""
        ids = [int(i) for i in wait.get("event_ids") or ()]
        events = await answer_events(self.store.lanes, session_id, ids)
        return {"state": wait["state"], "matched": wait.get("matched"), "event_ids": ids, "events": events}

    async def _call(self, call: SessionCall) -> Any:
        store, args, session = self.store, call.args, call.session_id
        alias = ""
        if call.op in ALIAS_OPS:
            alias = validate_alias(str(args.get("alias", "")))
        if call.op in ALIAS_WRITES:
            await self._check_owns(call, alias)
        source = {"listener": call.listener, "execution": call.execution_id}
        depth = call.depth + 1
        limit = self.settings.limits.max_payload_bytes
        if call.op == "read_object":
            try:
                return await store.read_object(session, alias)
            except CommandError as err:
                if err.code == "not_found" and "alias" in err.message:
                    return None
                raise
        if call.op == "write_object":
            value = args["value"]
            if not isinstance(value, dict) or not isinstance(value.get("type"), str):
                raise CommandError("invalid_request", "value: must be a JSON object with a string field 'type'")
            check_payload("value", value, limit)
            obj, event_id = await store.write_object(
                session,
                alias,
                value,
                if_rev=if_rev_of(args),
                source=source,
                depth=depth,
                idempotency_key=call.idempotency_key,
            )
            return {**obj, "event_id": event_id}
        if call.op == "delete_object":
            obj, event_id = await store.delete_object(
                session, alias, source=source, depth=depth, idempotency_key=call.idempotency_key
            )
            return {**obj, "event_id": event_id}
        if call.op == "list_objects":
            return await store.list_objects(session, args.get("prefix"))
        if call.op == "post_thread_item":
            try:
                item = ThreadItem.model_validate(args.get("item"))
            except pydantic.ValidationError as err:
                raise CommandError("invalid_request", field_errors_message(err, "item")) from None
            check_item(item, limit)
            posted, event_id = await store.post_thread_item(
                session,
                alias,
                item.model_dump(exclude_none=True),
                source=source,
                depth=depth,
                idempotency_key=call.idempotency_key,
            )
            return {**posted, "event_id": event_id}
        if call.op == "emit_events":
            try:
                emitted = [Emitted.model_validate(e) for e in args.get("events") or []]
            except pydantic.ValidationError as err:
                raise CommandError("invalid_request", field_errors_message(err, "events")) from None
            if not emitted:
                raise CommandError("invalid_request", "events: at least one event")
            rows = await checked(self, emitted, "events.{index}.")
            if call.idempotency_key is not None:  # a call with no key writes anew each time (as the others do)
                for index, row in enumerate(rows):
                    row["key"] = f"{call.idempotency_key}:{index}"
            return await store.emit(session, rows, source=source, depth=depth)
        if call.op == "update_graph":
            try:
                patch = GraphPatch.model_validate(args.get("patch"))
            except pydantic.ValidationError as err:
                raise CommandError("invalid_request", field_errors_message(err, "patch")) from None
            check_payload("patch", args.get("patch"), limit)
            graph, changed_event = await store.update_graph(
                session,
                patch,
                if_rev=if_rev_of(args),
                source=source,
                depth=depth,
                idempotency_key=call.idempotency_key,
            )
            return {**graph, "event_id": changed_event}
        if call.op == "schedule":
            # A timer of the run's own: the same alias again replaces it, so a retried call sets it once.
            body = {**args, "command": "create_schedule", "session_id": session, "replace": True}
            try:
                request = CreateSchedule.model_validate(body)
            except pydantic.ValidationError as err:
                raise CommandError("invalid_request", field_errors_message(err, "")) from None
            # Its firings write for the run: within what the listener owns, as the run's own writes are.
            written = written_alias(request)
            await self._check_owns(call, written, "target.alias" if written is not None else "target")
            return (await make_schedule(self, request, depth, call.execution_id))["schedule"]
        if call.op == "unschedule":
            ref = ScheduleRef(
                command="delete_schedule", session_id=session, alias=validate_alias(str(args.get("alias")))
            )
            try:
                return (await delete_schedule(self, ref))["schedule"]
            except CommandError as err:
                if err.code != "not_found":
                    raise
                return None
        if call.op == "read_graph":
            return await store.read_graph(session, args.get("nodes"))
        if call.op == "list_thread_items":
            return await store.list_thread_items(
                session, alias, after=args.get("after"), limit=args.get("limit") or 100
            )
        if call.op == "close_session":
            if args.get("drain", True):
                return await store.drain_session(session)
            return await store.set_session_status(session, "closed")
        if call.op == "wait_open":
            return await self._wait_open(call)
        if call.op == "wait_close":
            closed = await store.close_wait(
                str(call.execution_id),
                str(args.get("run_id") or ""),
                int(args["seq"]),
                given_up=bool(args.get("given_up")),
            )
            if closed is None:
                raise CommandError("not_found", f"seq: no wait {args['seq']} of run {call.execution_id!r}")
            return await self._wait_reply(session, closed)
        if call.op in ("batch_events", "batch_messages"):
            ids = [int(i) for i in args.get("ids") or ()][:MAX_BATCH_EVENTS]
            if call.op == "batch_messages":
                return await store.lanes.pointers(session, ids)
            return [e for e in await store.lanes.envelopes(ids) if e["session_id"] == session]
        if call.op == "list_session_events":
            events = await store.list_events(
                session,
                after=args.get("after"),
                before=args.get("before"),
                limit=args.get("limit") or 100,
                types=args.get("types"),
            )
            return [e.envelope() for e in events]
        raise CommandError("invalid_request", f"op: unknown session call {call.op!r}")
