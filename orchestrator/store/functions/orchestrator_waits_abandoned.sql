-- A run's waits and cancel watches still open when it ends: abandoned, their probes gone.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_waits_abandoned(p_execution text) RETURNS void
LANGUAGE sql AS $$
    WITH gone AS (
        UPDATE orchestrator.run_waits SET state = 'abandoned', ended_at = clock_timestamp()
        WHERE execution_id = p_execution AND state = 'open' RETURNING id)
    DELETE FROM orchestrator.wait_probes p USING gone WHERE p.wait_id = gone.id
$$;
