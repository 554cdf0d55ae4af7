"""Which lane of a listener an event falls in, and the Temporal workflow id of that lane.

Owns lane keying (SPEC section 3, concurrency); how many lanes may run at once is the engine's. Serial
and parallel listeners have one lane, `ONLY_LANE_KEY`. A keyed listener has a lane per key value; an
event whose key path is missing falls in the shared lane `SHARED_LANE_KEY` (a key whose value is the text
`~` shares it, which merges two lanes but loses nothing). Workflow ids keep a readable key when it is
short and plain; anything longer than `MAX_READABLE_KEY_CHARS` or holding other characters is replaced by
a sha256 prefix (32 hex digits, 128 bits: collisions are not a concern), marked by `#` so it can never
collide with a readable key.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from orchestrator.core.declaration import Concurrency
from orchestrator.core.envelope_paths import resolve_in_event
from orchestrator.core.paths import MISSING, canonical_json

ONLY_LANE_KEY = "_"
SHARED_LANE_KEY = "~"
MAX_READABLE_KEY_CHARS = 100
_READABLE_KEY = re.compile(r"[A-Za-z0-9_./:@~-]+")


def key_text(value: Any) -> str:
    """A key value as text: strings as they are, everything else as compact, sorted JSON."""
    return value if isinstance(value, str) else canonical_json(value)


def lane_key(concurrency: Concurrency, envelope: dict[str, Any]) -> str:
    """The lane key of an envelope under a listener's concurrency."""
    if concurrency.mode != "keyed" or concurrency.key is None:
        return ONLY_LANE_KEY
    value = resolve_in_event(envelope, concurrency.key)
    if value is MISSING:
        return SHARED_LANE_KEY
    if concurrency.key_segments is not None and isinstance(value, str):
        value = "/".join(value.split("/")[: concurrency.key_segments])
    return key_text(value)


def safe_key(key: str) -> str:
    """The key as it appears in a workflow id: itself when short and plain, else `#` and a sha256 prefix."""
    if len(key) <= MAX_READABLE_KEY_CHARS and _READABLE_KEY.fullmatch(key):
        return key
    return "#" + hashlib.sha256(key.encode("utf-8")).hexdigest()[:32]


def lane_workflow_id(session_id: str, listener: str, key: str) -> str:
    """The stable workflow id of one lane: `lane:{session}:{listener}:{key}`."""
    return f"lane:{session_id}:{listener}:{safe_key(key)}"


def run_key_of(lane_workflow_id: str, first_id: int, replay: int = 0) -> str:
    """A batch's run, the same across its repeats: the lane's id with the batch's first event id (a replay's is
    told apart by its number)."""
    return "run" + lane_workflow_id.removeprefix("lane") + f":{first_id}" + (f":r{replay}" if replay else "")


def execution_id_of(run_key: str, retry: int) -> str:
    """The execution of a run's attempt `retry` (0 for the first)."""
    return run_key.replace("run:", "exe:", 1) + f".{retry}"
