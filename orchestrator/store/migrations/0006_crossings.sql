-- The crossing between a run's record and its execution on Temporal (docs/decisions.md, "Two stores"): only
-- Temporal's word ends a run, and a run the records call running that Temporal does not know is started from
-- its record. A lane's run starts from its batch (claimed again when Temporal lost it after its finish); a run of
-- no lane (`start_execution`, a schedule's workflow target) from the input it is started with, kept here until its
-- start is made (so a record that still holds it is a start never known made).

ALTER TABLE executions ADD COLUMN start_input jsonb;

-- The lane batch a run was started by, with its state: the batch the run's slot names, at the run's attempt
-- (a repeat is a batch of its own, with the same first event, at retry n). Null when the run holds no slot.
CREATE FUNCTION orchestrator_run_batch(p_execution text) RETURNS batches LANGUAGE sql STABLE AS $$
    SELECT b.* FROM lane_runs r JOIN batches o ON o.id = r.batch_id
    JOIN batches b ON b.lane_id = o.lane_id AND b.first_id = o.first_id AND b.replay = o.replay AND b.retry = r.retry
    WHERE r.execution_id = p_execution
$$;

-- Runs the records call running and nobody looked at for `p_older` seconds, marked looked at now (one sweep
-- each: SKIP LOCKED), with what a start can be made from: their batch's state, or the input kept.
CREATE FUNCTION orchestrator_unsettled_runs(p_older double precision, p_limit integer) RETURNS TABLE (
    id text, session_id text, workflow text, listener text, lane text, run_key text, depth integer,
    age double precision, batch_state text, start_input jsonb
) LANGUAGE sql AS $$
    WITH due AS (
        SELECT x.id FROM executions x WHERE x.status = 'running'
            AND x.checked_at < clock_timestamp() - make_interval(secs => p_older)
        ORDER BY x.checked_at LIMIT p_limit FOR UPDATE SKIP LOCKED),
    looked AS (
        UPDATE executions x SET checked_at = clock_timestamp() FROM due WHERE x.id = due.id RETURNING x.*)
    SELECT l.id, l.session_id, l.workflow, l.listener, l.lane, l.run_key, l.depth,
           extract(epoch FROM clock_timestamp() - l.started_at)::float8,
           (orchestrator_run_batch(l.id)).state, l.start_input
    FROM looked l
$$;

-- A run whose batch was finished (its start made) but that Temporal does not know: its batch is claimed again,
-- so its lane's next step starts it from the batch, by the same id, as a driver that died before its start
-- would have. Only while the records still call it running and it holds its slot. Answers its lane's
-- address, or null when there is nothing to reopen.
CREATE FUNCTION orchestrator_reopen_run(p_execution text) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_batch bigint;
    v_lane bigint;
BEGIN
    PERFORM orchestrator_share_session(x.session_id) FROM executions x WHERE x.id = p_execution;
    SELECT b.id, b.lane_id INTO v_batch, v_lane FROM orchestrator_run_batch(p_execution) b
        JOIN executions x ON x.id = p_execution AND x.status = 'running'
        WHERE b.id IS NOT NULL;
    IF v_batch IS NULL THEN
        RETURN NULL;
    END IF;
    UPDATE batches SET state = 'claimed' WHERE id = v_batch;
    RETURN orchestrator_lane_address(v_lane);
END
$$;

-- A schedule's row is written before its Temporal Schedule is created, and marked made once it is: a row the
-- process left unmade (it died between the two) is made by the workers' upkeep (`commands/schedules.py`). Rows
-- from before this migration were made in the command that wrote them.
ALTER TABLE schedules ADD COLUMN made boolean NOT NULL DEFAULT true;
