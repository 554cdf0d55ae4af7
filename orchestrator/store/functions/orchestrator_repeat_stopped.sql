-- A failed run's repeat called off (`stop_execution` of the failed run while its repeat waits out its delay): the
-- slot the failed run held for it is freed and handed on as at any run's end, no repeat is cut, and no
-- `listener.failed` is written (the failure was stopped, not given up on). Locks as a run's end does (the session,
-- the listener's keys), then the lane's row before its run's, as a lane's record does: the lane's `seq` moves on,
-- so a record decided on a snapshot that still held the repeat is stale and reads again. Answers null when there
-- was no repeat to call off (none due, or already taken: its run is then another execution), else the lanes to
-- drive now. `p_key_max`: the keyed listener's slots, for the key slot the failed run held (its lane has one).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_repeat_stopped(p_session text, p_execution text,
    p_key_max integer)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    x orchestrator.executions%ROWTYPE;
    r orchestrator.lane_runs%ROWTYPE;
    v_lane bigint;
    v_keyed boolean;
    v_drive jsonb;
BEGIN
    SELECT * INTO x FROM orchestrator.executions WHERE id = p_execution AND session_id = p_session;
    IF NOT FOUND OR x.status <> 'failed' OR x.run_key IS NULL THEN
        RETURN NULL;
    END IF;
    v_lane := (SELECT lane_id FROM orchestrator.lane_runs WHERE run_key = x.run_key AND execution_id = p_execution
               AND due_at IS NOT NULL);
    IF v_lane IS NULL OR orchestrator.orchestrator_lock_session(p_session) = 'not_found' THEN
        RETURN NULL;
    END IF;
    v_keyed := EXISTS (SELECT 1 FROM orchestrator.key_slots WHERE lane_id = v_lane);
    IF v_keyed THEN
        PERFORM orchestrator.orchestrator_keys_lock(p_session, x.listener);
    END IF;
    UPDATE orchestrator.lanes SET seq = seq + 1 WHERE id = v_lane;
    SELECT * INTO r FROM orchestrator.lane_runs WHERE run_key = x.run_key AND execution_id = p_execution
        AND due_at IS NOT NULL FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    v_drive := orchestrator.orchestrator_run_released(r, p_session, x.listener, v_keyed, p_key_max);
    PERFORM orchestrator.orchestrator_close_drained(p_session);
    RETURN jsonb_build_object('drive', v_drive);
END
$$;
