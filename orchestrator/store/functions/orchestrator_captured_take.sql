-- A captured statement's waiting events of one session (`captured_pending`), appended under the session's lock
-- as `emit_events` appends, and the waiting row gone; nothing when it went already. Without `emit_events`' checks:
-- the trigger made each event, of a type the capture declared (and keeps declared while it lasts), `data` an
-- object, no key. The session was open when the statement ran; one closed since fails the commit.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_take(p_id bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_session text;
    v_events jsonb;
    v_lock text;
    v_last bigint;
BEGIN
    DELETE FROM orchestrator.captured_pending WHERE id = p_id RETURNING for_session, events INTO v_session, v_events;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_lock := orchestrator.orchestrator_lock_session(v_session);
    IF v_lock = 'not_found' THEN
        RAISE EXCEPTION 'session_id: no session %', quote_literal(v_session) USING ERRCODE = 'P0002';
    ELSIF v_lock <> 'ok' THEN
        RAISE EXCEPTION 'session_id: session % is not open', quote_literal(v_session) USING ERRCODE = '55000';
    END IF;
    -- nextval over rows already in order: ids follow the statement's rows.
    WITH written AS (
        INSERT INTO orchestrator.events (id, session_id, type, source, depth, data)
        SELECT nextval('orchestrator.event_ids'::regclass), v_session, o.x ->> 'type',
               jsonb_build_object('client', o.x ->> 'client'), 0, o.x -> 'data'
        FROM (SELECT g.x FROM jsonb_array_elements(v_events) WITH ORDINALITY AS g(x, n) ORDER BY g.n) o
        RETURNING id)
    SELECT max(w.id) INTO v_last FROM written w;
    UPDATE orchestrator.sessions SET last_event_id = v_last WHERE id = v_session AND last_event_id < v_last;
END
$$;
