-- Appends the events (`[{type, data, client?, key?}]`) to the session, in order, all or none; answers their ids
-- (a key seen before answers the first event's; one held for another type is refused). Each type must be declared
-- and each `data` an object; the type's JSON schema is checked by the caller (the platform's commands and Python
-- helpers), not here. An application calls it in its own transaction (docs/transactions.md): the events commit or
-- roll back with its change, and the router sees them only once committed. A key may also be named as the commands
-- name it (`idempotency_key`); any other field is refused, never ignored (a misspelt key would emit twice). Every
-- name below carries the platform's schema, so it works from any caller's search path.
CREATE OR REPLACE FUNCTION orchestrator.emit_events(p_session text, p_events jsonb) RETURNS TABLE (event_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_bad record;
BEGIN
    IF jsonb_typeof(p_events) = 'array' AND jsonb_array_length(p_events) > 10000 THEN
        RAISE EXCEPTION 'events: at most 10000 in one call, not %', jsonb_array_length(p_events)
            USING ERRCODE = '22023';
    END IF;
    IF jsonb_typeof(p_events) = 'array' THEN
        SELECT g.n - 1 AS i, k.name INTO v_bad
        FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n),
             jsonb_object_keys(CASE WHEN jsonb_typeof(g.x) = 'object' THEN g.x ELSE '{}' END) AS k(name)
        WHERE k.name NOT IN ('type', 'data', 'key', 'idempotency_key', 'client')
           OR (k.name = 'idempotency_key' AND g.x ? 'key' AND g.x -> 'idempotency_key' <> 'null')
        ORDER BY g.n, k.name LIMIT 1;
        IF FOUND THEN
            RAISE EXCEPTION 'events.%.%: %', v_bad.i, v_bad.name,
                CASE WHEN v_bad.name = 'idempotency_key' THEN 'give the key once, as key or as idempotency_key'
                     ELSE 'not a field of an event (type, data, key or idempotency_key, client)' END
                USING ERRCODE = '22023';
        END IF;
        IF p_events @? '$[*].idempotency_key' THEN
            -- As `key` (a null one: none).
            p_events := (SELECT jsonb_agg(CASE WHEN NOT g.x ? 'idempotency_key' THEN g.x
                                               WHEN g.x -> 'idempotency_key' = 'null' THEN g.x - 'idempotency_key'
                                               ELSE (g.x - 'idempotency_key') || jsonb_build_object('key',
                                                   g.x -> 'idempotency_key') END ORDER BY g.n)
                         FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n));
        END IF;
    END IF;
    RETURN QUERY SELECT e.event_id FROM orchestrator.orchestrator_emit_checked(p_session, p_events) e;
END
$$;
