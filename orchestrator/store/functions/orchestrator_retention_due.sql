-- Sessions due for a look, each taken by one worker: its `due_at` moved on by the lease (`p_lease` seconds), so
-- another worker takes it again only when this one died with it. Answers what each needs: 'purge' (being
-- deleted, or closed past its retention: `p_closed` seconds unless its own) or 'trim'.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_retention_due(p_limit integer, p_lease double precision,
    p_closed double precision)
RETURNS TABLE (o_session text, o_action text) LANGUAGE sql AS $$
    WITH due AS (
        SELECT r.session_id FROM orchestrator.session_retention r WHERE r.due_at <= clock_timestamp()
        ORDER BY r.due_at LIMIT p_limit FOR UPDATE SKIP LOCKED),
    taken AS (
        UPDATE orchestrator.session_retention r SET due_at = clock_timestamp() + make_interval(secs => p_lease)
        FROM due WHERE r.session_id = due.session_id RETURNING r.*)
    SELECT t.session_id,
           CASE WHEN s.status = 'deleting'
                  OR (s.status = 'closed' AND s.closed_at
                      <= clock_timestamp() - make_interval(secs => coalesce(t.closed_session_seconds, p_closed)))
                THEN 'purge' ELSE 'trim' END
    FROM taken t JOIN orchestrator.sessions s ON s.id = t.session_id
$$;
