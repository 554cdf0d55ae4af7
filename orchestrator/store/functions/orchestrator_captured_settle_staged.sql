-- The router's round over staged captured events (`captured_staged`, 0033_captured_staged.sql): up to `p_limit`
-- sessions with events staged, those that waited longest first, each appended now unless a writer holds its
-- lock (`SKIP LOCKED`: that writer appends them at its own lock), in one call for all of them. Answers the
-- sessions appended, to be routed.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_settle_staged(p_limit integer) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    v_session text;
    v_status text;
BEGIN
    FOR v_session IN
        SELECT s.session_id FROM orchestrator.captured_staged s GROUP BY s.session_id ORDER BY min(s.id)
        LIMIT p_limit
    LOOP
        SELECT s.status INTO v_status FROM orchestrator.sessions s WHERE s.id = v_session
            FOR NO KEY UPDATE SKIP LOCKED;
        IF FOUND OR NOT EXISTS (SELECT 1 FROM orchestrator.sessions WHERE id = v_session) THEN
            IF orchestrator.orchestrator_captured_settle(v_session, v_status) > 0 THEN
                RETURN NEXT v_session;
            END IF;
        END IF;
    END LOOP;
END
$$;
