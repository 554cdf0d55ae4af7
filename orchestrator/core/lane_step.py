"""The lane step: what a lane does next, from a snapshot of it; and what a run's end does.

Owns the engine's decisions. `next_move` orders them: finish a batch a dead driver left claimed; while the
listener is paused, nothing; a failed run's repeat once due; a replay asked for, then the lane's own next
batch, once its window has closed (or its debounce gone quiet), a slot is free and the listener's throttle lets
it go; else wait, saying for what and until when. `step` adds the batch itself: the cut (`batch_cuts.cut`, of
what the throttle lets go: `throttles.free_prefix`), the verdict (`verdicts.py`), the run and slots it takes.
`run_end` decides a run's end: hold the slot until the repeat, `min(delay * 2^n, 900)` seconds on, or release it.
All are functions of their arguments (`now` is the database's clock, or a lane's later one): the driver records
and acts, and `list_session_listeners` reads `next_move` to say why a lane waits.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Literal

from orchestrator.core.backoff import retry_delay
from orchestrator.core.batch_cuts import Cut, cut
from orchestrator.core.declaration import (
    ListenerDeclaration,
    WorkflowAction,
    effective_max_parallel,
    lane_run_slots,
    lane_timing,
)
from orchestrator.core.lane_clock import Declared, window_close
from orchestrator.core.lane_keys import execution_id_of, run_key_of
from orchestrator.core.lane_snapshot import (
    ACT,
    CONSUME,
    Act,
    Decision,
    Drop,
    Finish,
    HeldSlot,
    LaneSnapshot,
    Queued,
    RunEnd,
    RunPlan,
    Take,
    Verdict,
    Wait,
    depth_of,
)
from orchestrator.core.limits import Limits
from orchestrator.core.throttles import UNKEYED, free_prefix, held_until
from orchestrator.core.verdicts import batch_verdict

# A replay takes all its events whatever their size: the byte budget is for the lane's own batches.
UNBOUNDED_BYTES = 1 << 62

Kind = Literal["batch", "replay", "repeat"]
KeyMove = Literal["take", "keep", "give_back"] | None


class Move:
    """What `next_move` found to do (a `Wait` says it found nothing)."""


class FinishClaimed(Move):
    pass


class StartRepeat(Move):
    def __init__(self, run: HeldSlot) -> None:
        self.run = run


class TakeReplay(Move):
    pass


class TakeBatch(Move):
    pass


class DropReplay(Move):
    pass


def window_closes_at(snap: LaneSnapshot, decl: ListenerDeclaration) -> float | None:
    """When the waiting events' window closes (debounced: once the newest has been quiet), None if none wait."""
    if snap.oldest_at is None:
        return None
    return window_close(snap.oldest_at, snap.newest_at, Declared(**lane_timing(decl)))


def _run_slot_wait(snap: LaneSnapshot, decl: ListenerDeclaration, limits: Limits) -> Wait | None:
    """Why a batch that would start a run cannot take one of its lane's slots now, or None when it can."""
    cap = lane_run_slots(decl, limits) or 1
    if len(snap.runs) >= cap:
        waiting = [r for r in snap.runs if r.due_at is not None]
        if waiting and len(waiting) == len(snap.runs):
            first = min(waiting, key=lambda r: r.due_at or 0.0)
            return Wait("retry_waiting", first.due_at, run=first)
        running = [r for r in snap.runs if r.due_at is None]
        return Wait("slot_held", None, run=running[0] if running else None)
    return None


def _key_slot_wait(snap: LaneSnapshot, decl: ListenerDeclaration, limits: Limits) -> Wait | None:
    """Why a keyed listener's batch that would start a run cannot take a key slot now, or None when it can."""
    keyed = decl.concurrency.mode == "keyed"
    if keyed and snap.key_slot != "held" and snap.keys_held >= effective_max_parallel(decl.concurrency, limits):
        return Wait("queued_for_key_slot", None, queue_for_key_slot=snap.key_slot is None)
    return None


def _leaves_key_slot(snap: LaneSnapshot) -> bool:
    """Whether a lane with no run to start gives back what it has of the key slots: its place in the queue, or
    a slot no run of its holds."""
    return snap.key_slot == "queued" or (snap.key_slot == "held" and not snap.runs)


def throttle_wait(
    snap: LaneSnapshot, decl: ListenerDeclaration, keys: tuple[str | None, ...], now: float, run: HeldSlot | None = None
) -> Wait | None:
    """The wait of a batch of these keys that the listener's throttle holds (None: it may go). A lane held so
    gives back a key slot it holds with no run, and leaves the queue for one: it could not use a slot handed to
    it before the throttle lets it go, and another key could."""
    if decl.throttle is None:
        return None
    until = held_until(keys, snap.throttle_free_at, now)
    if until is None:
        return None
    return Wait("throttled", until, give_back_key_slot=_leaves_key_slot(snap), run=run)


def repeat_keys(snap: LaneSnapshot, run: HeldSlot, decl: ListenerDeclaration | None) -> tuple[str, ...]:
    """The throttle's keys a run's repeat counts under: those its batch was counted under (a batch taken before
    the listener had a throttle counts under its one key when it has no `key`, and under none otherwise)."""
    past = snap.repeat
    if past is not None and past.run is not None and past.run.run_key == run.run_key and past.batch.throttle_keys:
        return past.batch.throttle_keys
    if decl is not None and decl.throttle is not None and decl.throttle.key is None:
        return (UNKEYED,)
    return ()


def _after_runs(snap: LaneSnapshot) -> Wait:
    """Nothing of the lane's own waits: what it waits for is its runs' (a repeat's due time, or none). A key
    slot it was handed and has no run for goes back, and a place in the queue for one it has nothing left to use
    on is left (a replay it queued for, dropped once its listener was deleted)."""
    due = [r.due_at for r in snap.runs if r.due_at is not None]
    if due:
        first = min(snap.runs, key=lambda r: r.due_at if r.due_at is not None else float("inf"))
        return Wait("retry_waiting", min(due), run=first)
    return Wait("nothing", give_back_key_slot=_leaves_key_slot(snap))


def next_move(snap: LaneSnapshot, now: float, limits: Limits) -> Move | Wait:
    """The lane's next move, or why it waits (from counts and times only: no envelope is read)."""
    if snap.claimed is not None:
        return FinishClaimed()
    listener = snap.listener
    if listener is not None and listener.paused:
        return Wait("paused")
    decl = listener.declaration if listener is not None else None
    due = [r for r in snap.runs if r.due_at is not None and r.due_at <= now]
    if due:
        run = min(due, key=lambda r: r.due_at or 0.0)
        if decl is not None and (held := throttle_wait(snap, decl, repeat_keys(snap, run, decl), now, run)):
            return held
        return StartRepeat(run)
    runs = decl is not None and isinstance(decl.action, WorkflowAction)
    if snap.replay is not None:
        if decl is None:
            return DropReplay()
        if runs and (blocked := _run_slot_wait(snap, decl, limits)) is not None:
            return blocked
        # A replay read without its events says nothing of their keys: the full read the driver makes to take
        # it does.
        keys = tuple(q.throttle_key for q in snap.replay.events)
        if (held := throttle_wait(snap, decl, keys, now)) is not None:
            return held
        if runs and (blocked := _key_slot_wait(snap, decl, limits)) is not None:
            return blocked
        return TakeReplay()
    if snap.pending == 0:
        return _after_runs(snap)
    if decl is None:
        return TakeBatch()  # deleted since its events were routed: consumed, nobody to report to
    # Slots before the window: a lane whose slots are taken waits for whoever frees one (a run's end drives
    # it), not for its window, which would wake it only to find its slot still held.
    if runs and (blocked := _run_slot_wait(snap, decl, limits)) is not None:
        return blocked
    closes = window_closes_at(snap, decl)
    # The throttle before a key slot (a lane it holds would hold a slot it cannot use), unless the window closes
    # later anyway: the lane waits for that, and is judged again then.
    held = throttle_wait(snap, decl, (snap.throttle_head,), now)
    if held is not None and (closes is None or held.until is None or closes <= held.until):
        return held
    if runs and (blocked := _key_slot_wait(snap, decl, limits)) is not None:
        return blocked
    if closes is not None and now < closes:
        return Wait("window_open" if decl.batch.debounce_seconds is None else "debouncing", closes)
    return TakeBatch()


def step(snap: LaneSnapshot, now: float, limits: Limits, registered: Collection[str] | None = None) -> Decision:
    """What the lane does now: take a batch (or a replay, or a repeat), finish a claimed one, or wait."""
    move = next_move(snap, now, limits)
    if isinstance(move, Wait):
        return move
    if isinstance(move, FinishClaimed):
        assert snap.claimed is not None
        return Finish(snap.claimed)
    if isinstance(move, DropReplay):
        assert snap.replay is not None
        return Drop(snap.replay.id)
    if isinstance(move, StartRepeat):
        return _repeat(snap, move.run, limits, registered)
    if isinstance(move, TakeReplay):
        return _replay(snap, limits, registered)
    return _batch(snap, now, limits, registered)


def _plan(decl: ListenerDeclaration, version: int, depth: int) -> RunPlan | None:
    action = decl.action
    if not isinstance(action, WorkflowAction):
        return None
    return RunPlan(
        workflow=action.workflow,
        input=action.input,
        attempts=decl.retry.attempts if decl.retry else 0,
        delay_seconds=decl.retry.delay_seconds if decl.retry else 0.0,
        receipt=decl.receipt.alias if decl.receipt else None,
        version=version,
        depth=depth,
        keyed=decl.concurrency.mode == "keyed",
        priority=decl.priority,
        task_queue=action.task_queue,
    )


def _known(registered: Collection[str] | None, plan: RunPlan | None) -> Collection[str] | None:
    """The workflows a run's start is checked against: the platform worker's, for a run on its task queue; none
    for a run on a queue the action names, whose worker (of any language) tells the platform nothing."""
    return registered if plan is None or plan.task_queue is None else None


def _key_slot(snap: LaneSnapshot, decl: ListenerDeclaration | None, acts: bool) -> KeyMove:
    """A keyed listener's slot across keys: taken for a run, given back when the lane was handed one it no
    longer needs. A lane whose listener is no longer keyed (re-saved, deleted) leaves the queue or slot it had,
    but a slot a run of its still holds: that run's end gives it back (a listener saved keyed again meanwhile
    would otherwise run one key more than `max_parallel`)."""
    if decl is None or decl.concurrency.mode != "keyed" or not isinstance(decl.action, WorkflowAction):
        return "give_back" if _leaves_key_slot(snap) else None
    held = snap.key_slot == "held"
    if acts:
        return "keep" if held else "take"
    return "give_back" if held else None


def _taking(
    snap: LaneSnapshot,
    kind: Kind,
    consumed: tuple[int, ...],
    entries: tuple[Queued, ...],
    limits: Limits,
    registered: Collection[str] | None,
    *,
    replay_number: int = 0,
    replay_of: int | None = None,
    replay_id: int | None = None,
) -> Take:
    listener = snap.listener
    first = min(consumed)
    run_key = run_key_of(snap.address.workflow_id, first, replay_number)
    depth = depth_of(entries) if entries else 0
    if listener is None:
        verdict: Verdict = CONSUME
        plan = None
    else:
        decl = listener.declaration
        plan = _plan(decl, listener.version, depth)
        verdict = batch_verdict(
            snap, decl, entries, depth, limits, _known(registered, plan), plan.workflow if plan else None
        )
    acts = isinstance(verdict, Act)
    throttled = acts and listener is not None and listener.declaration.throttle is not None
    return Take(
        kind=kind,
        consumed=consumed,
        entries=entries,
        retry=0,
        verdict=verdict,
        depth=depth,
        run_key=run_key,
        execution_id=execution_id_of(run_key, 0),
        replay_number=replay_number,
        replay_of=replay_of,
        replay_id=replay_id,
        plan=plan if acts else None,
        key_slot=_key_slot(snap, listener.declaration if listener else None, acts and plan is not None),
        counted=acts,
        throttle_keys=tuple(sorted({q.throttle_key for q in entries if q.throttle_key is not None}))
        if throttled
        else (),
    )


def _batch(snap: LaneSnapshot, now: float, limits: Limits, registered: Collection[str] | None) -> Take | Wait:
    if snap.listener is None:
        consumed = tuple(q.id for q in snap.waiting)
        if not consumed:
            return Wait("nothing")
        return _taking(snap, "batch", consumed, (), limits, registered)
    decl = snap.listener.declaration
    waiting = snap.waiting if decl.throttle is None else free_prefix(snap.waiting, snap.throttle_free_at, now)
    if snap.waiting and not waiting:
        held = throttle_wait(snap, decl, (snap.waiting[0].throttle_key,), now)
        return held if held is not None else Wait("nothing")
    taken = _cut_accepted(waiting, decl)
    if taken is None:
        return Wait("nothing")
    return _taking(snap, "batch", tuple(taken.consumed), tuple(taken.entries), limits, registered)


def _cut_accepted(waiting: Sequence[Queued], decl: ListenerDeclaration) -> Cut[Queued] | None:
    """The batch a re-saved listener takes (SPEC 3: a new version replaces the old one for every later batch):
    its entries, `max_events`, `distinct_by` and byte budget are of the events it takes now; those it no longer
    takes among them are consumed with no entry. With none it takes, the whole cut goes, to be skipped
    `unmatched`."""
    distinct = decl.batch.distinct_by is not None
    accepted = [q for q in waiting if q.accepted]
    if len(accepted) == len(waiting) or not accepted:
        return cut(waiting, decl.batch.max_events, distinct)
    taken = cut(accepted, decl.batch.max_events, distinct)
    assert taken is not None
    # Still a prefix of what waits: everything before the first event it takes that the batch leaves.
    left = next((q.id for q in accepted if q.id > taken.through), None)
    consumed = [q.id for q in waiting if left is None or q.id < left]
    return Cut(taken.entries, consumed)


def _replay(snap: LaneSnapshot, limits: Limits, registered: Collection[str] | None) -> Take | Drop:
    replay = snap.replay
    assert replay is not None and snap.listener is not None
    if not replay.events:
        return Drop(replay.id)  # its events are gone
    decl = snap.listener.declaration
    taken = cut(replay.events, decl.batch.max_events, decl.batch.distinct_by is not None, UNBOUNDED_BYTES)
    assert taken is not None
    entries = tuple(taken.entries)
    # A replay consumes all its events, whatever `distinct_by` leaves as entries.
    consumed = tuple(q.id for q in replay.events)
    return _taking(
        snap,
        "replay",
        consumed,
        entries,
        limits,
        registered,
        replay_number=replay.number,
        replay_of=replay.replay_of,
        replay_id=replay.id,
    )


def _repeat(snap: LaneSnapshot, run: HeldSlot, limits: Limits, registered: Collection[str] | None) -> Take | Wait:
    """A failed run's repeat is a batch of its own (same events, retry n+1) that passes the guards again; it
    runs the workflow its batch was given, in the slot the failed run held."""
    past = snap.repeat
    if past is None or past.run is None or past.run.run_key != run.run_key:
        # Due by `now` (a lane's clock ahead of the database's) but not yet read with its batch: look again.
        return Wait("retry_waiting", run.due_at, run=run)
    entries, original = past.entries, past.batch
    retry = run.retry + 1
    plan = run.plan
    if snap.listener is None:
        verdict: Verdict = CONSUME  # deleted during the wait: nobody to report to
    else:
        decl = snap.listener.declaration
        verdict = batch_verdict(snap, decl, entries, plan.depth, limits, _known(registered, plan), plan.workflow)
    acts = isinstance(verdict, Act)
    decl_now = snap.listener.declaration if snap.listener is not None else None
    throttled = acts and decl_now is not None and decl_now.throttle is not None
    return Take(
        kind="repeat",
        consumed=original.event_ids,
        entries=entries,
        retry=retry,
        verdict=verdict,
        depth=plan.depth,
        run_key=run.run_key,
        execution_id=execution_id_of(run.run_key, retry),
        replay_number=original.replay,
        replay_of=original.replay_of,
        plan=plan if acts else None,
        key_slot=("keep" if acts else "give_back") if plan.keyed else None,
        counted=acts,
        throttle_keys=repeat_keys(snap, run, decl_now) if throttled else (),
    )


def run_end(run: HeldSlot, status: str) -> RunEnd:
    """A run's end: a failed run with attempts left holds its slot until its repeat is due; any other end
    releases it (a keyed listener's key slot goes to the lane that has waited longest)."""
    plan = run.plan
    if status == "failed" and run.retry < plan.attempts:
        return RunEnd(repeat_in=retry_delay(plan.delay_seconds, run.retry))
    return RunEnd(repeat_in=None, gave_up=status == "failed")


def take_of_claimed(snap: LaneSnapshot) -> Take:
    """A batch a dead driver left claimed, as the `Take` it was recorded from: acted on with its own verdict."""
    assert snap.claimed is not None
    past = snap.claimed
    batch, run = past.batch, past.run
    run_key = batch.run_key or run_key_of(snap.address.workflow_id, batch.first_id, batch.replay)
    kind: Kind = "repeat" if batch.retry else ("replay" if batch.replay else "batch")
    plan = run.plan if run is not None and isinstance(batch.verdict, Act) else None
    # A batch keeps a run's key only when it planned one. Its run has ended when the run's slot is gone, waits for
    # a repeat (that attempt failed), or went on to a later attempt: then nothing is started again (a start of an
    # ended run is refused by Temporal only while it remembers the run).
    ran = (
        isinstance(batch.verdict, Act)
        and batch.run_key is not None
        and (run is None or run.due_at is not None or run.retry != batch.retry)
    )
    depth = plan.depth if plan is not None else depth_of(past.entries)
    return Take(
        kind=kind,
        consumed=batch.event_ids,
        entries=past.entries,
        retry=batch.retry,
        verdict=batch.verdict,
        depth=depth,
        run_key=run_key,
        execution_id=execution_id_of(run_key, batch.retry),
        replay_number=batch.replay,
        replay_of=batch.replay_of,
        plan=plan,
        key_slot=None,
        counted=False,
        ran=ran,
    )


__all__ = ["ACT", "HeldSlot", "RunPlan", "next_move", "run_end", "step", "take_of_claimed", "window_closes_at"]
