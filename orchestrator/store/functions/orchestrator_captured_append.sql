-- The path of captured events before 0033_captured_staged.sql (held in `captured_pending`, appended at the commit's
-- start), kept for the transactions of the release before that are in flight while this one starts; a later
-- migration drops it with the table.
-- A captured statement's events of one session, appended under the session's lock as `emit_events` appends,
-- without its checks: the trigger made each event, of a type the capture declared (and keeps declared while it
-- lasts), `data` an object, no key, its cause the transaction's (`orchestrator_transaction_cause`). The session
-- was open when the statement ran; one closed since fails the transaction.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_append(p_session text, p_events jsonb) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator.orchestrator_lock_session(p_session);
    v_cause jsonb := orchestrator.orchestrator_transaction_cause();
    v_last bigint;
BEGIN
    IF v_lock = 'not_found' THEN
        RAISE EXCEPTION 'session_id: no session %', quote_literal(p_session) USING ERRCODE = 'P0002';
    ELSIF v_lock <> 'ok' THEN
        RAISE EXCEPTION 'session_id: session % is not open', quote_literal(p_session) USING ERRCODE = '55000';
    END IF;
    -- nextval over rows already in order: ids follow the statement's rows.
    WITH written AS (
        INSERT INTO orchestrator.events (id, session_id, type, source, depth, data, cause)
        SELECT nextval('orchestrator.event_ids'::regclass), p_session, o.x ->> 'type',
               jsonb_build_object('client', o.x ->> 'client'), 0, o.x -> 'data', v_cause
        FROM (SELECT g.x FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n) ORDER BY g.n) o
        RETURNING id)
    SELECT max(w.id) INTO v_last FROM written w;
    UPDATE orchestrator.sessions SET last_event_id = v_last WHERE id = p_session AND last_event_id < v_last;
END
$$;
