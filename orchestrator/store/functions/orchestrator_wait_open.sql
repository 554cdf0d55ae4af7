-- A run's wait (or cancel watch) put in place, and answered at once when the log already holds its answer.
--
-- Race-free by its position: under the session's routing position, held (`FOR UPDATE`, so no round routes past it
-- meanwhile), the wait looks back over the events after its position through the routed one, and the rounds
-- after this commit meet it for everything later: no event falls between the two. A round that found the position
-- held is told to come back (`pg_notify`, at the commit). Idempotent by the run (its execution and Temporal run) and
-- the wait's number: a retried call answers the wait as it stands. A wait of a run that has ended is `abandoned`
-- from the start (its call came after the run's end was recorded, which abandoned what was open then): it takes
-- nothing; a wait whose first declared condition may hold for an event routing has not reached answers `behind`,
-- put in place by nothing, to be asked again. `p`: session_id, execution_id, run_id, seq, kind, listener, lane,
-- settled (false: `behind` may be answered; by default the answer stands on what is routed), after (null: the
-- run's `execution.started`, else the routed position), max_events, timeout_seconds, grace_seconds, conditions
-- (as declared) and compiled (per condition: type_res, alias_res, where, key_root, key_rest, key_segments,
-- probes [{type_head, alias_head, eq_path, eq_value}]). Answers the wait as `orchestrator_wait_json` says it.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_wait_open(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_session text := p ->> 'session_id';
    v_execution text := p ->> 'execution_id';
    v_seq integer := (p ->> 'seq')::integer;
    v_run text := coalesce(p ->> 'run_id', '');
    v_ended boolean;
    w orchestrator.run_waits%ROWTYPE;
    v_routed bigint;
    v_matched integer;
    v_ids bigint[];
    v_run_key text;
BEGIN
    SELECT * INTO w FROM orchestrator.run_waits WHERE execution_id = v_execution AND run_id = v_run AND seq = v_seq;
    IF FOUND THEN
        RETURN orchestrator.orchestrator_wait_json(w);
    END IF;
    -- The session's row locked as a run's end locks it, so the two take turns: an end first leaves the run ended
    -- for the read below (the wait is abandoned from the start); an end after this commits abandons the wait. (The
    -- run's record alone would not do: an end abandons its open waits before it updates the record, and one that
    -- read them while this wait was uncommitted would leave it open for good, taking from the run's listener
    -- every event it matches.)
    PERFORM orchestrator.orchestrator_lock_session(v_session);
    SELECT c.routed_event_id INTO v_routed FROM orchestrator.routing_cursors c
        WHERE c.session_id = v_session FOR UPDATE;
    IF NOT FOUND THEN
        RAISE EXCEPTION 'no session %', v_session USING ERRCODE = 'no_data_found';
    END IF;
    -- The run's record (none for a workflow the platform did not start).
    SELECT x.status <> 'running' INTO v_ended FROM orchestrator.executions x WHERE x.id = v_execution;
    INSERT INTO orchestrator.run_waits (session_id, execution_id, run_id, seq, kind, listener, lane, conditions,
                                        after_id, max_events, deadline, grace_seconds, state, ended_at)
        VALUES (v_session, v_execution, v_run, v_seq, p ->> 'kind', p ->> 'listener', p ->> 'lane', p -> 'conditions',
                coalesce((p ->> 'after')::bigint,
                         (SELECT x.started_event_id FROM orchestrator.executions x WHERE x.id = v_execution), v_routed),
                (p ->> 'max_events')::integer,
                clock_timestamp() + make_interval(secs => (p ->> 'timeout_seconds')::float8),
                (p ->> 'grace_seconds')::float8,
                CASE WHEN v_ended THEN 'abandoned' ELSE 'open' END,
                CASE WHEN v_ended THEN clock_timestamp() END)
        ON CONFLICT (execution_id, run_id, seq) DO NOTHING RETURNING * INTO w;
    IF NOT FOUND THEN
        SELECT * INTO w FROM orchestrator.run_waits WHERE execution_id = v_execution AND run_id = v_run AND seq = v_seq;
        RETURN orchestrator.orchestrator_wait_json(w);
    END IF;
    IF w.state = 'abandoned' THEN
        RETURN orchestrator.orchestrator_wait_json(w);
    END IF;
    INSERT INTO orchestrator.wait_conditions (wait_id, cond, type_res, alias_res, where_conds, key_root, key_rest,
                                              key_segments)
        SELECT w.id, (c.n - 1)::integer,
               CASE WHEN jsonb_typeof(c.v -> 'type_res') = 'array'
                    THEN ARRAY(SELECT jsonb_array_elements_text(c.v -> 'type_res')) END,
               CASE WHEN jsonb_typeof(c.v -> 'alias_res') = 'array'
                    THEN ARRAY(SELECT jsonb_array_elements_text(c.v -> 'alias_res')) END,
               coalesce(c.v -> 'where', '[]'::jsonb), c.v ->> 'key_root',
               ARRAY(SELECT jsonb_array_elements_text(coalesce(c.v -> 'key_rest', '[]'::jsonb))),
               (c.v ->> 'key_segments')::integer
        FROM jsonb_array_elements(p -> 'compiled') WITH ORDINALITY AS c(v, n);

    -- The lanes of the run's listener holding events the look back may take, locked as a lane's record locks
    -- one: a record in flight commits first (and the look back sees its batch), or comes after the answer (and
    -- finds the lane moved on, `orchestrator_wait_answered`). The session's lock alone does not keep it out: a
    -- record only shares the session's row.
    IF w.kind = 'wait' AND w.listener IS NOT NULL THEN
        PERFORM 1 FROM orchestrator.lanes l
            WHERE l.session_id = v_session AND l.listener = w.listener
              AND EXISTS (SELECT 1 FROM orchestrator.lane_queue q WHERE q.lane_id = l.id AND q.last_id > w.after_id)
            ORDER BY l.lane COLLATE "C" FOR SHARE;
        SELECT x.run_key INTO v_run_key FROM orchestrator.executions x WHERE x.id = v_execution;
    END IF;
    -- The look back: what the log holds already after the wait's position. A wait leaves out what it may not hear
    -- for who wrote it (`orchestrator_wait_hears_from`), what the run's earlier waits took, and what another run's
    -- batch of the run's own listener took already (another key's lane fired it while this run had no wait open):
    -- an event goes to one of the listener's actions, that run or this one.
    WITH held AS (
        SELECT k.cond, e.id AS event_id
        FROM orchestrator.events e
        JOIN orchestrator.wait_conditions k ON k.wait_id = w.id
        WHERE e.session_id = v_session AND e.id > w.after_id AND e.id <= v_routed
          AND orchestrator.orchestrator_wait_hears_from(e, w)
          AND (w.kind <> 'wait' OR NOT EXISTS (
                   SELECT 1 FROM orchestrator.run_waits x
                   WHERE x.execution_id = v_execution AND x.kind = 'wait' AND x.state = 'answered'
                     AND e.id = ANY (x.event_ids)))
          AND (w.kind <> 'wait' OR w.listener IS NULL OR NOT EXISTS (
                   SELECT 1 FROM orchestrator.batches b
                   WHERE b.session_id = v_session AND b.last_id >= e.id AND b.first_id <= e.id
                     AND b.listener = w.listener AND e.id = ANY (b.event_ids)
                     AND b.run_key IS DISTINCT FROM v_run_key))
          AND orchestrator.orchestrator_condition_takes(e, k, w.lane)),
    won AS (SELECT min(h.cond) AS cond FROM held h)
    SELECT won.cond, (array_agg(h.event_id ORDER BY h.event_id))[1:w.max_events]
        INTO v_matched, v_ids
        FROM won JOIN held h ON h.cond = won.cond GROUP BY won.cond;

    -- A later condition won what routing has reached while an earlier one holds for an event it has not reached
    -- yet (committed: the session's lock is held): the first declared wins among what is ready together, so a wait
    -- is not put in place yet, and its caller asks again once routing has caught up. Only a caller that says it
    -- will ask again (`p.settled` false) is answered so: a worker of the release before, which never asks again,
    -- gets the answer from what is routed, as it always did. The rounds go on meanwhile.
    IF v_matched > 0 AND w.kind = 'wait' AND NOT coalesce((p ->> 'settled')::boolean, true) AND EXISTS (
            SELECT 1 FROM orchestrator.events e
            JOIN orchestrator.wait_conditions k ON k.wait_id = w.id AND k.cond < v_matched
            WHERE e.session_id = v_session AND e.id > v_routed
              AND orchestrator.orchestrator_wait_hears_from(e, w)
              AND orchestrator.orchestrator_condition_takes(e, k, w.lane)) THEN
        DELETE FROM orchestrator.run_waits WHERE id = w.id;  -- its conditions with it
        PERFORM pg_notify(orchestrator.orchestrator_wake_channel(v_session), v_session);
        RETURN jsonb_build_object('state', 'behind');
    END IF;
    IF v_matched IS NOT NULL THEN
        -- A wait's answer goes back in this call's reply; a cancel watch's is the router's to act on.
        PERFORM orchestrator.orchestrator_wait_answered(w.id, v_matched, v_ids, w.kind = 'wait', true);
    ELSE
        INSERT INTO orchestrator.wait_probes (session_id, probe_key, type_head, eq_path, wait_id, cond)
            SELECT DISTINCT v_session,
                   orchestrator.orchestrator_probe_key(x.v ->> 'alias_head', x.v ->> 'eq_path', x.v -> 'eq_value'),
                   x.v ->> 'type_head', x.v ->> 'eq_path', w.id, (c.n - 1)::integer
            FROM jsonb_array_elements(p -> 'compiled') WITH ORDINALITY AS c(v, n),
                 jsonb_array_elements(c.v -> 'probes') x(v);
    END IF;
    -- A round that found the position held comes back for what it left.
    PERFORM pg_notify(orchestrator.orchestrator_wake_channel(v_session), v_session);
    SELECT * INTO w FROM orchestrator.run_waits WHERE id = w.id;
    RETURN orchestrator.orchestrator_wait_json(w);
END
$$;
