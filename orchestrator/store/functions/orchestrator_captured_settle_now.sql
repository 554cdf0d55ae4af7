-- The session's staged captured events appended now by a reader or the router, which take the session's lock
-- only if no writer holds it (a writer settles them itself, at its own lock: `orchestrator_lock_session`). Answers
-- how many were appended, or null when a writer held the session.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_settle_now(p_session text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM orchestrator.captured_staged WHERE session_id = p_session) THEN
        RETURN 0;
    END IF;
    SELECT s.status INTO v_status FROM orchestrator.sessions s WHERE s.id = p_session FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND AND EXISTS (SELECT 1 FROM orchestrator.sessions WHERE id = p_session) THEN
        RETURN NULL;
    END IF;
    RETURN orchestrator.orchestrator_captured_settle(p_session, v_status);
END
$$;
