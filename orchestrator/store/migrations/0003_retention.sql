-- Retention (SPEC section 14): a lane's queue holds what waits, a session keeps its history for a time, and a
-- session can be deleted with everything of it.
--
-- Queue rows go with the lane's own batch that takes them, in the statement that records it (a trigger on the
-- batch's insert, so the lane functions of 0002 stay as they are); the batch keeps its event ids and when each
-- was queued (`queued_at`, in the order of `event_ids`), which is what `explain_event` and the crash suite read
-- of an event's trip once its queue row is gone.
--
-- What a session keeps is driven by one row per session (`session_retention`): its own retention (null: the
-- deployment's), how far its stream is trimmed, and when a worker should look at it next. Workers take due
-- rows with SKIP LOCKED and a lease, and delete in short statements of a bounded number of rows: no lock is
-- held on the session's row (every write takes it) and none for longer than one statement.

-- -- queues that hold what waits -------------------------------------------------------------------------

ALTER TABLE batches ADD COLUMN queued_at timestamptz[];

CREATE FUNCTION orchestrator_take_queue() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    -- The lane's own batch (not a repeat, not a replay), recorded after its lane's `fired_through` moved past
    -- it: every queue row at or below that is consumed.
    IF NEW.retry = 0 AND NEW.replay = 0 THEN
        WITH gone AS (
            DELETE FROM lane_events q USING lanes l
            WHERE l.id = NEW.lane_id AND q.lane_id = l.id AND q.event_id <= l.fired_through
            RETURNING q.event_id, q.queued_at)
        SELECT array_agg(g.queued_at ORDER BY x.n) INTO NEW.queued_at
        FROM unnest(NEW.event_ids) WITH ORDINALITY AS x(id, n) LEFT JOIN gone g ON g.event_id = x.id;
    END IF;
    RETURN NEW;
END
$$;
CREATE TRIGGER batches_take_queue BEFORE INSERT ON batches FOR EACH ROW EXECUTE FUNCTION orchestrator_take_queue();

-- What earlier versions left behind: queue rows of events their lanes have fired.
DELETE FROM lane_events q USING lanes l WHERE q.lane_id = l.id AND q.event_id <= l.fired_through;

-- The batches that took an event (`explain_event`, what it caused) and those a trim may delete, by session.
CREATE INDEX batches_session_last ON batches (session_id, last_id);
-- What a trim deletes behind the events it deleted: outcomes by the events they name, runs by their end.
CREATE INDEX outcomes_session_last ON outcomes (session_id, last_id);
CREATE INDEX executions_ended ON executions (session_id, ended_at) WHERE ended_at IS NOT NULL;

-- -- what a session keeps ----------------------------------------------------------------------------------

-- A session being deleted (`delete_session`, or closed past its retention) is 'deleting' until the last of its
-- rows is gone, and answers not_found everywhere meanwhile, as if it were gone already.
ALTER TABLE sessions DROP CONSTRAINT sessions_status_check;
ALTER TABLE sessions ADD CONSTRAINT sessions_status_check CHECK (status IN ('open', 'closed', 'deleting'));

CREATE TABLE session_retention (
    session_id             text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    -- The session's own retention in seconds (null: the deployment's).
    event_seconds          double precision,
    closed_session_seconds double precision,
    -- Every event of the session at or below this id is deleted, but for those a lane still waited on when a
    -- trim passed them: every later trim looks at those again. Reads past it say where the stream now starts.
    trimmed_through        bigint NOT NULL DEFAULT 0,
    -- The first of those kept below the mark (null: none), where a trim starts to look at them again.
    kept_below             bigint,
    -- When a worker looks at the session next: when its oldest event kept comes due, or its closed retention
    -- ends; a worker that takes it moves this on by its lease meanwhile.
    due_at                 timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX session_retention_due ON session_retention (due_at);
INSERT INTO session_retention (session_id) SELECT id FROM sessions;

CREATE FUNCTION orchestrator_session_retention_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO session_retention (session_id) VALUES (NEW.id) ON CONFLICT DO NOTHING;
    ELSE
        -- Closed (or reopened, or being deleted): looked at again now, for what its new status keeps.
        UPDATE session_retention SET due_at = least(due_at, clock_timestamp()) WHERE session_id = NEW.id;
    END IF;
    RETURN NULL;
END
$$;
CREATE TRIGGER sessions_retention_row AFTER INSERT ON sessions
    FOR EACH ROW EXECUTE FUNCTION orchestrator_session_retention_row();
-- Only a change of status: the writes that move `last_event_id` never fire it.
CREATE TRIGGER sessions_retention_status AFTER UPDATE OF status ON sessions
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status) EXECUTE FUNCTION orchestrator_session_retention_row();

-- Sessions due for a look, each taken by one worker: its `due_at` moved on by the lease (`p_lease` seconds), so
-- another worker takes it again only when this one died with it. Answers what each needs: 'purge' (being
-- deleted, or closed past its retention: `p_closed` seconds unless its own) or 'trim'.
CREATE FUNCTION orchestrator_retention_due(p_limit integer, p_lease double precision, p_closed double precision)
RETURNS TABLE (o_session text, o_action text) LANGUAGE sql AS $$
    WITH due AS (
        SELECT r.session_id FROM session_retention r WHERE r.due_at <= clock_timestamp()
        ORDER BY r.due_at LIMIT p_limit FOR UPDATE SKIP LOCKED),
    taken AS (
        UPDATE session_retention r SET due_at = clock_timestamp() + make_interval(secs => p_lease)
        FROM due WHERE r.session_id = due.session_id RETURNING r.*)
    SELECT t.session_id,
           CASE WHEN s.status = 'deleting'
                  OR (s.status = 'closed' AND s.closed_at
                      <= clock_timestamp() - make_interval(secs => coalesce(t.closed_session_seconds, p_closed)))
                THEN 'purge' ELSE 'trim' END
    FROM taken t JOIN sessions s ON s.id = t.session_id
$$;

-- One round of a session's trim, at most `p_limit` rows of each table: its events older than its retention
-- (`p_event` seconds unless its own) that the router has passed and no lane waits on (queued, in a batch not
-- finished, in a batch whose run holds a slot for its repeat, asked for again), then the records behind what
-- is gone: batches and outcomes of events no longer kept (done, holding no slot, past the throttle's minute),
-- runs that ended before the retention, schedule firings recorded before it. Thread items, objects and the
-- graph are the session's state, not its history: they stay. Moves `trimmed_through` on, and `due_at` to when
-- the oldest event kept comes due (its closed retention's end, if sooner; at once when this round was full).
-- Answers the rows deleted by table and `more`.
CREATE FUNCTION orchestrator_trim_session(p_session text, p_limit integer, p_event double precision,
                                          p_closed double precision) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    r session_retention%ROWTYPE;
    s sessions%ROWTYPE;
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
    SELECT * INTO r FROM session_retention WHERE session_id = p_session;
    SELECT * INTO s FROM sessions WHERE id = p_session;
    IF r.session_id IS NULL OR s.id IS NULL OR s.status = 'deleting' THEN
        RETURN NULL;
    END IF;
    v_cutoff := v_now - make_interval(secs => coalesce(r.event_seconds, p_event));
    -- A batch counts for the throttle for a minute: no record goes younger than that.
    v_records := least(v_cutoff, v_now - interval '60 seconds');
    v_routed := coalesce((SELECT c.routed_event_id FROM routing_cursors c WHERE c.session_id = p_session), 0);
    -- Looked at: what a lane held when an earlier trim passed it, and the next events past the mark (ids are in
    -- commit order within a session, so these are its oldest). Both reads stop after `p_limit` rows.
    v_old := ARRAY(SELECT e.id FROM events e WHERE e.session_id = p_session AND e.id >= r.kept_below
                   AND e.id <= r.trimmed_through AND e.created_at < v_cutoff ORDER BY e.id LIMIT p_limit);
    v_next := ARRAY(SELECT x.id FROM (SELECT e.id, e.created_at FROM events e WHERE e.session_id = p_session
                                      AND e.id > r.trimmed_through ORDER BY e.id LIMIT p_limit) x
                    WHERE x.created_at < v_cutoff AND x.id <= v_routed);
    -- What a lane waits on, read in the statement that deletes: a batch that takes an event from its queue
    -- commits its queue rows' end and its claim together, so one snapshot sees the event in one or the other.
    WITH held AS (
        SELECT unnest(b.event_ids) AS id FROM lanes l JOIN batches b ON b.lane_id = l.id AND b.state = 'claimed'
        WHERE l.session_id = p_session
        UNION SELECT unnest(b.event_ids) FROM lanes l JOIN lane_runs lr ON lr.lane_id = l.id
                                         JOIN batches b ON b.id = lr.batch_id WHERE l.session_id = p_session
        UNION SELECT unnest(p.event_ids) FROM lanes l JOIN replays p ON p.lane_id = l.id WHERE l.session_id = p_session),
    gone AS (
        DELETE FROM events e WHERE e.id = ANY (v_old || v_next) AND e.session_id = p_session
            AND e.id NOT IN (SELECT h.id FROM held h) AND NOT EXISTS (SELECT 1 FROM lane_events q WHERE q.event_id = e.id)
        RETURNING e.id)
    SELECT count(*) INTO v_events FROM gone g;
    v_through := greatest(r.trimmed_through, (SELECT max(x) FROM unnest(v_next) x));
    -- The first event left below the mark: none was below the old one but from `kept_below` on.
    v_kept := (SELECT min(e.id) FROM events e WHERE e.session_id = p_session
               AND e.id >= coalesce(r.kept_below, r.trimmed_through + 1) AND e.id <= v_through);
    WITH gone AS (
        DELETE FROM batches WHERE id IN (
            SELECT b.id FROM batches b WHERE b.session_id = p_session AND b.last_id <= v_through
                AND b.state = 'done' AND b.created_at < v_records
                AND NOT EXISTS (SELECT 1 FROM lane_runs lr WHERE lr.batch_id = b.id)
            ORDER BY b.last_id LIMIT p_limit)
        RETURNING 1)
    SELECT count(*) INTO v_batches FROM gone;
    WITH gone AS (
        DELETE FROM outcomes WHERE id IN (
            SELECT o.id FROM outcomes o WHERE o.session_id = p_session AND o.last_id <= v_through
                AND o.created_at < v_records ORDER BY o.last_id LIMIT p_limit)
        RETURNING 1)
    SELECT count(*) INTO v_outcomes FROM gone;
    WITH gone AS (
        DELETE FROM executions WHERE id IN (
            SELECT x.id FROM executions x WHERE x.session_id = p_session AND x.ended_at < v_cutoff
                AND x.status <> 'running' AND NOT EXISTS (SELECT 1 FROM lane_runs lr WHERE lr.execution_id = x.id)
            ORDER BY x.ended_at LIMIT p_limit)
        RETURNING 1)
    SELECT count(*) INTO v_executions FROM gone;
    WITH gone AS (
        DELETE FROM schedule_runs WHERE id IN (
            SELECT w.id FROM schedule_runs w WHERE w.session_id = p_session AND w.created_at < v_cutoff
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
            (SELECT e.created_at FROM events e WHERE e.session_id = p_session AND e.id > v_through ORDER BY e.id LIMIT 1),
            v_now) + make_interval(secs => coalesce(r.event_seconds, p_event));
        -- What was held, or is younger than the throttle's minute, is looked at again within a minute.
        IF v_kept IS NOT NULL
           OR EXISTS (SELECT 1 FROM batches b WHERE b.session_id = p_session AND b.last_id <= v_through) THEN
            v_due := least(v_due, v_now + interval '60 seconds');
        END IF;
        IF s.status = 'closed' THEN
            v_due := least(v_due, s.closed_at + make_interval(secs => coalesce(r.closed_session_seconds, p_closed)));
        END IF;
    END IF;
    UPDATE session_retention SET trimmed_through = v_through, kept_below = v_kept, due_at = greatest(v_due, v_now)
        WHERE session_id = p_session;
    RETURN jsonb_build_object(
        'deleted', jsonb_build_object('events', v_events, 'batches', v_batches, 'outcomes', v_outcomes,
                                      'executions', v_executions, 'schedule_runs', v_schedule_runs),
        'more', v_more);
END
$$;

-- -- deleting a session ------------------------------------------------------------------------------------

-- A session to be deleted, from here on 'deleting' (or, with `p_closed` seconds, only one closed for longer
-- than its retention): its alias free for a new session, its routing stopped and nothing left waiting in its
-- lanes (so none is nudged for it again). Answers whether it was marked now.
CREATE FUNCTION orchestrator_mark_deleting(p_session text, p_closed double precision) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    -- The session's row before anything else, as the engine's functions take it (0002_lanes.sql's lock order).
    PERFORM 1 FROM sessions WHERE id = p_session FOR UPDATE;
    UPDATE sessions s SET status = 'deleting', alias = NULL, drain_through = NULL
    WHERE s.id = p_session AND s.status <> 'deleting'
      AND (p_closed IS NULL OR (s.status = 'closed' AND s.closed_at <= clock_timestamp() - make_interval(
           secs => coalesce((SELECT r.closed_session_seconds FROM session_retention r WHERE r.session_id = s.id),
                            p_closed))));
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM routing_cursors WHERE session_id = p_session;
    -- Its lanes' rows before their queues' (as a batch's record takes them), each set in one order.
    PERFORM 1 FROM lanes WHERE session_id = p_session ORDER BY listener, lane FOR UPDATE;
    UPDATE lanes SET fired_through = routed_through WHERE session_id = p_session AND fired_through < routed_through;
    DELETE FROM lane_events q USING lanes l WHERE l.id = q.lane_id AND l.session_id = p_session;
    RETURN true;
END
$$;

-- What Temporal holds of a session: its lanes' workflows, its runs still running, its schedules.
CREATE FUNCTION orchestrator_session_workflows(p_session text) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'lanes', (SELECT coalesce(jsonb_agg(l.workflow_id ORDER BY l.id), '[]') FROM lanes l WHERE l.session_id = p_session),
        'runs', (SELECT coalesce(jsonb_agg(x.id ORDER BY x.id), '[]') FROM executions x
                 WHERE x.session_id = p_session AND x.status = 'running'),
        'schedules', (SELECT coalesce(jsonb_agg(c.schedule_id ORDER BY c.schedule_id), '[]') FROM schedules c
                      WHERE c.session_id = p_session))
$$;

-- One step of a deleting session's removal: at most `p_limit` rows of the first table that still holds rows of
-- it, every table with a `session_id` column in turn (a table added later is covered), its lanes last (their
-- queues, runs, key slots and replays go with them), then the session itself. Answers the table and the rows
-- deleted, and `done` once the session is gone.
CREATE FUNCTION orchestrator_purge_session(p_session text, p_limit integer) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_table text;
    v_count integer;
BEGIN
    -- The session's row before any of its rows, as the engine's functions take it (0002_lanes.sql's lock order).
    PERFORM 1 FROM sessions WHERE id = p_session FOR UPDATE;
    IF NOT EXISTS (SELECT 1 FROM sessions WHERE id = p_session AND status = 'deleting') THEN
        -- Gone already (done), or not being deleted (reopened before it was marked): nothing to do.
        RETURN jsonb_build_object('done', NOT EXISTS (SELECT 1 FROM sessions WHERE id = p_session), 'deleted', 0);
    END IF;
    FOR v_table IN
        SELECT c.relname FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid
        WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r' AND a.attname = 'session_id'
          AND NOT a.attisdropped AND c.relname NOT IN ('sessions', 'session_retention', 'lanes')
        ORDER BY c.relname
    LOOP
        EXECUTE format('DELETE FROM %I WHERE ctid = ANY (ARRAY(SELECT ctid FROM %I WHERE session_id = $1 LIMIT $2))',
                       v_table, v_table) USING p_session, p_limit;
        GET DIAGNOSTICS v_count = ROW_COUNT;
        IF v_count > 0 THEN
            RETURN jsonb_build_object('table', v_table, 'deleted', v_count, 'done', false);
        END IF;
    END LOOP;
    DELETE FROM lanes WHERE ctid = ANY (ARRAY(SELECT ctid FROM lanes WHERE session_id = p_session LIMIT p_limit));
    GET DIAGNOSTICS v_count = ROW_COUNT;
    IF v_count > 0 THEN
        RETURN jsonb_build_object('table', 'lanes', 'deleted', v_count, 'done', false);
    END IF;
    -- Its write rate's bucket (0004_keys.sql) names it in its key rather than a column.
    DELETE FROM rate_buckets WHERE bucket = 'session:' || p_session;
    DELETE FROM sessions WHERE id = p_session;
    RETURN jsonb_build_object('table', 'sessions', 'deleted', 1, 'done', true);
END
$$;

-- Where a session's stream now starts: how far it was trimmed, and the first event it keeps past that.
CREATE FUNCTION orchestrator_stream_start(p_session text) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'trimmed_through', r.trimmed_through,
        'first_id', (SELECT e.id FROM events e WHERE e.session_id = p_session AND e.id > r.trimmed_through
                     ORDER BY e.id LIMIT 1))
    FROM session_retention r WHERE r.session_id = p_session
$$;
