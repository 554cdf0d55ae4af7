-- An object's write and its event, under the session lock its caller holds: an outcome (ok, replayed,
-- rev_conflict, key_reused), the rev and the event id.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_object_row(
    p_session text, p_alias text, p_value jsonb, p_if_rev integer, p_source jsonb, p_depth integer, p_key text,
    p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_outcome text, o_rev integer, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_rev integer;
    v_event bigint;
    v_same boolean;
BEGIN
    IF p_key IS NOT NULL THEN
        SELECT e.id, (e.data ->> 'rev')::integer, e.type = 'object.written' AND e.alias = p_alias
            INTO v_event, v_rev, v_same
            FROM orchestrator.events e WHERE e.session_id = p_session AND e.idempotency_key = p_key;
        IF FOUND THEN
            -- The key of another write (another alias, another kind): no retry of this one, refused.
            RETURN QUERY SELECT CASE WHEN v_same THEN 'replayed' ELSE 'key_reused' END, v_rev, v_event;
            RETURN;
        END IF;
    END IF;
    SELECT o.rev INTO v_rev FROM orchestrator.objects o WHERE o.session_id = p_session AND o.alias = p_alias;
    IF p_if_rev IS NOT NULL AND coalesce(v_rev, 0) <> p_if_rev THEN
        RETURN QUERY SELECT 'rev_conflict'::text, coalesce(v_rev, 0), NULL::bigint;
        RETURN;
    END IF;
    INSERT INTO orchestrator.objects AS o (session_id, alias, value, rev) VALUES (p_session, p_alias, p_value, 1)
        ON CONFLICT (session_id, alias) DO UPDATE
        SET value = EXCLUDED.value, rev = o.rev + 1, updated_at = clock_timestamp()
        RETURNING o.rev INTO v_rev;
    v_event := nextval('orchestrator.event_ids'::regclass);
    INSERT INTO orchestrator.events (id, session_id, type, alias, source, depth, data, idempotency_key, traceparent,
        cause)
        VALUES (v_event, p_session, 'object.written', p_alias, p_source, p_depth,
                jsonb_build_object('rev', v_rev), p_key, p_traceparent, p_cause);
    RETURN QUERY SELECT 'ok'::text, v_rev, v_event;
END
$$;
