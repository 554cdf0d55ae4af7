-- Many writes of one request in one statement and one transaction, all or none, the session locked once and
-- its `last_event_id` moved once. The first that cannot be written raises `orchestrator: <index> <outcome>
-- <rev>` and nothing is kept. The request's key keys its writes `<key>:<index>`: a request is a retry of the
-- first with its key only when every write it gives is one of the first's (a retry with a write more wrote it).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_write_objects(
    p_session text, p_items jsonb, p_key text, p_source jsonb, p_depth integer, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_rev integer, o_event bigint)
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
        SELECT * INTO r FROM orchestrator.orchestrator_object_row(
            p_session, v_item ->> 'alias', v_item -> 'value', (v_item ->> 'if_rev')::integer, p_source, p_depth,
            p_key || ':' || v_index, p_traceparent, p_cause);
        -- A retry that writes what the first request did not is another request.
        IF r.o_outcome = 'ok' AND v_key = 'retry' THEN
            r.o_outcome := 'key_reused';
        END IF;
        IF r.o_outcome NOT IN ('ok', 'replayed') THEN
            RAISE EXCEPTION 'orchestrator: % % %', v_index, r.o_outcome, coalesce(r.o_rev, 0) USING ERRCODE = 'P0001';
        END IF;
        v_last := greatest(v_last, r.o_event);
        o_rev := r.o_rev;
        o_event := r.o_event;
        RETURN NEXT;
        v_index := v_index + 1;
    END LOOP;
    UPDATE orchestrator.sessions SET last_event_id = v_last WHERE id = p_session AND last_event_id < v_last;
END
$$;

-- The signature before `p_key`, kept for the processes of the release before that run beside this one during a
-- rolling upgrade: their items carry their keys, `<key>:<index>` each, whose first gives the request's key back.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_write_objects(
    p_session text, p_items jsonb, p_source jsonb, p_depth integer, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_rev integer, o_event bigint)
LANGUAGE sql AS $$
    SELECT * FROM orchestrator.orchestrator_write_objects(
        p_session, p_items, left(p_items -> 0 ->> 'key', -2), p_source, p_depth, p_traceparent, p_cause)
$$;
