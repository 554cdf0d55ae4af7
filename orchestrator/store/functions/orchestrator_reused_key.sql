-- The place (from 0) of the first of `p_events` whose key the session holds for another kind of event, or null: no
-- retry of that one, so the emit is refused (`orchestrator_emit` in the door's terms, `orchestrator_emit_checked`
-- in the application's).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_reused_key(p_session text, p_events jsonb)
RETURNS bigint LANGUAGE sql STABLE AS $$
    SELECT g.n - 1 FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n)
        JOIN orchestrator.events e ON e.session_id = p_session AND e.idempotency_key = g.x ->> 'key'
    WHERE g.x ? 'key' AND e.type IS DISTINCT FROM g.x ->> 'type' ORDER BY g.n LIMIT 1
$$;
