-- Each event keeps the W3C traceparent of the span its write ran in (NULL when nothing was traced), so
-- the router, the lane's batch and the run it starts continue the trace of the write that caused them.
-- The hot writes gain the traceparent as a parameter: the old signatures are dropped rather than
-- overloaded, so a caller with the old argument list fails at once instead of writing untraced events.
-- The bodies are 0002's with the traceparent stored.

ALTER TABLE events ADD COLUMN traceparent text;

DROP FUNCTION orchestrator_write_object(text, text, jsonb, integer, jsonb, integer, text);
DROP FUNCTION orchestrator_post_thread_item(text, text, text, text, text, text, text, jsonb, jsonb, integer, text);

CREATE FUNCTION orchestrator_write_object(
    p_session text, p_alias text, p_value jsonb, p_if_rev integer, p_source jsonb, p_depth integer, p_key text,
    p_traceparent text
) RETURNS TABLE (o_outcome text, o_rev integer, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_rev integer;
    v_event bigint;
BEGIN
    SELECT s.status INTO v_status FROM sessions s WHERE s.id = p_session FOR UPDATE;
    IF NOT FOUND THEN
        RETURN QUERY SELECT 'not_found'::text, NULL::integer, NULL::bigint;
        RETURN;
    END IF;
    IF v_status <> 'open' THEN
        RETURN QUERY SELECT 'session_not_open'::text, NULL::integer, NULL::bigint;
        RETURN;
    END IF;
    IF p_key IS NOT NULL THEN
        SELECT e.id, (e.data ->> 'rev')::integer INTO v_event, v_rev
            FROM events e WHERE e.session_id = p_session AND e.idempotency_key = p_key;
        IF FOUND THEN
            RETURN QUERY SELECT 'replayed'::text, v_rev, v_event;
            RETURN;
        END IF;
    END IF;
    SELECT o.rev INTO v_rev FROM objects o WHERE o.session_id = p_session AND o.alias = p_alias;
    IF p_if_rev IS NOT NULL AND coalesce(v_rev, 0) <> p_if_rev THEN
        RETURN QUERY SELECT 'rev_conflict'::text, coalesce(v_rev, 0), NULL::bigint;
        RETURN;
    END IF;
    INSERT INTO objects AS o (session_id, alias, value, rev) VALUES (p_session, p_alias, p_value, 1)
        ON CONFLICT (session_id, alias) DO UPDATE
        SET value = EXCLUDED.value, rev = o.rev + 1, updated_at = clock_timestamp()
        RETURNING o.rev INTO v_rev;
    v_event := nextval('event_ids');
    INSERT INTO events (id, session_id, type, alias, source, depth, data, idempotency_key, traceparent)
        VALUES (v_event, p_session, 'object.written', p_alias, p_source, p_depth,
                jsonb_build_object('rev', v_rev), p_key, p_traceparent);
    UPDATE sessions SET last_event_id = v_event WHERE id = p_session;
    RETURN QUERY SELECT 'ok'::text, v_rev, v_event;
END
$$;

CREATE FUNCTION orchestrator_post_thread_item(
    p_session text, p_alias text, p_id text, p_type text, p_role text, p_message text, p_preview text,
    p_metadata jsonb, p_source jsonb, p_depth integer, p_key text, p_traceparent text
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
    INSERT INTO thread_items (session_id, alias, id, type, role, message, metadata, source, event_id)
        VALUES (p_session, p_alias, p_id, p_type, p_role, p_message, p_metadata, p_source, v_event);
    UPDATE sessions SET last_event_id = v_event WHERE id = p_session;
    RETURN QUERY SELECT 'ok'::text, p_id, v_event;
END
$$;
