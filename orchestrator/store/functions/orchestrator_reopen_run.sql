-- A run whose batch was finished (its start made) but that Temporal does not know: its batch is claimed again,
-- so its lane's next step starts it from the batch, by the same id, as a driver that died before its start
-- would have. Only while the records still call it running and it holds its slot. Answers its lane's
-- address, or null when there is nothing to reopen.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_reopen_run(p_execution text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_batch bigint;
    v_lane bigint;
BEGIN
    PERFORM orchestrator.orchestrator_share_session(x.session_id) FROM orchestrator.executions x
        WHERE x.id = p_execution;
    SELECT b.id, b.lane_id INTO v_batch, v_lane FROM orchestrator.orchestrator_run_batch(p_execution) b
        JOIN orchestrator.executions x ON x.id = p_execution AND x.status = 'running'
        WHERE b.id IS NOT NULL;
    IF v_batch IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE orchestrator.batches SET state = 'claimed' WHERE id = v_batch;
    RETURN orchestrator.orchestrator_lane_address(v_lane);
END
$$;
