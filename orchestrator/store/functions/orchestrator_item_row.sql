-- An item's post and its event, under the session lock its caller holds: an outcome (ok, replayed, key_reused), the item
-- id and the event id. Items never change: posting an id that is already there answers the first post.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_item_row(
    p_session text, p_alias text, p_id text, p_type text, p_role text, p_message text, p_message_json jsonb,
    p_preview text, p_metadata jsonb, p_source jsonb, p_depth integer, p_key text, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_outcome text, o_item text, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_item text;
    v_event bigint;
    v_same boolean;
BEGIN
    IF p_key IS NOT NULL THEN
        SELECT e.item ->> 'id', e.id, e.type = 'thread.item_posted' AND e.alias = p_alias INTO v_item, v_event, v_same
            FROM orchestrator.events e WHERE e.session_id = p_session AND e.idempotency_key = p_key;
        IF FOUND THEN
            -- The key of another write (another thread, another kind): no retry of this one, refused.
            RETURN QUERY SELECT CASE WHEN v_same THEN 'replayed' ELSE 'key_reused' END, v_item, v_event;
            RETURN;
        END IF;
    END IF;
    SELECT t.event_id INTO v_event FROM orchestrator.thread_items t
        WHERE t.session_id = p_session AND t.alias = p_alias AND t.id = p_id;
    IF FOUND THEN
        RETURN QUERY SELECT 'replayed'::text, p_id, v_event;
        RETURN;
    END IF;
    v_event := nextval('orchestrator.event_ids'::regclass);
    INSERT INTO orchestrator.events (id, session_id, type, alias, item, source, depth, idempotency_key, traceparent,
        cause)
        VALUES (v_event, p_session, 'thread.item_posted', p_alias,
                jsonb_strip_nulls(jsonb_build_object('id', p_id, 'type', p_type, 'role', p_role,
                                                     'message', p_preview)),
                p_source, p_depth, p_key, p_traceparent, p_cause);
    INSERT INTO orchestrator.thread_items (session_id, alias, id, type, role, message, message_json, metadata, source,
        event_id)
        VALUES (p_session, p_alias, p_id, p_type, p_role, p_message, p_message_json, p_metadata, p_source, v_event);
    RETURN QUERY SELECT 'ok'::text, p_id, v_event;
END
$$;
