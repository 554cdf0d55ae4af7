-- Where a session's stream now starts: how far retention trimmed it, and the oldest event the session still holds.
-- Below the trim only the events a lane still waits on are kept, so the oldest may lie below it: a read from there
-- answers it, and a `first_id` above it would name a start the reader has already been given events before.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_stream_start(p_session text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'trimmed_through', r.trimmed_through,
        'first_id', (SELECT e.id FROM orchestrator.events e WHERE e.session_id = p_session ORDER BY e.id LIMIT 1))
    FROM orchestrator.session_retention r WHERE r.session_id = p_session
$$;
