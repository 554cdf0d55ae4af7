"""The engine's crossings between PostgreSQL and Temporal, named, and a process's death injected at one.

Owns the names of the points where one store holds something the other does not know yet (a run recorded and
not started, started and its batch not finished, ended and the lanes it freed not driven, ...): what a crash
there leaves, and what recovers it, is docs/decisions.md's "Two stores". A process may be made to die at a
point: a test's seeded schedule (`inject`: `Died` is raised there, and nothing after the point runs), or, for
a real process, `ORCHESTRATOR_FAULTS` (`name` to die at its first pass, `name@n` at its nth), which exits at
once with SIGKILL's status and no cleanup. Off unless set: a pass costs one look at a global.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator

log = logging.getLogger(__name__)

POINTS: dict[str, str] = {
    "batch.recorded": "a batch recorded with its run and slots; its run not started, its write not made",
    "run.started": "a batch's run started on Temporal; the batch not finished",
    "write.made": "a write action's object or thread item committed; its batch not finished",
    "batch.finished": "a batch finished; the lanes a slot it freed went to not driven",
    "execution.recorded": "a run of no lane recorded with its input; not started on Temporal",
    "run_end.recorded": "a run's end recorded; its repeat's nudge not sent, the lanes its slot went to not driven",
    "route.saved": "a routing round's queue rows and position saved; its lanes not nudged",
    "cancel.terminated": "a cancelled run terminated on Temporal after its grace; its end not recorded",
    "sweep.reopened": "a run Temporal does not know has its batch claimed again; its lane not driven",
    "replay.recorded": "a replay or redelivery recorded; its lane not nudged",
    "session.marked": "a session marked for deletion; its lanes and runs not yet ended on Temporal",
    "session.ended_on_temporal": "a deleting session's workflows ended on Temporal; its rows not deleted",
    "schedule.written": "a schedule's row written; its Temporal Schedule not created",
    "schedule.performed": "a schedule firing's write made or run started; its result not recorded",
}

# The environment variable a real process reads its fault from (tests/crash; never set in production).
FAULTS_VARIABLE = "ORCHESTRATOR_FAULTS"
# What a process killed by SIGKILL exits with, as its parent sees it from a shell.
KILLED_STATUS = 137


class Died(BaseException):
    """The process died at a crossing: nothing after the point runs. A BaseException, so no `except Exception`
    on the way out mistakes it for a failure of the batch."""


_hook: Callable[[str], None] | None = None


def crossing(name: str) -> None:
    """Pass the named point (dying there, when a fault is injected at it)."""
    if _hook is not None:
        _hook(name)


@contextlib.contextmanager
def inject(hook: Callable[[str], None]) -> Iterator[None]:
    """Call `hook` at every crossing passed while this lasts (it raises `Died` to die there)."""
    global _hook
    previous, _hook = _hook, hook
    try:
        yield
    finally:
        _hook = previous


def dies_at(point: str) -> Callable[[str], None]:
    """A hook for `inject` that dies at `point`, at every pass."""

    def hook(name: str) -> None:
        if name == point:
            raise Died(name)

    return hook


def parse_fault(value: str) -> tuple[str, int]:
    """`name` or `name@n` as (the point, at which pass to die); a point not named above is refused."""
    name, _, nth = value.strip().partition("@")
    if name not in POINTS:
        raise ValueError(f"{FAULTS_VARIABLE}: no crossing {name!r}; the crossings: {', '.join(sorted(POINTS))}")
    if nth and (not nth.isdigit() or int(nth) < 1):
        raise ValueError(f"{FAULTS_VARIABLE}: {value!r}: the pass to die at is a whole number from 1")
    return name, int(nth or 1)


def install_from_environment() -> None:
    """Die at the crossing `ORCHESTRATOR_FAULTS` names, at its nth pass, as a SIGKILL would: no cleanup."""
    value = os.environ.get(FAULTS_VARIABLE)
    if not value:
        return
    name, nth = parse_fault(value)
    passes = 0

    def die_there(point: str) -> None:
        nonlocal passes
        if point != name:
            return
        passes += 1
        if passes == nth:
            log.warning("dying at crossing %s (pass %d), as %s asks", point, passes, FAULTS_VARIABLE)
            sys.stderr.flush()
            os._exit(KILLED_STATUS)

    global _hook
    _hook = die_there
    log.warning("%s is set: this process dies at crossing %s, pass %d", FAULTS_VARIABLE, name, nth)


__all__ = ["FAULTS_VARIABLE", "POINTS", "Died", "crossing", "inject", "install_from_environment", "parse_fault"]
