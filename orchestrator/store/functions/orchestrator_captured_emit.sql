-- A captured statement's events of one session (`orchestrator_captured`); a row with no session fails the
-- statement rather than lose its event.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_emit(c orchestrator.captures, p_session text,
    p_events jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    IF p_session IS NULL THEN
        RAISE EXCEPTION '%.%: a captured row needs a session', c.table_name, c.session_column
            USING ERRCODE = '23502';
    END IF;
    PERFORM orchestrator.orchestrator_emit_checked(p_session, p_events);
END
$$;
