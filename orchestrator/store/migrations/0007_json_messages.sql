-- A `json` thread item's message may be any JSON value (the seed's agent inbox posts the failures as a json
-- block): it is kept as jsonb beside the text column, which holds every other item's message. An item has
-- one or the other. The hot write gains the parameter; the old signature is dropped (see 0005).

ALTER TABLE thread_items ADD COLUMN message_json jsonb;

DROP FUNCTION orchestrator_post_thread_item(text, text, text, text, text, text, text, jsonb, jsonb, integer, text, text);

CREATE FUNCTION orchestrator_post_thread_item(
    p_session text, p_alias text, p_id text, p_type text, p_role text, p_message text, p_message_json jsonb,
    p_preview text, p_metadata jsonb, p_source jsonb, p_depth integer, p_key text, p_traceparent text
) RETURNS TABLE (o_outcome text, o_item text, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_item text;
    v_event bigint;
BEGIN
    SELECT s.status INTO v_status FROM sessions s WHERE s.id = p_session FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::text, NULL::bigint;
        RETURN;
    END IF;
    IF v_status <> 'open' THEN
        RETURN QUERY SELECT 'session_not_open'::text, NULL::text, NULL::bigint;
        RETURN;
    END IF;
    IF p_key IS NOT NULL THEN
        SELECT e.item ->> 'id', e.id INTO v_item, v_event
            FROM events e WHERE e.session_id = p_session AND e.idempotency_key = p_key;
        IF FOUND THEN
            RETURN QUERY SELECT 'replayed'::text, v_item, v_event;
            RETURN;
        END IF;
    END IF;
    -- Items never change: posting an id that is already there answers the first post.
    SELECT t.event_id INTO v_event FROM thread_items t
        WHERE t.session_id = p_session AND t.alias = p_alias AND t.id = p_id;
    IF FOUND THEN
        RETURN QUERY SELECT 'replayed'::text, p_id, v_event;
        RETURN;
    END IF;
    v_event := nextval('event_ids');
    INSERT INTO events (id, session_id, type, alias, item, source, depth, idempotency_key, traceparent)
        VALUES (v_event, p_session, 'thread.item_posted', p_alias,
                jsonb_strip_nulls(jsonb_build_object('id', p_id, 'type', p_type, 'role', p_role,
                                                     'message', p_preview)),
                p_source, p_depth, p_key, p_traceparent);
    INSERT INTO thread_items (session_id, alias, id, type, role, message, message_json, metadata, source, event_id)
        VALUES (p_session, p_alias, p_id, p_type, p_role, p_message, p_message_json, p_metadata, p_source, v_event);
    UPDATE sessions SET last_event_id = v_event WHERE id = p_session;
    RETURN QUERY SELECT 'ok'::text, p_id, v_event;
END
$$;
