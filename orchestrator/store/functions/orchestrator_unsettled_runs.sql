-- Runs the records call running and nobody looked at for `p_older` seconds, marked looked at now (one sweep
-- each: SKIP LOCKED), with what a start can be made from: their batch's state, or the input kept.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_unsettled_runs(p_older double precision, p_limit integer)
RETURNS TABLE (
    id text, session_id text, workflow text, listener text, lane text, run_key text, depth integer,
    age double precision, batch_state text, start_input jsonb
) LANGUAGE sql AS $$
    WITH due AS (
        SELECT x.id FROM orchestrator.executions x WHERE x.status = 'running'
            AND x.checked_at < clock_timestamp() - make_interval(secs => p_older)
        ORDER BY x.checked_at LIMIT p_limit FOR UPDATE SKIP LOCKED),
    looked AS (
        UPDATE orchestrator.executions x SET checked_at = clock_timestamp() FROM due WHERE x.id = due.id RETURNING x.*)
    SELECT l.id, l.session_id, l.workflow, l.listener, l.lane, l.run_key, l.depth,
           extract(epoch FROM clock_timestamp() - l.started_at)::float8,
           (orchestrator.orchestrator_run_batch(l.id)).state, l.start_input
    FROM looked l
$$;
