"""The missions app's workflows: each looks at what changed, reads the current state, writes what follows.

Both read and write their session through the run-side SDK (`RunSession`), so every write carries the
run's `source.listener` (a listener never wakes on its own writes) and is written once however often the
activity or the batch is retried.

`Orchestrator` (started by `orchestrate`) reads the missions its batch points at, or every mission on a
sweep, and writes each one's status to `views/missions/<id>/status`. A mission object with `"fail": true`
makes the run fail, which is how the demo shows retries and the agent inbox. `Responder` (started by
`respond`, one request at a time per thread) answers each request item with an `assistant` item on the
same thread.
"""

from __future__ import annotations

from typing import Any

from temporalio import workflow
from temporalio.exceptions import ApplicationError

with workflow.unsafe.imports_passed_through():
    from orchestrator.sdk import RunInput, RunSession

SWEEP_ALIAS = "app/missions/sweep"
# A schedule writes the clock; a tick is a sweep that nobody asked for, in the same lane as every change.
CLOCK_ALIAS = "ops/clock"
# A page of thread items while looking for a request; most threads fit in one.
PAGE = 1000


def changed_missions(messages: list[dict[str, Any]]) -> list[str] | None:
    """The ids of the missions a batch points at, or None (all of them) for a sweep or a tick."""
    ids: dict[str, None] = {}
    for message in messages:
        # A graph change points at the nodes it changed; nodes named like aliases (`missions/1/cells/a`) say
        # which missions they belong to.
        if message["type"] == "graph.changed":
            places = list(message.get("nodes") or [])
        else:
            places = [message.get("alias") or ""]
        for place in places:
            if place in (SWEEP_ALIAS, CLOCK_ALIAS):
                return None
            if place.startswith("missions/"):
                ids[place.split("/")[1]] = None
    return sorted(ids)


def mission_status(mission: str, objects: dict[str, Any]) -> dict[str, Any]:
    """A mission's status summary: its own state and how many of its cells are done."""
    meta = objects.get(f"missions/{mission}/meta", {})
    cells = [value for alias, value in objects.items() if alias.endswith("/meta") and "/cells/" in alias]
    return {
        "type": "mission_status",
        "mission": mission,
        "state": meta.get("state", "gone" if not objects else "unknown"),
        "cells": len(cells),
        "cells_done": sum(1 for cell in cells if cell.get("state") == "done"),
    }


@workflow.defn(name="orchestrator")
class Orchestrator:
    @workflow.run
    async def run(self, run: RunInput) -> list[str]:
        session = RunSession(run)
        wanted = changed_missions(run.batch.messages)
        missions: dict[str, dict[str, Any]] = {}
        for obj in await session.list_objects("missions/"):
            missions.setdefault(obj["alias"].split("/")[1], {})[obj["alias"]] = obj["value"]
        names = sorted(missions) if wanted is None else wanted
        for name in names:
            if any(value.get("fail") for value in missions.get(name, {}).values()):
                raise ApplicationError(f"mission {name} asks to fail", non_retryable=True)
        for name in names:
            await session.write_object(f"views/missions/{name}/status", mission_status(name, missions.get(name, {})))
        return names


async def find_item(session: RunSession, thread: str, item_id: str) -> dict[str, Any] | None:
    """The item `item_id` of `thread`, or None if it is not there."""
    after = None
    while True:
        page = await session.list_thread_items(thread, after=after, limit=PAGE)
        found = next((item for item in page if item["id"] == item_id), None)
        if found is not None or len(page) < PAGE:
            return found
        after = page[-1]["id"]


@workflow.defn(name="responder")
class Responder:
    @workflow.run
    async def run(self, run: RunInput) -> list[str]:
        session = RunSession(run)
        answered = []
        for message in await session.batch_messages():
            thread, request_id = message["alias"], message["item_id"]
            request = await find_item(session, thread, request_id)
            if request is None:
                raise ApplicationError(f"no item {request_id} on {thread}", non_retryable=True)
            reply = {
                # One answer per request: the item id says which request it answers, whichever run posts it.
                "id": f"reply-{request_id}",
                "type": "text",
                "role": "assistant",
                "message": f"On it: {request.get('message') or '(no message)'}",
                "metadata": {"in_reply_to": request_id},
            }
            answered.append((await session.post_thread_item(thread, reply))["id"])
        return answered
