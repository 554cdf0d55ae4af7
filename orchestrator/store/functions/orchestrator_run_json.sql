-- A run holding one of a lane's slots, as the lane step reads it (`core/lane_snapshot`), with when its batch
-- was taken.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_run_json(r orchestrator.lane_runs)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'run_key', r.run_key, 'batch_id', r.batch_id, 'execution_id', r.execution_id, 'retry', r.retry,
        'due_at', extract(epoch FROM r.due_at), 'plan', r.plan,
        'since', (SELECT extract(epoch FROM b.created_at) FROM orchestrator.batches b WHERE b.id = r.batch_id))
$$;
