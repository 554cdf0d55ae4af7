-- The two hot writes (this and `orchestrator_post_thread_item`), one statement each, so a session's lock is
-- held for one statement. Each answers an outcome (ok, replayed, not_found, session_not_open, rev_conflict,
-- key_reused), the rev or item id, and the event id.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_write_object(
    p_session text, p_alias text, p_value jsonb, p_if_rev integer, p_source jsonb, p_depth integer, p_key text,
    p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_outcome text, o_rev integer, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator.orchestrator_lock_session(p_session);
    r record;
BEGIN
    IF v_lock <> 'ok' THEN
        RETURN QUERY SELECT v_lock, NULL::integer, NULL::bigint;
        RETURN;
    END IF;
    IF orchestrator.orchestrator_request_key(p_session, p_key, false) = 'key_reused' THEN
        RETURN QUERY SELECT 'key_reused'::text, NULL::integer, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO r FROM orchestrator.orchestrator_object_row(p_session, p_alias, p_value, p_if_rev, p_source, p_depth,
        p_key,
                                                 p_traceparent, p_cause);
    IF r.o_outcome = 'ok' THEN
        UPDATE orchestrator.sessions SET last_event_id = r.o_event WHERE id = p_session;
    END IF;
    RETURN QUERY SELECT r.o_outcome, r.o_rev, r.o_event;
END
$$;
