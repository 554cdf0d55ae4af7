-- Appends one event to an open or closed session (None: no such session). The engine's functions (0002)
-- append execution events, receipts and failures through it.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_append(
    p_session text, p_type text, p_alias text, p_item jsonb, p_execution jsonb, p_source jsonb, p_depth integer,
    p_data jsonb, p_key text, p_traceparent text, p_cause jsonb
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    v_event bigint;
BEGIN
    IF orchestrator.orchestrator_lock_session(p_session) = 'not_found' THEN
        RETURN NULL;
    END IF;
    v_event := orchestrator.orchestrator_event_row(p_session, p_type, p_alias, p_item, p_execution, p_source, p_depth,
        p_data, p_key,
                                      p_traceparent, p_cause);
    UPDATE orchestrator.sessions SET last_event_id = v_event WHERE id = p_session AND last_event_id < v_event;
    RETURN v_event;
END
$$;
