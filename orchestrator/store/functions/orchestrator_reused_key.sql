-- The place (from 0) of the first of `p_events` whose key names another kind of event, or null: a key the session
-- holds for another type, or one an earlier event of the same call gives with another type (each event's type is
-- compared with that of its key's first event in the call: one pass, whatever the call's size). No retry of that
-- one, so the emit is refused (`orchestrator_emit` in the door's terms, `orchestrator_emit_checked` in the
-- application's); the same key given twice with one type is one event, written once.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_reused_key(p_session text, p_events jsonb)
RETURNS bigint LANGUAGE sql STABLE AS $$
    WITH given AS (
        SELECT g.n, g.x ->> 'key' AS key, g.x ->> 'type' AS type,
               first_value(g.x ->> 'type') OVER (PARTITION BY g.x ->> 'key' ORDER BY g.n) AS first_type
        FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n) WHERE g.x ->> 'key' IS NOT NULL
    )
    SELECT min(n) - 1 FROM (
        SELECT g.n FROM given g
            JOIN orchestrator.events e ON e.session_id = p_session AND e.idempotency_key = g.key
        WHERE e.type IS DISTINCT FROM g.type
        UNION ALL
        SELECT g.n FROM given g WHERE g.type IS DISTINCT FROM g.first_type
    ) r
$$;
