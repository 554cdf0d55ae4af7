"""The world on the in-memory twin (`MemoryLaneStore`), read straight from its dicts."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from orchestrator.core.lane_snapshot import LaneAddress
from orchestrator.lanes.executions import ExecutionRecords
from orchestrator.store.lane_store import LaneStore
from orchestrator.store.lanes_memory import MemoryLaneStore
from tests.lane_worlds.held import BatchRow, EventRow, ExecutionRow, Held, LaneRow, RunRow


class MemoryWorld:
    """The in-memory twin. Its clock stands still between advances (`frozen_at`), or runs with the wall clock
    as PostgreSQL's does."""

    def __init__(self, frozen_at: float | None = None) -> None:
        self._frozen = frozen_at is not None
        self._t = frozen_at if frozen_at is not None else 0.0
        self.store = MemoryLaneStore(self.now)
        self.lanes: LaneStore = self.store
        self.records: ExecutionRecords = self.store
        self.sessions = 0

    def now(self) -> float:
        return self._t if self._frozen else time.time() + self._t

    async def advance(self, seconds: float) -> None:
        self._t += seconds

    async def open_session(self) -> str:
        self.sessions += 1
        session_id = f"ses_{self.sessions}"
        self.store.open_session(session_id)
        return session_id

    async def close_session(self, session_id: str) -> None:
        self.store.close_session(session_id)

    async def mark_deleting(self, session_id: str) -> None:
        self.store.sessions[session_id]["status"] = "deleting"

    async def write(self, session_id: str, alias: str) -> int:
        return self.store.append(session_id, "object.written", alias=alias, data={"rev": 1})

    async def save_listener(self, body: dict[str, Any], delay_seconds: float = 0.0) -> int:
        return self.store.save_listener(body, effective_at=self.now() + delay_seconds)

    async def delete_listener(self, name: str) -> None:
        self.store.delete_listener(name)

    async def switch(self, session_id: str, name: str, enabled: bool) -> None:
        if enabled:
            self.store.switched_off.discard((session_id, name))
        else:
            self.store.switched_off.add((session_id, name))

    async def pause(self, name: str) -> None:
        self.store.pauses.add((name, None))

    async def resume(self, name: str) -> None:
        self.store.pauses.discard((name, None))

    async def ask_replay(self, lane_id: int, event_ids: Sequence[int], replay_of: int | None) -> None:
        self.store.ask_replay(lane_id, tuple(event_ids), replay_of)

    async def versions(self) -> list[dict[str, Any]]:
        return [
            {"name": name, "version": v, "effective_at": datetime.fromtimestamp(at, UTC).isoformat(), "body": body}
            for name, versions in sorted(self.store.listeners.items())
            for v, at, body in versions
        ]

    async def position(self, session_id: str) -> int:
        return self.store.cursors.get(session_id, 0)

    async def held(self) -> Held:
        s = self.store
        return Held(
            lanes={
                x.id: LaneRow(
                    x.id,
                    x.session_id,
                    x.listener,
                    x.lane,
                    x.workflow_id,
                    x.routed_through,
                    x.fired_through,
                    frozenset(x.queue),
                )
                for x in s.lanes.values()
            },
            batches={
                b.id: BatchRow(
                    b.id,
                    b.lane_id,
                    b.first_id,
                    b.last_id,
                    b.event_ids,
                    b.retry,
                    b.replay,
                    b.state,
                    b.counted,
                    b.created_at,
                    b.run_key,
                    b.verdict,
                    b.throttle_keys,
                )
                for b in s.batches.values()
            },
            runs={
                r.run_key: RunRow(r.run_key, r.lane_id, r.batch_id, r.execution_id, r.retry, r.due_at)
                for r in s.runs.values()
            },
            key_slots={k.lane_id: k.holding for k in s.key_slots.values()},
            executions={
                x.id: ExecutionRow(x.id, x.status, x.error, x.listener, x.run_key, x.batch)
                for x in s.executions.values()
            },
            events={
                e.id: EventRow(e.id, e.envelope["type"], e.committed, (e.envelope.get("execution") or {}).get("id"))
                for e in s.events.values()
            },
            outcomes={(listener, key): str(o["status"]) for (_, listener, key), o in s.outcomes.items()},
            replays=len(s.replays),
            unrouted=sum(1 for e in s.events.values() if e.id > s.cursors.get(e.session_id, 0)),
            released=Counter(s.released),
        )

    async def queue_rows(self, where: LaneAddress) -> list[int]:
        lane = next(
            (
                x
                for x in self.store.lanes.values()
                if (x.session_id, x.listener, x.lane) == (where.session_id, where.listener, where.lane)
            ),
            None,
        )
        return [] if lane is None else sorted(lane.queue)

    async def backdate_nudges(self, seconds: float) -> None:
        for lane in self.store.lanes.values():
            lane.nudged_at -= seconds

    async def backdate_oldest_fire(self, seconds: float) -> None:
        oldest = min((b for b in self.store.batches.values() if b.counted), key=lambda b: b.id)
        oldest.created_at -= seconds

    async def postdate_newest_fire(self, seconds: float) -> None:
        newest = max((b for b in self.store.batches.values() if b.counted), key=lambda b: b.id)
        newest.created_at += seconds

    async def close(self) -> None:
        pass
