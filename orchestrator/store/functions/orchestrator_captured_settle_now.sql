-- The session's staged captured events appended now, by a reader (`p_wait`) or the router. A reader waits for
-- the session's lock a moment (another settle, or a router's round, holds it for milliseconds) and no longer,
-- failing with `lock_not_available` (55P03) past it, which its caller takes as "not now": a writer in a long
-- transaction appends them at its own lock (`orchestrator_lock_session`). No exception block here: its
-- subtransaction would make the session row's lock a MultiXact at every read. The router never waits (`SKIP
-- LOCKED`). Answers how many were appended, or null when the router did not have the lock.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_settle_now(p_session text, p_wait boolean)
RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    IF NOT EXISTS (SELECT 1 FROM orchestrator.captured_staged WHERE session_id = p_session) THEN
        RETURN 0;
    END IF;
    IF p_wait THEN
        -- For this transaction only: the caller's statement, which runs on its own.
        PERFORM set_config('lock_timeout', '200ms', true);
        SELECT s.status INTO v_status FROM orchestrator.sessions s WHERE s.id = p_session FOR NO KEY UPDATE;
    ELSE
        SELECT s.status INTO v_status FROM orchestrator.sessions s WHERE s.id = p_session
            FOR NO KEY UPDATE SKIP LOCKED;
        IF NOT FOUND AND EXISTS (SELECT 1 FROM orchestrator.sessions WHERE id = p_session) THEN
            RETURN NULL;
        END IF;
    END IF;
    RETURN orchestrator.orchestrator_captured_settle(p_session, v_status);
END
$$;
