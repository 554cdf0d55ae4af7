-- One round of a session's trim, at most `p_limit` rows of each table: its events older than its retention
-- (`p_event` seconds unless its own) that the router has passed and no lane waits on (queued, in a batch not
-- finished, in a batch whose run holds a slot for its repeat, asked for again), then the records behind what
-- is gone: batches and outcomes of events no longer kept (done, holding no slot, past the throttle's minute),
-- runs that ended before the retention, schedule firings recorded before it. Thread items, objects and the
-- graph are the session's state, not its history: they stay. Moves `trimmed_through` on, and `due_at` to when
-- the oldest event kept comes due (its closed retention's end, if sooner; at once when this round was full).
-- Answers the rows deleted by table and `more`.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_trim_session(p_session text, p_limit integer,
    p_event double precision,
                                          p_closed double precision) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    r orchestrator.session_retention%ROWTYPE;
    s orchestrator.sessions%ROWTYPE;
    v_now timestamptz := clock_timestamp();
    v_cutoff timestamptz;
    v_records timestamptz;
    v_routed bigint;
    v_old bigint[];
    v_next bigint[];
    v_through bigint;
    v_kept bigint;
    v_events integer;
    v_batches integer;
    v_outcomes integer;
    v_executions integer;
    v_schedule_runs integer;
    v_more boolean;
    v_due timestamptz;
BEGIN
    SELECT * INTO r FROM orchestrator.session_retention WHERE session_id = p_session;
    SELECT * INTO s FROM orchestrator.sessions WHERE id = p_session;
    IF r.session_id IS NULL OR s.id IS NULL OR s.status = 'deleting' THEN
        RETURN NULL;
    END IF;
    v_cutoff := v_now - make_interval(secs => coalesce(r.event_seconds, p_event));
    -- A batch counts for the throttle for a minute: no record goes younger than that.
    v_records := least(v_cutoff, v_now - interval '60 seconds');
    v_routed := coalesce((SELECT c.routed_event_id FROM orchestrator.routing_cursors c
        WHERE c.session_id = p_session), 0);
    -- Looked at: what a lane held when an earlier trim passed it, and the next events past the mark (ids are in
    -- commit order within a session, so these are its oldest). Both reads stop after `p_limit` rows.
    v_old := ARRAY(SELECT e.id FROM orchestrator.events e WHERE e.session_id = p_session AND e.id >= r.kept_below
                   AND e.id <= r.trimmed_through AND e.created_at < v_cutoff ORDER BY e.id LIMIT p_limit);
    v_next := ARRAY(SELECT x.id FROM (SELECT e.id, e.created_at FROM orchestrator.events e
        WHERE e.session_id = p_session
                                      AND e.id > r.trimmed_through ORDER BY e.id LIMIT p_limit) x
                    WHERE x.created_at < v_cutoff AND x.id <= v_routed);
    -- What a lane waits on, read in the statement that deletes: a batch that takes an event from its queue
    -- commits its queue rows' end and its claim together, so one snapshot sees the event in one or the other.
    WITH held AS (
        SELECT unnest(b.event_ids) AS id FROM orchestrator.lanes l JOIN orchestrator.batches b ON b.lane_id = l.id
            AND b.state = 'claimed'
        WHERE l.session_id = p_session
        UNION SELECT unnest(b.event_ids) FROM orchestrator.lanes l JOIN orchestrator.lane_runs lr ON lr.lane_id = l.id
                                         JOIN orchestrator.batches b ON b.id = lr.batch_id
                                             WHERE l.session_id = p_session
        UNION SELECT unnest(p.event_ids) FROM orchestrator.lanes l JOIN orchestrator.replays p ON p.lane_id = l.id
            WHERE l.session_id = p_session),
    -- The queues' ranges (0032_lane_queue_ranges.sql) that reach into the events looked at, read once.
    queued AS MATERIALIZED (
        SELECT q.first_id, q.last_id FROM orchestrator.lanes l JOIN orchestrator.lane_queue q ON q.lane_id = l.id
        WHERE l.session_id = p_session AND q.first_id <= (SELECT max(x) FROM unnest(v_old || v_next) x)
          AND q.last_id >= (SELECT min(x) FROM unnest(v_old || v_next) x)),
    gone AS (
        DELETE FROM orchestrator.events e WHERE e.id = ANY (v_old || v_next) AND e.session_id = p_session
            AND e.id NOT IN (SELECT h.id FROM held h)
            AND NOT EXISTS (SELECT 1 FROM queued q WHERE q.first_id <= e.id AND q.last_id >= e.id)
        RETURNING e.id)
    SELECT count(*) INTO v_events FROM gone g;
    v_through := greatest(r.trimmed_through, (SELECT max(x) FROM unnest(v_next) x));
    -- The first event left below the mark: none was below the old one but from `kept_below` on.
    v_kept := (SELECT min(e.id) FROM orchestrator.events e WHERE e.session_id = p_session
               AND e.id >= coalesce(r.kept_below, r.trimmed_through + 1) AND e.id <= v_through);
    WITH gone AS (
        DELETE FROM orchestrator.batches WHERE id IN (
            SELECT b.id FROM orchestrator.batches b WHERE b.session_id = p_session AND b.last_id <= v_through
                AND b.state = 'done' AND b.created_at < v_records
                AND NOT EXISTS (SELECT 1 FROM orchestrator.lane_runs lr WHERE lr.batch_id = b.id)
            ORDER BY b.last_id LIMIT p_limit)
        RETURNING 1)
    SELECT count(*) INTO v_batches FROM gone;
    WITH gone AS (
        DELETE FROM orchestrator.outcomes WHERE id IN (
            SELECT o.id FROM orchestrator.outcomes o WHERE o.session_id = p_session AND o.last_id <= v_through
                AND o.created_at < v_records ORDER BY o.last_id LIMIT p_limit)
        RETURNING 1)
    SELECT count(*) INTO v_outcomes FROM gone;
    WITH gone AS (
        DELETE FROM orchestrator.executions WHERE id IN (
            SELECT x.id FROM orchestrator.executions x WHERE x.session_id = p_session AND x.ended_at < v_cutoff
                AND x.status <> 'running' AND NOT EXISTS (SELECT 1 FROM orchestrator.lane_runs lr
                    WHERE lr.execution_id = x.id)
            ORDER BY x.ended_at LIMIT p_limit)
        RETURNING 1)
    SELECT count(*) INTO v_executions FROM gone;
    WITH gone AS (
        DELETE FROM orchestrator.schedule_runs WHERE id IN (
            SELECT w.id FROM orchestrator.schedule_runs w WHERE w.session_id = p_session AND w.created_at < v_cutoff
            ORDER BY w.id LIMIT p_limit)
        RETURNING 1)
    SELECT count(*) INTO v_schedule_runs FROM gone;
    -- More past the mark, or more records behind it, than one round takes (what a lane holds is not counted:
    -- it is looked at again within a minute, not at once).
    v_more := greatest(coalesce(array_length(v_next, 1), 0), v_batches, v_outcomes, v_executions, v_schedule_runs)
              >= p_limit;
    IF v_more THEN
        v_due := v_now;
    ELSE
        -- When the oldest event past the mark comes due (a new event, at the earliest a whole retention from now).
        v_due := coalesce(
            (SELECT e.created_at FROM orchestrator.events e WHERE e.session_id = p_session AND e.id > v_through
                ORDER BY e.id LIMIT 1),
            v_now) + make_interval(secs => coalesce(r.event_seconds, p_event));
        -- What was held, or is younger than the throttle's minute, is looked at again within a minute.
        IF v_kept IS NOT NULL
           OR EXISTS (SELECT 1 FROM orchestrator.batches b WHERE b.session_id = p_session AND b.last_id <= v_through)
               THEN
            v_due := least(v_due, v_now + interval '60 seconds');
        END IF;
        IF s.status = 'closed' THEN
            v_due := least(v_due, s.closed_at + make_interval(secs => coalesce(r.closed_session_seconds, p_closed)));
        END IF;
    END IF;
    UPDATE orchestrator.session_retention SET trimmed_through = v_through, kept_below = v_kept,
        due_at = greatest(v_due, v_now)
        WHERE session_id = p_session;
    RETURN jsonb_build_object(
        'deleted', jsonb_build_object('events', v_events, 'batches', v_batches, 'outcomes', v_outcomes,
                                      'executions', v_executions, 'schedule_runs', v_schedule_runs),
        'more', v_more);
END
$$;
