-- The session's staged captured events (`captured_staged`, 0033_captured_staged.sql) appended now, for a caller
-- that holds the session's lock (`orchestrator_lock_session`) and read its status: those of committed
-- transactions, in their commits' order, then the caller's own transaction's, in the order of its statements.
-- Those of a session that is gone or being deleted go with it; a session closed since its change's statement ran
-- still gets them (the change was made while it was open). An event's time is its commit's (when commits are
-- stamped): the listener versions in effect then route it, as they route any event. Answers how many events were
-- appended.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_settle(p_session text, p_status text) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_stamped boolean := current_setting('track_commit_timestamp') = 'on';
    v_last bigint;
    v_count integer;
BEGIN
    IF p_status IS NULL OR p_status = 'deleting' THEN
        DELETE FROM orchestrator.captured_staged WHERE session_id = p_session;
        RETURN 0;
    END IF;
    -- nextval over rows already in order: ids follow the commits, then each commit's statements and rows. A row
    -- of the caller's own transaction has no commit time yet: it comes last.
    WITH taken AS (
        DELETE FROM orchestrator.captured_staged s WHERE s.session_id = p_session
        RETURNING s.id, s.events, s.cause,
                  CASE WHEN v_stamped THEN pg_xact_commit_timestamp(s.xmin) END AS committed_at),
    written AS (
        INSERT INTO orchestrator.events (id, session_id, type, source, depth, data, cause, created_at)
        SELECT nextval('orchestrator.event_ids'::regclass), p_session, o.x ->> 'type',
               jsonb_build_object('client', o.x ->> 'client'), 0, o.x -> 'data', o.cause,
               coalesce(o.committed_at, clock_timestamp())
        FROM (SELECT g.x, t.cause, t.committed_at FROM taken t,
                     jsonb_array_elements(t.events) WITH ORDINALITY AS g(x, n)
              ORDER BY t.committed_at NULLS LAST, t.id, g.n) o
        RETURNING id)
    SELECT max(w.id), count(*) INTO v_last, v_count FROM written w;
    IF v_count > 0 THEN
        UPDATE orchestrator.sessions SET last_event_id = v_last WHERE id = p_session AND last_event_id < v_last;
    END IF;
    RETURN v_count;
END
$$;
