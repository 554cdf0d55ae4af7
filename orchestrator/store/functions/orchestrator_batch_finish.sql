-- A batch acted on: marked done; a slot held for a run that did not start given back (a keyed listener's key
-- slot handed on); the run's `execution.started`; the outcome (once per batch) and its count; the receipt;
-- and `listener.failed` for a repeat stopped by a guard. A lane's own batch takes its queue rows here
-- (`orchestrator_batch_take_queue`), not at its record (0016: the record is on the path from a run's end to the
-- next run's start). Answers the lanes a freed key slot went to, and the lane's next snapshot (one round trip
-- for the end of a batch and the start of the next step); and for a run started, a stop asked of it before its
-- start was made (`stop_execution` found nothing on Temporal), or its cancel watch's answer, noted told: the
-- finisher tells it.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_batch_finish(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_lane bigint := (p ->> 'lane_id')::bigint;
    v_session text := p ->> 'session_id';
    v_listener text := p ->> 'listener';
    o jsonb := p -> 'outcome';
    c jsonb := p -> 'receipt';
    v_granted jsonb := '[]';
    v_inserted bigint;
    v_released text;
    v_stop jsonb;
    v_done boolean;
    v_cancel boolean := false;
BEGIN
    -- The session's row first: locked where this appends an event (before the keys' lock, see
    -- orchestrator_keys_lock, and the execution's row, see orchestrator_execution_started), else shared.
    IF (p ->> 'started')::boolean OR jsonb_typeof(c) = 'object' OR p ->> 'failed_execution' IS NOT NULL THEN
        PERFORM orchestrator.orchestrator_lock_session(v_session);
    ELSE
        PERFORM orchestrator.orchestrator_share_session(v_session);
    END IF;
    IF (p ->> 'release')::boolean AND (p ->> 'keyed')::boolean THEN
        PERFORM orchestrator.orchestrator_keys_lock(v_session, v_listener);
    END IF;
    IF (p ->> 'release')::boolean THEN
        -- The execution's row before the batch's and the slot's, as a run's end takes them.
        PERFORM 1 FROM orchestrator.executions WHERE id = p ->> 'execution_id' FOR UPDATE;
    END IF;
    IF (p ->> 'started')::boolean THEN
        PERFORM orchestrator.orchestrator_execution_started(p ->> 'execution_id');
        UPDATE orchestrator.run_waits SET told_at = clock_timestamp()
            WHERE execution_id = p ->> 'execution_id' AND run_id = '' AND seq = -1 AND told_at IS NULL
            RETURNING jsonb_build_object('grace_seconds', grace_seconds, 'reason', reason) INTO v_stop;
        -- Its cancel watch (wait 0) answered before its start, by an event the look back found as it was put in
        -- place or by a round the run was not on Temporal for: told by the finisher too, not 5 s later by the
        -- router's poll of what was left untold.
        IF (p ->> 'tells_cancel')::boolean THEN
            UPDATE orchestrator.run_waits SET told_at = clock_timestamp()
                WHERE execution_id = p ->> 'execution_id' AND run_id = '' AND seq = 0 AND kind = 'cancel'
                  AND state = 'answered' AND told_at IS NULL;
            v_cancel := FOUND;
        END IF;
    END IF;
    PERFORM orchestrator.orchestrator_batch_take_queue((p ->> 'batch_id')::bigint);
    UPDATE orchestrator.batches SET state = 'done' WHERE id = (p ->> 'batch_id')::bigint AND state = 'claimed';
    -- Whether this finish was the batch's first (an attempt of the lane's step that outlived its timeout may
    -- finish the same batch again): what counts a batch once.
    v_done := FOUND;
    IF (p ->> 'release')::boolean THEN
        -- No run took the slot held for it (its start was refused): the lane is free for what it left behind.
        WITH gone AS (DELETE FROM orchestrator.lane_runs WHERE run_key = p ->> 'run_key'
            AND execution_id = p ->> 'execution_id'
                      RETURNING batch_id, run_key)
            UPDATE orchestrator.batches SET released_at = clock_timestamp() FROM gone WHERE batches.id = gone.batch_id
            RETURNING gone.run_key INTO v_released;
        -- It never ran: no execution to list or to count as running.
        DELETE FROM orchestrator.executions WHERE id = p ->> 'execution_id' AND status = 'running'
            AND started_event_id IS NULL;
        IF v_released IS NOT NULL AND (p ->> 'keyed')::boolean THEN
            v_granted := orchestrator.orchestrator_key_slot_freed(v_lane, v_session, v_listener,
                (p ->> 'key_max')::integer,
                EXISTS (SELECT 1 FROM orchestrator.lanes WHERE id = v_lane AND routed_through > fired_through));
        END IF;
    END IF;
    IF jsonb_typeof(o) = 'object' THEN
        INSERT INTO orchestrator.outcomes (session_id, listener, version, lane, status, reason, first_id, last_id,
            event_ids, retry,
                              execution_id, message, batch_key)
            VALUES (v_session, v_listener, (o ->> 'version')::integer, p ->> 'lane', o ->> 'status', o ->> 'reason',
                    (o ->> 'first_id')::bigint, (o ->> 'last_id')::bigint,
                    ARRAY(SELECT jsonb_array_elements_text(o -> 'event_ids')::bigint), (o ->> 'retry')::integer,
                    o ->> 'execution_id', o ->> 'message', o ->> 'batch_key')
            ON CONFLICT (session_id, listener, batch_key) DO NOTHING RETURNING id INTO v_inserted;
        IF v_inserted IS NOT NULL THEN
            INSERT INTO orchestrator.outcome_counts (session_id, listener, status, count) VALUES (v_session,
                v_listener, o ->> 'status', 1)
                ON CONFLICT (session_id, listener, status) DO UPDATE SET count = outcome_counts.count + 1;
        END IF;
    END IF;
    IF jsonb_typeof(c) = 'object' THEN
        -- A closed session takes no more thread items: the outcome is kept, the receipt left out.
        PERFORM orchestrator.orchestrator_post_thread_item(
            v_session, c ->> 'alias', c ->> 'id', c ->> 'type', c ->> 'role',
            CASE WHEN jsonb_typeof(c -> 'message') = 'string' THEN c ->> 'message' END,
            CASE WHEN jsonb_typeof(c -> 'message') NOT IN ('string', 'null') THEN c -> 'message' END, c ->> 'preview',
            c -> 'metadata', jsonb_build_object('listener', v_listener), (c ->> 'depth')::integer, c ->> 'key', NULL,
            c -> 'cause');
    END IF;
    IF p ->> 'failed_execution' IS NOT NULL THEN
        PERFORM orchestrator.orchestrator_listener_failed(p ->> 'failed_execution', v_listener, p ->> 'lane',
            (p ->> 'depth')::integer);
    END IF;
    RETURN jsonb_build_object(
        'granted', v_granted,
        'outcome_new', v_inserted IS NOT NULL,
        'done_new', v_done,
        'stop', v_stop,
        'cancel', v_cancel,
        'snapshot', orchestrator.orchestrator_lane_snapshot(v_session, v_listener, p ->> 'lane',
            (p ->> 'fetch')::integer));
END
$$;
