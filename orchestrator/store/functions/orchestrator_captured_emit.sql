-- A captured statement's events of one session (`orchestrator_captured`), set to be appended when its
-- transaction commits (`captured_pending`, 0029_wakeups_coalesced.sql): the session's lock is taken at the
-- commit's start, not held from the statement to the commit. A row with no session, or whose session is not
-- there or not open, fails the statement rather than lose its event.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_emit(c orchestrator.captures, p_session text,
    p_events jsonb)
RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_status text;
    v_id bigint;
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
    IF jsonb_array_length(p_events) >= 1000 THEN
        -- A statement of many rows appends at once, after what waits before it: its events need not be written
        -- twice, and a transaction that holds the lock from here on costs little beside its statement.
        PERFORM orchestrator.orchestrator_captured_flush();
        PERFORM orchestrator.orchestrator_captured_append(p_session, p_events);
        RETURN;
    END IF;
    INSERT INTO orchestrator.captured_pending (for_session, events) VALUES (p_session, p_events) RETURNING id
        INTO v_id;
    IF nullif(current_setting('orchestrator_captured.from_row', true), '') IS NULL THEN
        PERFORM set_config('orchestrator_captured.from_row', v_id::text, true);
    END IF;
END
$$;
