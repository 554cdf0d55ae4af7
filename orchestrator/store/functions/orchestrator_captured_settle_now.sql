-- The session's staged captured events appended now, by a reader of the session's events. It waits for the
-- session's lock a moment (the router's append, or another reader's, holds it for milliseconds) and no longer,
-- failing with `lock_not_available` (55P03) past it, which its caller takes as "not now": a writer in a long
-- transaction appends them at its own lock (`orchestrator_lock_session`). No exception block here: its
-- subtransaction would make the session row's lock a MultiXact at every read. Answers how many were appended.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_settle_now(p_session text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM orchestrator.captured_staged WHERE session_id = p_session) THEN
        RETURN 0;
    END IF;
    -- For this transaction only: the caller's statement, which runs on its own.
    PERFORM set_config('lock_timeout', '200ms', true);
    SELECT s.status INTO v_status FROM orchestrator.sessions s WHERE s.id = p_session FOR NO KEY UPDATE;
    RETURN orchestrator.orchestrator_captured_settle(p_session, v_status);
END
$$;
