-- After a routing round: whether the router has caught up with the session, and if so the next write is told to
-- wake it again (`woken_at` cleared: 0029_wakeups_coalesced.sql). Not caught up while the session has events past
-- the position, or while a writer holds its row with the mark set (its commit would not notify): the router comes
-- back on its own. True for a session that is gone. Read without a lock first: a mark already clear needs no
-- write (a writer in flight saw it clear, or will, and notifies), and the row is locked with SKIP LOCKED only to
-- clear one, so a router never waits for a writer.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_wake_rearm(p_session text) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    v_last bigint;
    v_woken timestamptz;
    v_routed bigint := coalesce((SELECT c.routed_event_id FROM orchestrator.routing_cursors c
                                 WHERE c.session_id = p_session), 0);
BEGIN
    SELECT s.last_event_id, s.woken_at INTO v_last, v_woken FROM orchestrator.sessions s WHERE s.id = p_session;
    IF NOT FOUND THEN
        RETURN true;
    ELSIF v_last > v_routed THEN
        RETURN false;
    ELSIF v_woken IS NULL THEN
        RETURN true;
    END IF;
    SELECT s.last_event_id INTO v_last FROM orchestrator.sessions s
        WHERE s.id = p_session FOR NO KEY UPDATE SKIP LOCKED;
    IF NOT FOUND OR v_last > v_routed THEN
        RETURN false;
    END IF;
    UPDATE orchestrator.sessions SET woken_at = NULL WHERE id = p_session;
    RETURN true;
END
$$;
