-- The application's own events (`emit_events`), each checked against its type before this statement: appended
-- in order under the session's lock, in one transaction, as one statement (a function call per event cost
-- about 45 us of PostgreSQL's time an event). Each answers its id, in the order given, ids drawn in that order;
-- an event whose key the session holds answers that event's id and writes nothing, and a key given twice in
-- one call writes once; a key held or given before for another type refuses the call
-- (`orchestrator_reused_key`). A bulk emit without keys (most are) appends its events as given, with no look-up
-- (0014_emit_without_keys.sql).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_emit(
    p_session text, p_events jsonb, p_source jsonb, p_depth integer, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator.orchestrator_lock_session(p_session);
    v_ids bigint[];
    v_last bigint;
    v_reused bigint;
BEGIN
    IF v_lock <> 'ok' THEN
        RAISE EXCEPTION 'orchestrator: 0 % 0', v_lock USING ERRCODE = 'P0001';
    END IF;
    IF NOT EXISTS (SELECT 1 FROM jsonb_array_elements(p_events) g(x) WHERE g.x ? 'key') THEN
        -- No key to look up or to give twice (a bulk emit's usual call): appended as given.
        WITH written AS (
            INSERT INTO orchestrator.events (id, session_id, type, source, depth, data, traceparent, cause)
            SELECT o.id, p_session, o.x ->> 'type',
                   CASE WHEN o.x ? 'client' THEN coalesce(p_source, '{}') || jsonb_build_object('client',
                       o.x ->> 'client')
                        ELSE coalesce(p_source, '{}') END,
                   p_depth, o.x -> 'data', p_traceparent, p_cause
            FROM (SELECT nextval('orchestrator.event_ids'::regclass) AS id, g.x
                  FROM (SELECT g.x FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n) ORDER BY g.n) g) o
            RETURNING id)
        SELECT array_agg(w.id ORDER BY w.id) INTO v_ids FROM written w;
        UPDATE orchestrator.sessions SET last_event_id = v_ids[cardinality(v_ids)] WHERE id = p_session
            AND last_event_id < v_ids[cardinality(v_ids)];
        RETURN QUERY SELECT u.id FROM unnest(v_ids) AS u(id);
        RETURN;
    END IF;
    v_reused := orchestrator.orchestrator_reused_key(p_session, p_events);
    IF v_reused IS NOT NULL THEN
        RAISE EXCEPTION 'orchestrator: % key_reused 0', v_reused USING ERRCODE = 'P0001';
    END IF;
    WITH given AS (
        SELECT g.n, g.x, g.x ->> 'key' AS key,
               row_number() OVER (PARTITION BY g.x ->> 'key' ORDER BY g.n) AS nth
        FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n)
    ), known AS (
        SELECT g.n, e.id FROM given g JOIN orchestrator.events e ON e.session_id = p_session
            AND e.idempotency_key = g.key
    ), numbered AS MATERIALIZED (
        -- nextval over rows already in order: ids follow the events' order.
        SELECT o.n, o.x, o.key, nextval('orchestrator.event_ids'::regclass) AS id
        FROM (SELECT g.n, g.x, g.key FROM given g
              WHERE NOT EXISTS (SELECT 1 FROM known k WHERE k.n = g.n)
                AND (g.key IS NULL OR g.nth = 1)
              ORDER BY g.n) o
    ), written AS (
        INSERT INTO orchestrator.events (id, session_id, type, source, depth, data, idempotency_key, traceparent, cause)
        SELECT b.id, p_session, b.x ->> 'type',
               CASE WHEN b.x ? 'client' THEN coalesce(p_source, '{}') || jsonb_build_object('client', b.x ->> 'client')
                    ELSE coalesce(p_source, '{}') END,
               p_depth, b.x -> 'data', b.key, p_traceparent, p_cause
        FROM numbered b ORDER BY b.n
    )
    SELECT array_agg(coalesce(k.id, b.id, (SELECT d.id FROM numbered d WHERE d.key = g.key)) ORDER BY g.n)
    INTO v_ids
    FROM given g LEFT JOIN known k ON k.n = g.n LEFT JOIN numbered b ON b.n = g.n;
    v_last := (SELECT max(i) FROM unnest(v_ids) i);
    UPDATE orchestrator.sessions SET last_event_id = v_last WHERE id = p_session AND last_event_id < v_last;
    RETURN QUERY SELECT u.id FROM unnest(v_ids) WITH ORDINALITY AS u(id, n) ORDER BY u.n;
END
$$;
