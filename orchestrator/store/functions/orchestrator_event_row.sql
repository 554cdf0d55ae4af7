-- An event's row, under the session lock its caller holds: with a key, a retried append finds the first one's
-- id. The caller moves the session's `last_event_id`, once per statement: a bulk write that moved it once per
-- event would leave a chain of a thousand versions of the session's row for the next writer to walk.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_event_row(
    p_session text, p_type text, p_alias text, p_item jsonb, p_execution jsonb, p_source jsonb, p_depth integer,
    p_data jsonb, p_key text, p_traceparent text, p_cause jsonb
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_event bigint;
BEGIN
    IF p_key IS NOT NULL THEN
        SELECT e.id INTO v_event FROM orchestrator.events e WHERE e.session_id = p_session
            AND e.idempotency_key = p_key;
        IF FOUND THEN
            RETURN v_event;
        END IF;
    END IF;
    v_event := nextval('orchestrator.event_ids'::regclass);
    INSERT INTO orchestrator.events (id, session_id, type, alias, item, execution, source, depth, data,
        idempotency_key, traceparent,
                        cause)
        VALUES (v_event, p_session, p_type, p_alias, p_item, p_execution, coalesce(p_source, '{}'), p_depth, p_data,
                p_key, p_traceparent, p_cause);
    RETURN v_event;
END
$$;
