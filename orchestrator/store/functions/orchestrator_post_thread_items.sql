-- Many items of one request in one statement and one transaction, all or none, the session locked once and its
-- `last_event_id` moved once (`orchestrator_write_objects`' twin, its request's key too).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_post_thread_items(
    p_session text, p_alias text, p_items jsonb, p_key text, p_source jsonb, p_depth integer, p_traceparent text,
    p_cause jsonb
) RETURNS TABLE (o_item text, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator.orchestrator_lock_session(p_session);
    v_key text;
    v_item jsonb;
    v_index integer := 0;
    v_last bigint := 0;
    r record;
BEGIN
    IF v_lock <> 'ok' THEN
        RAISE EXCEPTION 'orchestrator: 0 % 0', v_lock USING ERRCODE = 'P0001';
    END IF;
    v_key := orchestrator.orchestrator_request_key(p_session, p_key, true);
    IF v_key = 'key_reused' THEN
        RAISE EXCEPTION 'orchestrator: 0 key_reused 0' USING ERRCODE = 'P0001';
    END IF;
    FOR v_item IN SELECT x FROM jsonb_array_elements(p_items) x LOOP
        SELECT * INTO r FROM orchestrator.orchestrator_item_row(
            p_session, p_alias, v_item ->> 'id', v_item ->> 'type', v_item ->> 'role', v_item ->> 'message',
            v_item -> 'message_json', v_item ->> 'preview', v_item -> 'metadata', p_source, p_depth,
            p_key || ':' || v_index, p_traceparent, p_cause);
        -- A retry that writes what the first request did not is another request.
        IF r.o_outcome = 'ok' AND v_key = 'retry' THEN
            r.o_outcome := 'key_reused';
        END IF;
        IF r.o_outcome NOT IN ('ok', 'replayed') THEN
            RAISE EXCEPTION 'orchestrator: % % 0', v_index, r.o_outcome USING ERRCODE = 'P0001';
        END IF;
        v_last := greatest(v_last, r.o_event);
        o_item := r.o_item;
        o_event := r.o_event;
        RETURN NEXT;
        v_index := v_index + 1;
    END LOOP;
    UPDATE orchestrator.sessions SET last_event_id = v_last WHERE id = p_session AND last_event_id < v_last;
END
$$;

-- The signature before `p_key`, kept for the processes of the release before that run beside this one during a
-- rolling upgrade: their items carry their keys, `<key>:<index>` each, whose first gives the request's key back.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_post_thread_items(
    p_session text, p_alias text, p_items jsonb, p_source jsonb, p_depth integer, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_item text, o_event bigint)
LANGUAGE sql AS $$
    SELECT * FROM orchestrator.orchestrator_post_thread_items(
        p_session, p_alias, p_items, left(p_items -> 0 ->> 'key', -2), p_source, p_depth, p_traceparent, p_cause)
$$;
