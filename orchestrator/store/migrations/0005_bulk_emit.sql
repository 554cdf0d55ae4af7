-- Events of the application's own appended as one statement, not one function call per event: a plpgsql loop
-- over `emit_events` of a thousand cost about 45 us of PostgreSQL's time per event (bench.bulk_events), most of
-- it the per-event call, its INSERT and its notification. What it answers is unchanged: an id per event, in the
-- order given, ids drawn in that order under the session's lock; an event whose idempotency key the session
-- already holds answers that event's id and writes nothing, and a key given twice in one call writes once.
CREATE OR REPLACE FUNCTION orchestrator_emit(
    p_session text, p_events jsonb, p_source jsonb, p_depth integer, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator_lock_session(p_session);
    v_ids bigint[];
BEGIN
    IF v_lock <> 'ok' THEN
        RAISE EXCEPTION 'orchestrator: 0 % 0', v_lock USING ERRCODE = 'P0001';
    END IF;
    WITH given AS (
        SELECT g.n, g.x, g.x ->> 'key' AS key FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n)
    ), known AS (
        SELECT g.n, e.id FROM given g JOIN events e ON e.session_id = p_session AND e.idempotency_key = g.key
    ), numbered AS MATERIALIZED (
        -- nextval over rows already in order: ids follow the events' order.
        SELECT o.n, o.x, o.key, nextval('event_ids') AS id
        FROM (SELECT g.n, g.x, g.key FROM given g
              WHERE NOT EXISTS (SELECT 1 FROM known k WHERE k.n = g.n)
                AND (g.key IS NULL OR g.n = (SELECT min(d.n) FROM given d WHERE d.key = g.key))
              ORDER BY g.n) o
    ), written AS (
        INSERT INTO events (id, session_id, type, source, depth, data, idempotency_key, traceparent, cause)
        SELECT b.id, p_session, b.x ->> 'type',
               CASE WHEN b.x ? 'client' THEN coalesce(p_source, '{}') || jsonb_build_object('client', b.x ->> 'client')
                    ELSE coalesce(p_source, '{}') END,
               p_depth, b.x -> 'data', b.key, p_traceparent, p_cause
        FROM numbered b ORDER BY b.n
    )
    SELECT array_agg(coalesce(k.id, b.id, (SELECT d.id FROM numbered d WHERE d.key = g.key)) ORDER BY g.n)
    INTO v_ids
    FROM given g LEFT JOIN known k ON k.n = g.n LEFT JOIN numbered b ON b.n = g.n;
    UPDATE sessions SET last_event_id = (SELECT max(i) FROM unnest(v_ids) i)
        WHERE id = p_session AND last_event_id < (SELECT max(i) FROM unnest(v_ids) i);
    RETURN QUERY SELECT u.id FROM unnest(v_ids) WITH ORDINALITY AS u(id, n) ORDER BY u.n;
END
$$;

-- One notification per statement and session, not per event: PostgreSQL folds the duplicates of a transaction
-- anyway, but calling the trigger a thousand times for a bulk write cost 6 us an event.
DROP TRIGGER events_notify ON events;
CREATE FUNCTION notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('orchestrator_events', s.session_id) FROM (SELECT DISTINCT session_id FROM written) s;
    RETURN NULL;
END
$$;
CREATE TRIGGER events_notify AFTER INSERT ON events REFERENCING NEW TABLE AS written
    FOR EACH STATEMENT EXECUTE FUNCTION notify_events();
DROP FUNCTION notify_event();
