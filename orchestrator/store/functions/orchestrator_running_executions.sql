-- The session's runs running now, a listener's and those started by hand alike: what `executions_per_session`
-- caps. One count for the lane's snapshot (the step's verdict) and for the records that check it again under the
-- session's executions lock (`orchestrator_executions_lock`), so a record refused as stale reads a count its
-- verdict refuses by.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_running_executions(p_session text)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT count(*) FROM orchestrator.executions x WHERE x.session_id = p_session AND x.status = 'running'
$$;
