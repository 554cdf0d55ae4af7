-- The lane batch a run was started by, with its state: the batch the run's slot names, at the run's attempt
-- (a repeat is a batch of its own, with the same first event, at retry n). Null when the run holds no slot.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_run_batch(p_execution text)
RETURNS orchestrator.batches LANGUAGE sql STABLE AS $$
    SELECT b.* FROM orchestrator.lane_runs r JOIN orchestrator.batches o ON o.id = r.batch_id
    JOIN orchestrator.batches b ON b.lane_id = o.lane_id AND b.first_id = o.first_id AND b.replay = o.replay
        AND b.retry = r.retry
    WHERE r.execution_id = p_execution
$$;
