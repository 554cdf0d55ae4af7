-- A captured row's events of one session (`orchestrator_captured_row`), staged in the application's
-- transaction (`captured_staged`, 0033_captured_staged.sql) and appended after its commit
-- (`orchestrator_captured_settle`): no lock is taken, so the session's writers commit side by side. A row with
-- no session, or whose session is not there or not open, fails the statement rather than lose its event.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_emit(c orchestrator.captures, p_session text,
    p_events jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
BEGIN
    IF p_session IS NULL THEN
        RAISE EXCEPTION '%.%: a captured row needs a session', c.table_name, c.session_column
            USING ERRCODE = '23502';
    END IF;
    SELECT s.status INTO v_status FROM orchestrator.sessions s WHERE s.id = p_session;
    IF v_status IS NULL OR v_status = 'deleting' THEN
        RAISE EXCEPTION 'session_id: no session %', quote_literal(p_session) USING ERRCODE = 'P0002';
    ELSIF v_status <> 'open' THEN
        RAISE EXCEPTION 'session_id: session % is not open', quote_literal(p_session) USING ERRCODE = '55000';
    END IF;
    INSERT INTO orchestrator.captured_staged (session_id, events, cause)
    VALUES (p_session, p_events, orchestrator.orchestrator_transaction_cause());
END
$$;
