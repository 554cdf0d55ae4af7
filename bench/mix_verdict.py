"""The production mix's accounting: did every acknowledged write reach exactly the runs it should, and how soon.

As `bench.fault_soak` judges `crash_runs`, this judges `mix_runs` (each run's batch, start and end, written by the
run itself): every event of the mix's types is expected in a run of each listener whose filter takes it (serial
and parallel: all three kinds; keyed: the facts and the captured rows), and in no run of another. Beside that:
each acknowledged event is in the stream and each acknowledged row in its table with one event, no serial or
keyed lane ran two batches at once, no session ran more keyed runs than their slots, and the latency from an
event's commit (its `created_at`) to the start of the first run that took it, per listener and kind.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import asyncpg

from bench.mix_app import ALL_KINDS, KEYED, KEYED_KINDS, PARALLEL, SERIAL

MATCHES = {SERIAL: ALL_KINDS, KEYED: KEYED_KINDS, PARALLEL: ALL_KINDS}
KEY_SLOTS = 4
KIND_OF = {"object.written": "single", "mix.fact": "bulk", "mixrow.created": "captured"}

EXPECTED_SQL = """
SELECT l.name AS listener, e.id, e.type, e.created_at
FROM orchestrator.events e JOIN unnest($1::text[], $2::text[]) AS l(name, type) ON e.type = l.type
WHERE e.type <> 'object.written' OR e.alias LIKE 'mix/%'
"""

COVERED_SQL = """
SELECT listener, id, min(started_at) AS first_start, count(*) AS runs
FROM public.mix_runs, unnest(event_ids) AS id GROUP BY 1, 2
"""

# Both sides of the comparison as tables of their own, analyzed, before they are joined: with the covered side a
# subquery over `unnest`, PostgreSQL guessed a few hundred rows for it and joined the two on the listener alone,
# filtering by id, one pass over a listener's every run-event for each expected event (an hour's run of 1.7
# million events did not finish in ten minutes). Made in the caller's transaction, dropped at its end.
FIGURES_SQL = """
SELECT x.listener, x.type, count(*) AS expected, count(c.id) AS reached, coalesce(sum(c.runs - 1), 0) AS twice,
       percentile_cont(ARRAY[0.5, 0.99, 0.999]) WITHIN GROUP
           (ORDER BY extract(epoch FROM c.first_start - x.created_at)) AS latency
FROM mix_expected x LEFT JOIN mix_covered c ON c.listener = x.listener AND c.id = x.id
GROUP BY 1, 2
"""

MISSING_SQL = """
SELECT x.listener, x.id FROM mix_expected x LEFT JOIN mix_covered c ON c.listener = x.listener AND c.id = x.id
WHERE c.id IS NULL ORDER BY 2 LIMIT 20
"""

MISSING_COUNT_SQL = """
SELECT count(*) FROM mix_expected x LEFT JOIN mix_covered c ON c.listener = x.listener AND c.id = x.id
WHERE c.id IS NULL
"""

# Events a run took that its listener's filter does not (or that are not the mix's at all).
EXTRA_SQL = """
SELECT count(*) FROM mix_covered c LEFT JOIN mix_expected x ON c.listener = x.listener AND c.id = x.id
WHERE x.id IS NULL
"""


async def compare(conn: asyncpg.Connection) -> None:
    """`mix_expected` and `mix_covered`, filled and analyzed, for the rest of the caller's transaction."""
    names, types = _types()
    await conn.execute(
        "CREATE TEMP TABLE mix_expected (listener text, id bigint, type text, created_at timestamptz) ON COMMIT DROP"
    )
    await conn.execute("INSERT INTO mix_expected " + EXPECTED_SQL, names, types)
    await conn.execute(
        "CREATE TEMP TABLE mix_covered (listener text, id bigint, first_start timestamptz, runs bigint) ON COMMIT DROP"
    )
    await conn.execute("INSERT INTO mix_covered " + COVERED_SQL)
    await conn.execute("ANALYZE mix_expected")
    await conn.execute("ANALYZE mix_covered")


# A serial or keyed lane's run that started before an earlier run of the lane had ended (a run not ended counts
# as in flight): by window, not by pairs, so a lane of thousands of runs costs one sort.
OVERLAPS_SQL = """
SELECT count(*) FROM (
    SELECT started_at, max(coalesce(ended_at, 'infinity')) OVER (
        PARTITION BY listener, session_id, lane ORDER BY started_at, execution_id
        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS busy_until
    FROM public.mix_runs WHERE listener = ANY($1::text[])
) r WHERE started_at < busy_until
"""

# The most keyed runs in flight at once in one session, by a sweep over starts (+1) and ends (-1).
KEYED_PEAK_SQL = """
SELECT coalesce(max(running), 0) FROM (
    SELECT sum(d) OVER (PARTITION BY session_id ORDER BY at, d) AS running FROM (
        SELECT session_id, started_at AS at, 1 AS d FROM public.mix_runs WHERE listener = $1
        UNION ALL
        SELECT session_id, ended_at, -1 FROM public.mix_runs WHERE listener = $1 AND ended_at IS NOT NULL
    ) points
) sweep
"""

ACKED_SQL = """
SELECT (SELECT count(*) FROM mix_acked a WHERE NOT EXISTS (SELECT 1 FROM orchestrator.events e WHERE e.id = a.id)),
       (SELECT count(*) FROM mix_acked_rows a WHERE NOT EXISTS (SELECT 1 FROM public.mix_rows r WHERE r.id = a.id)),
       (SELECT count(*) FROM public.mix_rows r FULL JOIN (
            SELECT (data->>'_id')::bigint AS id, count(*) AS n FROM orchestrator.events
            WHERE type = 'mixrow.created' GROUP BY 1) e ON e.id = r.id
        WHERE r.id IS NULL OR e.id IS NULL OR e.n <> 1)
"""


@dataclass
class KindFigures:
    expected: int
    reached: int
    twice: int
    p50: float
    p99: float
    p999: float


@dataclass
class Verdict:
    figures: dict[tuple[str, str], KindFigures] = field(default_factory=dict)
    missing: int = 0
    missing_first: list[tuple[str, int]] = field(default_factory=list)
    extra: int = 0
    open_runs: int = 0
    runs: dict[str, int] = field(default_factory=dict)
    overlaps: int = 0
    keyed_peak: int = 0
    acked_not_in_stream: int = 0
    acked_rows_not_in_table: int = 0
    rows_without_one_event: int = 0
    queued: int = 0

    @property
    def sound(self) -> bool:
        return not (
            self.missing
            or self.extra
            or self.open_runs
            or self.overlaps
            or self.keyed_peak > KEY_SLOTS
            or self.acked_not_in_stream
            or self.acked_rows_not_in_table
            or self.rows_without_one_event
        )


def _types() -> tuple[list[str], list[str]]:
    pairs = [(name, kind) for name, kinds in MATCHES.items() for kind in kinds]
    return [p[0] for p in pairs], [p[1] for p in pairs]


async def caught_up(database_url: str) -> bool:
    """Whether every matching event has reached a run and every run has ended. The whole count (seconds of
    PostgreSQL's CPU once the runs are many) is taken only once no lane holds a waiting event and no run is
    open, so waiting for the platform does not load the database it measures."""
    conn = await asyncpg.connect(database_url, timeout=10)
    try:
        busy = await conn.fetchval(
            "SELECT EXISTS (SELECT 1 FROM orchestrator.lane_queue)"
            " OR EXISTS (SELECT 1 FROM public.mix_runs WHERE ended_at IS NULL)"
        )
        if busy:
            return False
        async with conn.transaction():
            await compare(conn)
            return int(await conn.fetchval(MISSING_COUNT_SQL)) == 0
    finally:
        await conn.close()


async def judge(database_url: str, acked_events: list[int], acked_rows: list[int]) -> Verdict:
    conn = await asyncpg.connect(database_url, timeout=10)
    try:
        verdict = Verdict()
        transaction = conn.transaction()
        await transaction.start()
        await compare(conn)
        for r in await conn.fetch(FIGURES_SQL):
            p50, p99, p999 = r["latency"] or (float("nan"),) * 3
            verdict.figures[(r["listener"], KIND_OF[r["type"]])] = KindFigures(
                r["expected"], r["reached"], int(r["twice"]), p50, p99, p999
            )
        verdict.missing = int(await conn.fetchval(MISSING_COUNT_SQL))
        verdict.missing_first = [(r[0], r[1]) for r in await conn.fetch(MISSING_SQL)]
        verdict.extra = int(await conn.fetchval(EXTRA_SQL))
        await transaction.commit()
        verdict.open_runs = int(await conn.fetchval("SELECT count(*) FROM public.mix_runs WHERE ended_at IS NULL"))
        verdict.runs = {r[0]: r[1] for r in await conn.fetch("SELECT listener, count(*) FROM mix_runs GROUP BY 1")}
        verdict.overlaps = int(await conn.fetchval(OVERLAPS_SQL, [SERIAL, KEYED]))
        verdict.keyed_peak = int(await conn.fetchval(KEYED_PEAK_SQL, KEYED))
        verdict.queued = int(await conn.fetchval("SELECT count(*) FROM orchestrator.lane_events"))
        await conn.execute("CREATE TEMP TABLE mix_acked (id bigint)")
        await conn.execute("CREATE TEMP TABLE mix_acked_rows (id bigint)")
        await conn.copy_records_to_table("mix_acked", records=[(i,) for i in acked_events])
        await conn.copy_records_to_table("mix_acked_rows", records=[(i,) for i in acked_rows])
        counts = await conn.fetchrow(ACKED_SQL)
        assert counts is not None
        verdict.acked_not_in_stream, verdict.acked_rows_not_in_table, verdict.rows_without_one_event = counts
        return verdict
    finally:
        await conn.close()
