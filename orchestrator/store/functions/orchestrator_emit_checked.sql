-- `emit_events` without its bound on one call.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_emit_checked(p_session text, p_events jsonb)
RETURNS TABLE (event_id bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text;
    v_bad record;
    v_reused bigint;
    v_before bigint;
    v_after bigint;
BEGIN
    IF p_events IS NULL OR jsonb_typeof(p_events) <> 'array' OR jsonb_array_length(p_events) = 0 THEN
        RAISE EXCEPTION 'events: a non-empty JSON array of {type, data} is required' USING ERRCODE = '22023';
    END IF;
    SELECT g.n - 1 AS i, g.x INTO v_bad
    FROM jsonb_array_elements(p_events) WITH ORDINALITY AS g(x, n)
    WHERE jsonb_typeof(g.x) <> 'object'
       OR jsonb_typeof(g.x -> 'type') IS DISTINCT FROM 'string'
       OR NOT EXISTS (SELECT 1 FROM orchestrator.event_types t WHERE t.name = g.x ->> 'type')
       OR jsonb_typeof(g.x -> 'data') IS DISTINCT FROM 'object'
       OR (g.x ? 'key' AND jsonb_typeof(g.x -> 'key') <> 'string')
       OR (g.x ? 'client' AND jsonb_typeof(g.x -> 'client') <> 'string')
    ORDER BY g.n LIMIT 1;
    IF FOUND THEN
        IF jsonb_typeof(v_bad.x) <> 'object' THEN
            RAISE EXCEPTION 'events.%: an object {type, data} is required', v_bad.i USING ERRCODE = '22023';
        ELSIF jsonb_typeof(v_bad.x -> 'type') IS DISTINCT FROM 'string' THEN
            RAISE EXCEPTION 'events.%.type: a string is required', v_bad.i USING ERRCODE = '22023';
        ELSIF jsonb_typeof(v_bad.x -> 'data') IS DISTINCT FROM 'object' THEN
            RAISE EXCEPTION 'events.%.data: an object is required', v_bad.i USING ERRCODE = '22023';
        ELSIF v_bad.x ? 'key' AND jsonb_typeof(v_bad.x -> 'key') <> 'string' THEN
            RAISE EXCEPTION 'events.%.key: a string is required', v_bad.i USING ERRCODE = '22023';
        ELSIF v_bad.x ? 'client' AND jsonb_typeof(v_bad.x -> 'client') <> 'string' THEN
            RAISE EXCEPTION 'events.%.client: a string is required', v_bad.i USING ERRCODE = '22023';
        END IF;
        RAISE EXCEPTION 'events.%.type: % is not a declared event type', v_bad.i, v_bad.x -> 'type'
            USING ERRCODE = '22023';
    END IF;
    -- The lock appends what captured changes staged first, this transaction's own among them: a captured change
    -- earlier in the transaction comes first in the stream, as it came first in the transaction.
    v_lock := orchestrator.orchestrator_lock_session(p_session);
    IF v_lock = 'not_found' THEN
        RAISE EXCEPTION 'session_id: no session %', quote_literal(coalesce(p_session, 'null'))
            USING ERRCODE = 'P0002';
    ELSIF v_lock <> 'ok' THEN
        RAISE EXCEPTION 'session_id: session % is not open', quote_literal(p_session) USING ERRCODE = '55000';
    END IF;
    -- Refused here in the application's words before `orchestrator_emit` refuses it in the door's.
    v_reused := orchestrator.orchestrator_reused_key(p_session, p_events);
    IF v_reused IS NOT NULL THEN
        RAISE EXCEPTION 'events.%.key: this key names another kind of event (the session''s, or one given before '
            'it in this call)', v_reused USING ERRCODE = '22023';
    END IF;
    -- The session's last id past what the lock appended (other transactions' captured changes, which keep their
    -- commits' times): the ids after it this call appends.
    SELECT s.last_event_id INTO v_before FROM orchestrator.sessions s WHERE s.id = p_session;
    RETURN QUERY SELECT e.o_event FROM orchestrator.orchestrator_emit(p_session, p_events, '{}', 0, NULL,
        orchestrator.orchestrator_transaction_cause()) e;
    SELECT s.last_event_id INTO v_after FROM orchestrator.sessions s WHERE s.id = p_session;
    IF v_after > v_before THEN
        -- Noted for the commit, which gives them its time (`orchestrator_emits_stamp`, 0036), not this call's: a
        -- key answered again names an event of its own commit, appended by none.
        DELETE FROM orchestrator.emits_unstamped WHERE session_id = p_session AND tx <> pg_current_xact_id();
        INSERT INTO orchestrator.emits_unstamped AS u (session_id, ids)
            VALUES (p_session, int8multirange(int8range(v_before + 1, v_after, '[]')))
            ON CONFLICT (session_id) DO UPDATE SET ids = u.ids + EXCLUDED.ids;
    END IF;
END
$$;
