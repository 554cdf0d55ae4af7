"""`envelope_of`, the router's and the lanes' fast path, answers exactly what the model's `envelope()` does."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from orchestrator.core.events import Event, envelope_of

maybe_text = st.none() | st.text(max_size=5)
json_leaf = st.none() | st.booleans() | st.integers() | st.text(max_size=5)
json_dict = st.dictionaries(st.text(max_size=3), json_leaf, max_size=3)
moments = st.datetimes(
    min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)
) | st.datetimes(min_value=datetime(2000, 1, 1), max_value=datetime(2100, 1, 1), timezones=st.just(UTC)).map(
    lambda d: d.replace(microsecond=0)
)
items = st.none() | st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=4), "type": st.sampled_from(["text", "json"])},
    optional={"role": maybe_text, "message": maybe_text},
)
executions = st.none() | st.fixed_dictionaries(
    {"id": st.text(max_size=4), "workflow": st.text(max_size=4), "status": st.sampled_from(["running", "failed"])}
)
# Causes of every kind, so that the actor derived from them (and from the source) is compared too.
causes = (
    st.none()
    | json_dict
    | st.one_of(
        st.fixed_dictionaries(
            {"request": st.fixed_dictionaries({"id": st.text(max_size=4)}, optional={"key": maybe_text})}
        ),
        st.fixed_dictionaries(
            {"schedule": st.fixed_dictionaries({"alias": maybe_text, "due_at": st.text(max_size=4)})}
        ),
        st.fixed_dictionaries({"execution": st.text(max_size=4)}, optional={"batch": json_dict}),
    )
)


def postgres_text(moment: datetime, offset_hours: int) -> str:
    """A timestamptz as PostgreSQL's JSON writes it: the fraction without its trailing zeros, in the session's
    zone (UTC for the store's connections, another for a database set otherwise)."""
    local = moment.astimezone(timezone(timedelta(hours=offset_hours)))
    text = local.isoformat()
    if "." in text:
        head, tail = text.split(".")
        text = f"{head}.{tail[:6].rstrip('0')}{tail[6:]}".replace(".+", "+").replace(".-", "-")
    return text


sources = st.none() | st.fixed_dictionaries(
    {}, optional={"client": maybe_text, "listener": maybe_text, "execution": maybe_text}
)


@given(
    alias=maybe_text,
    item=items,
    whole=st.none() | json_leaf | json_dict,
    execution=executions,
    source=sources,
    depth=st.integers(min_value=0, max_value=8),
    data=st.none() | json_dict,
    cause=causes,
    graph=st.none() | st.fixed_dictionaries({"nodes": st.lists(st.text(max_size=3), max_size=3)}),
    created=moments,
    as_text=st.sampled_from([None, "python", "postgres"]),
    offset_hours=st.sampled_from([0, 0, 2, -5]),
)
def test_envelope_of_is_the_models_envelope(
    alias: str | None,
    item: dict[str, Any] | None,
    whole: Any,
    execution: dict[str, Any] | None,
    source: dict[str, Any] | None,
    depth: int,
    data: dict[str, Any] | None,
    cause: dict[str, Any] | None,
    graph: dict[str, Any] | None,
    created: datetime,
    as_text: str | None,
    offset_hours: int,
) -> None:
    def stored(found: dict[str, Any] | None) -> dict[str, Any] | None:
        # As `jsonb` hands a value back: its keys in an order of its own (here reversed).
        return None if found is None else dict(reversed(list(found.items())))

    row = {
        "id": 7,
        "session_id": "ses_1",
        "type": "thread.item_posted" if item else "object.written",
        "alias": alias,
        "item": stored(item),
        "whole_message": whole,
        "execution": stored(execution),
        "source": stored(source),
        "depth": depth,
        "data": data,
        "cause": cause,
        "graph": graph,
        "created_at": created
        if as_text is None
        else created.isoformat()
        if as_text == "python"
        else postgres_text(created, offset_hours),
    }
    merged = item if item is None or whole is None else {**item, "message": whole}
    fields = {k: v for k, v in row.items() if k != "whole_message"}
    model = Event.model_validate({**fields, "item": merged, "source": source or {}, "created_at": created})
    # Key for key and in the same order: a template interpolating an envelope prints it as JSON.
    assert json.dumps(envelope_of(row)) == json.dumps(model.envelope())
