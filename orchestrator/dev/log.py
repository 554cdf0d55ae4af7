"""What `orchestrator dev` prints while it runs: one line per batch and one per run's end.

Owns reading the lane driver's own log records (`batch` and `run_end`, with their fields) and writing them
as terminal lines: the time, the listener, the lane, the batch's events, its outcome and the run it
started; a run's end with its status, how long it ran and its error; and `shown`, how text that writers chose (a
lane's key, an item's role, an error) is put on a terminal line, its control characters escaped, which `status`
and `events` use too. The driver logs them at INFO whatever
runs it; this handler is attached only under `orchestrator dev` (not with `--quiet`), and the process's
other handlers keep showing warnings only. A run that started before this process did ends without a
duration.
"""

from __future__ import annotations

import logging
import time
import unicodedata
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

# The lane driver's logger, whose `batch` and `run_end` records these lines are made of.
DRIVER_LOGGER = "orchestrator.lanes.driver"
# Runs whose end is still to come, remembered for their duration; far more than a dev machine runs at once.
MAX_RUNS_REMEMBERED = 10_000
ERROR_CHARS = 200


class ActivityLines(logging.Handler):
    """Turns the driver's `batch` and `run_end` records into lines for `write`."""

    def __init__(self, write: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self.write = write
        self._started: dict[str, tuple[float, int]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        try:
            kind = getattr(record, "activity", None)
            # A lane's key and a run's error are what writers chose: shown, never obeyed by the terminal.
            if kind == "batch":
                self.write(shown(self._batch(record)))
            elif kind == "run_end":
                self.write(shown(self._run_end(record)))
        except Exception:
            self.handleError(record)

    def _batch(self, record: logging.LogRecord) -> str:
        fields = record.__dict__
        events = int(fields.get("events") or 0)
        execution = fields.get("execution")
        if execution:
            if len(self._started) >= MAX_RUNS_REMEMBERED:
                self._started.pop(next(iter(self._started)))
            self._started[execution] = (time.monotonic(), events)
        retry = int(fields.get("retry") or 0)
        parts = [
            _clock(record),
            "batch",
            str(fields.get("listener")),
            f"lane {fields.get('lane')}",
            f"{events} event{'s' if events != 1 else ''}" + (f" ({fields['batch']})" if fields.get("batch") else ""),
            str(fields.get("status")) + (f" (retry {retry})" if retry else ""),
        ]
        if execution:
            parts.append(f"run {execution}")
        elif fields.get("reason"):
            parts.append(str(fields["reason"]))
        parts.append(f"session {fields.get('session')}")
        return "  ".join(parts)

    def _run_end(self, record: logging.LogRecord) -> str:
        fields = record.__dict__
        execution = str(fields.get("execution"))
        started = self._started.pop(execution, None)
        parts = [_clock(record), "run  ", str(fields.get("listener") or "-"), f"lane {fields.get('lane') or '-'}"]
        if started is not None:
            events = started[1]
            parts.append(f"{events} event{'s' if events != 1 else ''}")
        status = str(fields.get("status"))
        parts.append(status if started is None else f"{status} in {time.monotonic() - started[0]:.1f} s")
        parts.append(f"run {execution}")
        error = fields.get("error")
        if error:
            parts.append(f"error: {' '.join(str(error).split())[:ERROR_CHARS]}")
        return "  ".join(parts)


def shown(value: Any) -> str:
    """`value` as text on one line of a terminal: a control character the platform stored as written (a line end
    in a role or a lane's key, an escape sequence in a client id, a line or paragraph separator, a bidirectional
    override that would show the line reversed) is written escaped, as `\\n` or `\\x1b`, so one event stays one
    line and nothing stored can move the cursor, recolour the screen or reorder what is read. What only joins or
    shapes characters (an emoji's zero-width joiner) is left as written."""
    text = str(value)
    if text.isprintable():
        return text
    return "".join(repr(c)[1:-1] if _steers(c) else c for c in text)


# Bidirectional embeddings, overrides and isolates: what makes a terminal show a line in another order than stored.
_BIDI_CONTROLS = frozenset("\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _steers(c: str) -> bool:
    return unicodedata.category(c) in ("Cc", "Zl", "Zp") or c in _BIDI_CONTROLS


def _clock(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created).strftime("%H:%M:%S")  # noqa: DTZ006  # the terminal's local time


class _WarningsOnly(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


@contextmanager
def activity_lines(write: Callable[[str], None]) -> Iterator[None]:
    """Print the driver's batches and run ends through `write` while the block runs; the handlers already on
    the root logger go on showing warnings only."""
    driver = logging.getLogger(DRIVER_LOGGER)
    handler = ActivityLines(write)
    quiet = _WarningsOnly()
    root_handlers = list(logging.getLogger().handlers)
    for existing in root_handlers:
        existing.addFilter(quiet)
    level = driver.level
    driver.setLevel(logging.INFO)
    driver.addHandler(handler)
    try:
        yield
    finally:
        driver.removeHandler(handler)
        driver.setLevel(level)
        for existing in root_handlers:
            existing.removeFilter(quiet)
