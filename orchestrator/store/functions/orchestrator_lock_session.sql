-- Whether the session is there and open, its row locked for the rest of the transaction (event ids in commit
-- order): 'ok', 'not_found' (also for one being deleted: 0003_retention.sql) or 'session_not_open'.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lock_session(p_session text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    SELECT s.status INTO v_status FROM orchestrator.sessions s WHERE s.id = p_session FOR NO KEY UPDATE;
    IF NOT FOUND OR v_status = 'deleting' THEN
        RETURN 'not_found';
    END IF;
    RETURN CASE WHEN v_status = 'open' THEN 'ok' ELSE 'session_not_open' END;
END
$$;
