-- The sessions with captured events staged (`captured_staged`, 0033_captured_staged.sql), up to `p_limit`, those
-- that waited longest first: what the router settles and routes every round interval.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_staged_sessions(p_limit integer) RETURNS SETOF text
LANGUAGE sql STABLE AS $$
    SELECT s.session_id FROM orchestrator.captured_staged s GROUP BY s.session_id ORDER BY min(s.id) LIMIT p_limit
$$;
