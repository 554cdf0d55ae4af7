-- After a routing round: whether the router has caught up with the session, and if so the next write is told to
-- wake it again (`woken_at` cleared: 0029_wakeups_coalesced.sql). Not caught up while the session has events past
-- the position, or while a writer holds its row (its commit would not notify): the router comes back on its own.
-- True for a session that is gone. The row is locked with SKIP LOCKED, so a router never waits for a writer.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_wake_rearm(p_session text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
    v_woken timestamptz;
BEGIN
    SELECT s.last_event_id, s.woken_at INTO v_last, v_woken FROM orchestrator.sessions s
        WHERE s.id = p_session FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND THEN
        RETURN NOT EXISTS (SELECT 1 FROM orchestrator.sessions WHERE id = p_session);
    END IF;
    IF v_last > coalesce((SELECT c.routed_event_id FROM orchestrator.routing_cursors c
                          WHERE c.session_id = p_session), 0) THEN
        RETURN false;
    END IF;
    IF v_woken IS NOT NULL THEN
        UPDATE orchestrator.sessions SET woken_at = NULL WHERE id = p_session;
    END IF;
    RETURN true;
END
$$;
