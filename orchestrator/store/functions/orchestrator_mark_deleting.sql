-- A session to be deleted, from here on 'deleting' (or, with `p_closed` seconds, only one closed for longer
-- than its retention): its alias free for a new session, its routing stopped and nothing left waiting in its
-- lanes (so none is nudged for it again). Answers whether it was marked now.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_mark_deleting(p_session text, p_closed double precision)
RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
    -- The session's row before anything else, as the engine's functions take it (0002_lanes.sql's lock order).
    PERFORM 1 FROM orchestrator.sessions WHERE id = p_session FOR UPDATE;
    UPDATE orchestrator.sessions s SET status = 'deleting', alias = NULL, drain_through = NULL
    WHERE s.id = p_session AND s.status <> 'deleting'
      AND (p_closed IS NULL OR (s.status = 'closed' AND s.closed_at <= clock_timestamp() - make_interval(
           secs => coalesce((SELECT r.closed_session_seconds FROM orchestrator.session_retention r
               WHERE r.session_id = s.id),
                            p_closed))));
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    DELETE FROM orchestrator.routing_cursors WHERE session_id = p_session;
    -- Its lanes' rows before their queues' (as a batch's record takes them), each set in one order.
    PERFORM 1 FROM orchestrator.lanes WHERE session_id = p_session ORDER BY listener, lane FOR UPDATE;
    UPDATE orchestrator.lanes SET fired_through = routed_through WHERE session_id = p_session
        AND fired_through < routed_through;
    DELETE FROM orchestrator.lane_queue q USING orchestrator.lanes l WHERE l.id = q.lane_id
        AND l.session_id = p_session;
    RETURN true;
END
$$;
