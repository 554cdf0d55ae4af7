-- One event: `SELECT orchestrator.emit(session, 'ticket.escalated', '{"priority": 1}')`.
CREATE OR REPLACE FUNCTION orchestrator.emit(p_session text, p_type text, p_data jsonb, p_key text DEFAULT NULL)
RETURNS bigint
LANGUAGE sql AS $$
    SELECT e.event_id FROM orchestrator.emit_events(
        p_session,
        jsonb_build_array(jsonb_build_object('type', p_type, 'data', p_data)
                          || CASE WHEN p_key IS NULL THEN '{}'::jsonb ELSE jsonb_build_object('key', p_key) END)
    ) e
$$;
