"""The run-side SDK: what a workflow started by a listener uses to read and write its session.

A run gets one argument, `RunInput` (its session, listener, batch and rendered input). `RunSession` wraps
it and turns each read or write into the `orchestrator.session` activity, so the workflow stays
deterministic and every write is durable, attributed to the run (`source.listener`, `source.execution`,
`depth`) and idempotent: its key is the batch's run, the call's place among the run's calls and a hash of
its arguments, so a retried activity or a retried batch that makes the same write again is answered what the
first made (its rev and event, even when the object has changed since) instead of writing twice.

    @workflow.defn(name="orchestrator")
    class Orchestrator:
        @workflow.run
        async def run(self, run: RunInput) -> None:
            session = RunSession(run)
            for message in await session.batch_messages():
                meta = await session.read_object(message["alias"])
                ...
            await session.write_object("views/status", {"type": "status", "ok": True})
"""

from __future__ import annotations

import asyncio
import hashlib
import json
from collections.abc import Iterable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy
from temporalio.exceptions import ActivityError, ApplicationError, is_cancelled_exception

from orchestrator.workflows.messages import WAIT_SIGNAL, BatchInfo, RunInput

__all__ = ["BatchInfo", "RunInput", "RunSession", "SessionError"]

CALL_TIMEOUT = timedelta(seconds=30)
# How many events of a heavy answer one call reads.
ANSWER_PAGE = 100
# The change by which a session call cancelled under the run raises `asyncio.CancelledError` (before it, Temporal's
# `ActivityError`): a run whose history was made before it replays as it ran.
CANCELLED_CALLS = "orchestrator.cancelled-session-calls"
CALL_RETRY = RetryPolicy(initial_interval=timedelta(milliseconds=200), maximum_interval=timedelta(seconds=10))


class SessionError(ApplicationError):
    """A refusal from the session (`rev_conflict`, `not_found`, `access_denied`, ...), with its code.

    A Temporal failure, so a run that lets one escape fails (its `execution.ended` names the code as the error's
    type) instead of failing its workflow task again and again while it holds its lane."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message, type=code, non_retryable=True)
        self.code = code


class _Answers:
    """The answers the platform signalled to this run's waits, by wait number, and how many waits the run began:
    one per workflow, found again through its signal handler by every `RunSession` of the run."""

    def __init__(self) -> None:
        self.by_seq: dict[int, dict[str, Any]] = {}
        self.waits = 0

    def take(self, answer: dict[str, Any]) -> None:
        # A wait's answer may be told more than once (a router that died before it noted the telling): the first.
        # One for a wait of an earlier run of this workflow (before a continue-as-new) is not this run's.
        if answer.get("run_id", "") in ("", workflow.info().run_id):
            self.by_seq.setdefault(int(answer["seq"]), answer)


def _answers() -> _Answers:
    handler = workflow.get_signal_handler(WAIT_SIGNAL)
    owner = getattr(handler, "__self__", None)
    if isinstance(owner, _Answers):
        return owner
    answers = _Answers()
    workflow.set_signal_handler(WAIT_SIGNAL, answers.take)
    return answers


def sent_conditions(conditions: Any) -> Any:
    """A wait's conditions as the call sends them: any sequence of them as a list; a string, a mapping or what is no
    sequence as it is, for the door to refuse naming `conditions` (a string made a list is its characters)."""
    if isinstance(conditions, str | bytes | Mapping) or not isinstance(conditions, Iterable):
        return conditions
    return list(conditions)


class RunSession:
    """A run's door to its session. Use it only inside the workflow the listener started."""

    def __init__(self, run: RunInput | dict[str, Any]) -> None:
        self.run = run if isinstance(run, RunInput) else RunInput.model_validate(run)
        self._calls = 0

    async def _call(self, op: str, write: bool = False, counted: bool = True, **args: Any) -> Any:
        run = self.run
        # A call's place among the run's calls is part of its writes' keys; a read that only some runs of the
        # same code make (`batch_messages` when the pointers did not come) takes no place, so keys stay put.
        if counted:
            self._calls += 1
        key = None
        if write:
            digest = hashlib.sha256(json.dumps([op, args], sort_keys=True, default=str).encode()).hexdigest()[:16]
            key = f"{run.run_key or run.execution_id}:{self._calls}:{digest}"
        call = {
            "op": op,
            "args": {k: v for k, v in args.items() if v is not None},
            "session_id": run.session_id,
            "listener": run.listener or None,
            "execution_id": run.execution_id,
            "depth": run.depth,
            "idempotency_key": key,
            "batch": {"lane": run.batch.lane, "first_id": run.batch.first_id, "last_id": run.batch.last_id}
            if run.listener
            else None,
        }
        try:
            # On the platform's task queue: the run's own, unless its action named another.
            return await workflow.execute_activity(
                "orchestrator.session",
                call,
                task_queue=run.platform_task_queue,
                start_to_close_timeout=CALL_TIMEOUT,
                retry_policy=CALL_RETRY,
            )
        except ActivityError as err:
            if is_cancelled_exception(err) and workflow.patched(CANCELLED_CALLS):
                # The run (or the task that made the call) was cancelled while the call ran: its cancellation, as
                # it gets it anywhere else, so a clean-up written for `asyncio.CancelledError` runs (docs/waits.md).
                raise asyncio.CancelledError(str(err)) from err
            cause = err.cause
            if isinstance(cause, ApplicationError) and cause.type:
                raise SessionError(cause.type, cause.message) from None
            raise

    async def read_object(self, alias: str) -> dict[str, Any] | None:
        """The object at `alias` (`value`, `rev`, ...), or None if there is none."""
        result: dict[str, Any] | None = await self._call("read_object", alias=alias)
        return result

    async def write_object(self, alias: str, value: dict[str, Any], if_rev: int | None = None) -> dict[str, Any]:
        """Write the object; answers `{alias, rev, event_id}`. `if_rev` refuses with `rev_conflict`."""
        result: dict[str, Any] = await self._call("write_object", True, alias=alias, value=value, if_rev=if_rev)
        return result

    async def delete_object(self, alias: str) -> dict[str, Any]:
        result: dict[str, Any] = await self._call("delete_object", True, alias=alias)
        return result

    async def list_objects(self, prefix: str | None = None) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._call("list_objects", prefix=prefix)
        return result

    async def post_thread_item(self, alias: str, item: dict[str, Any]) -> dict[str, Any]:
        """Post an item (`type`, `role`, `message`, `metadata`); answers `{id, alias, event_id}`."""
        result: dict[str, Any] = await self._call("post_thread_item", True, alias=alias, item=item)
        return result

    async def list_thread_items(
        self, alias: str, after: str | None = None, limit: int | None = None
    ) -> list[dict[str, Any]]:
        result: list[dict[str, Any]] = await self._call("list_thread_items", alias=alias, after=after, limit=limit)
        return result

    async def update_graph(self, patch: dict[str, Any], if_rev: int | None = None) -> dict[str, Any]:
        """Patch the session's graph all or none (`nodes`, `edges: {add, remove}`); `if_rev` refuses with
        `rev_conflict` when another writer changed it since. Answers `{rev, changed, event_id}`."""
        result: dict[str, Any] = await self._call("update_graph", True, patch=patch, if_rev=if_rev)
        return result

    async def read_graph(self, nodes: list[str] | None = None) -> dict[str, Any]:
        """The session's graph (`rev`, `nodes`, `edges`), or only `nodes` and their edges."""
        result: dict[str, Any] = await self._call("read_graph", nodes=nodes)
        return result

    async def schedule(
        self,
        alias: str,
        repeat: dict[str, Any],
        target: dict[str, Any],
        target_type: str | None = None,
        **timing: Any,
    ) -> dict[str, Any]:
        """Set a timer of the run's own (the seed's `ctx.schedule`): `repeat` as `create_schedule` takes it
        (`one_time` at an `invocation_time`, `recurring_cron` in a `timezone`, `interval` every so many
        seconds), firing `target` (an object write, or a workflow to start). The same alias again replaces it.
        A firing's events carry the schedule and when it was due in their `cause`. `target_type` (or
        `invocation_target_type`, as `create_schedule` spells it) is found from `target` when not given."""
        target_type = timing.pop("invocation_target_type", target_type)
        result: dict[str, Any] = await self._call(
            "schedule", True, alias=alias, repeat=repeat, target=target, invocation_target_type=target_type, **timing
        )
        return result

    async def unschedule(self, alias: str) -> dict[str, Any] | None:
        """Delete the timer at `alias` (None when there was none)."""
        result: dict[str, Any] | None = await self._call("unschedule", True, alias=alias)
        return result

    async def emit(self, type: str, data: dict[str, Any]) -> int:
        """Emit one of the application's declared events; answers its id (the same when the call is retried)."""
        ids: list[int] = await self._call("emit_events", True, events=[{"type": type, "data": data}])
        return ids[0]

    async def emit_many(self, events: list[dict[str, Any]]) -> list[int]:
        """Emit several (`{type, data}` each), all or none; answers their ids."""
        ids: list[int] = await self._call("emit_events", True, events=events)
        return ids

    async def close_session(self, drain: bool = True) -> dict[str, Any]:
        """Close the run's session; with `drain` (the default), once what is pending now has fired and its runs
        (this one included) have ended, so replies that arrive around a resolution still reach a run."""
        result: dict[str, Any] = await self._call("close_session", drain=drain)
        return result

    async def batch_messages(self) -> list[dict[str, Any]]:
        """The batch's pointers (`{id, type, alias, item_id?, execution_id?, nodes?}`, one per entry, by id):
        `batch.messages` when the listener's template names them and they came with the run, else read once
        from the store (a batch holds at most 1,000 entries)."""
        batch = self.run.batch
        if batch.carried_messages is not None:
            return batch.carried_messages
        ids = batch.message_ids
        if not ids:
            return []
        result: list[dict[str, Any]] = await self._call("batch_messages", counted=False, ids=ids)
        return result

    async def batch_events(self, offset: int = 0, limit: int = 200) -> list[dict[str, Any]]:
        """The batch's events whole (envelopes, a thread item's whole message), `limit` at a time (at most 1,000)
        from `offset` among `batch.event_ids` (what `distinct_by` superseded too): a run gets the events
        themselves only when its listener's template names `batch.events`; a run that wants them reads them here."""
        ids = self.run.batch.event_ids[offset : offset + min(limit, 1000)]
        if not ids:
            return []
        result: list[dict[str, Any]] = await self._call("batch_events", ids=ids)
        return result

    async def list_events(
        self,
        after: int | None = None,
        before: int | None = None,
        limit: int | None = None,
        types: list[str] | None = None,
    ) -> list[dict[str, Any]]:
        """The session's stream; pass `batch.first_id - 1` / `batch.last_id + 1` to read around the batch."""
        result: list[dict[str, Any]] = await self._call(
            "list_session_events", after=after, before=before, limit=limit, types=types
        )
        return result

    async def list_session_events(
        self,
        after: int | None = None,
        before: int | None = None,
        limit: int | None = None,
        types: list[str] | None = None,
    ) -> dict[str, Any]:
        """The session's stream as the command pages it: `events`, and `last_id`, where to continue (the last
        id answered, or `after` when none; not the command's `first_id` after retention). `after=batch.first_id - 1,
        before=batch.last_id + 1` reads around
        the batch (SPEC 4: no cursor in the application)."""
        events = await self.list_events(after=after, before=before, limit=limit, types=types)
        return {"events": events, "last_id": events[-1]["id"] if events else (after or 0)}

    async def wait_for_event(
        self,
        conditions: Sequence[dict[str, Any]],
        *,
        timeout_seconds: float,
        after: int | None = None,
        max_events: int = 1,
    ) -> dict[str, Any]:
        """Wait for the next events this run needs; answers `{"matched": i, "events": [...]}` (envelopes, by id) or
        `{"matched": None, "events": []}` when `timeout_seconds` pass first.

        Each condition is a listener's filter (`{"types": [...], "aliases"?: [...], "where"?: [...]}`). The wait
        counts from `after` (an event id; by default the last event of the run's batch), so an event committed
        after the batch and before the wait began is found. When several conditions hold at once the first
        declared wins, and only its events are taken, up to `max_events` in id order; the run's next wait goes on
        from there, and finds what this one left. An event a wait took is the run's: its listener's lanes do not
        get it again. The run is told by a signal; nothing polls."""
        answers = _answers()
        answers.waits += 1
        seq = answers.waits
        run_id = workflow.info().run_id
        try:
            opened: dict[str, Any] = await self._call(
                "wait_open",
                seq=seq,
                run_id=run_id,
                conditions=sent_conditions(conditions),
                timeout_seconds=timeout_seconds,
                after=after,
                max_events=max_events,
            )
        except asyncio.CancelledError:
            # Given up while being put in place (a timeout of the caller's own): closed as below, so a wait its
            # call put in place meanwhile takes nothing for nobody.
            await self._given_up(seq, run_id)
            raise
        if opened["state"] in ("answered", "abandoned"):
            return await self._heard(opened)
        try:
            await workflow.wait_condition(lambda: seq in answers.by_seq, timeout=timeout_seconds)
        except TimeoutError:
            # The timeout's own call: only a run that timed out makes it, so it takes no place among the calls.
            return await self._heard(await self._call("wait_close", counted=False, seq=seq, run_id=run_id))
        except asyncio.CancelledError:
            # The wait's caller gave up on it (its task cancelled, or the run's): closed, so what comes later is not
            # taken for nobody, and an answer that came meanwhile is left for the run's next wait.
            await self._given_up(seq, run_id)
            raise
        return await self._heard(answers.by_seq[seq])

    async def _given_up(self, seq: int, run_id: str) -> None:
        """Close a wait its caller gave up on. A run the platform has no record of (a workflow it did not start)
        has no wait to close: its cancellation goes on, not a `not_found` in its place."""
        try:
            await self._call("wait_close", counted=False, seq=seq, run_id=run_id, given_up=True)
        except SessionError as err:
            if err.code != "not_found":
                raise

    async def _heard(self, answer: dict[str, Any]) -> dict[str, Any]:
        """A wait's answer as `wait_for_event` gives it: the events whole, read by id when they were too heavy to
        come with it."""
        if answer.get("state") in ("timed_out", "abandoned") or answer.get("matched") is None:
            return {"matched": None, "events": []}
        events = answer.get("events")
        if events is None:
            ids = list(answer.get("event_ids") or ())
            events = []
            for start in range(0, len(ids), ANSWER_PAGE):
                events += await self._call("batch_events", counted=False, ids=ids[start : start + ANSWER_PAGE])
        return {"matched": answer["matched"], "events": events}
