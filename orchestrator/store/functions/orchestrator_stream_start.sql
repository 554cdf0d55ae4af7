-- Where a session's stream now starts: how far it was trimmed, and the first event it keeps past that.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_stream_start(p_session text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'trimmed_through', r.trimmed_through,
        'first_id', (SELECT e.id FROM orchestrator.events e WHERE e.session_id = p_session AND e.id > r.trimmed_through
                     ORDER BY e.id LIMIT 1))
    FROM orchestrator.session_retention r WHERE r.session_id = p_session
$$;
