-- A session's lock on its count of runs running (`executions_per_session`): whoever records a run of the session
-- (a lane's record, `start_execution`) counts the session's running executions under it, so runs recorded at once
-- cannot all pass the limit. Taken after the session's row and the listener's advisory locks (fires, then keys)
-- and before any execution's or lane's row, and held by nothing that then waits for a listener's lock: its holders
-- wait only for rows later in the order (docs/decisions.md, "One lock order"). Not the session's row FOR NO KEY
-- UPDATE: that would
-- queue every record behind the session's writers, where this queues only records of runs behind each other.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_executions_lock(p_session text)
RETURNS void LANGUAGE sql AS $$
    SELECT pg_advisory_xact_lock(hashtext('executions:' || p_session))
$$;
