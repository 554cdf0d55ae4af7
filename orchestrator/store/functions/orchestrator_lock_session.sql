-- Whether the session is there and open, its row locked for the rest of the transaction (event ids in commit
-- order): 'ok', 'not_found' (also for one being deleted: 0003_retention.sql) or 'session_not_open'. What captured
-- changes staged before is appended first (`orchestrator_captured_settle`): their commits came before this
-- writer's, and so do their ids.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lock_session(p_session text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    SELECT s.status INTO v_status FROM orchestrator.sessions s WHERE s.id = p_session FOR NO KEY UPDATE;
    IF EXISTS (SELECT 1 FROM orchestrator.captured_staged WHERE session_id = p_session) THEN
        PERFORM orchestrator.orchestrator_captured_settle(p_session, v_status);
    END IF;
    IF v_status IS NULL OR v_status = 'deleting' THEN
        RETURN 'not_found';
    END IF;
    RETURN CASE WHEN v_status = 'open' THEN 'ok' ELSE 'session_not_open' END;
END
$$;
