-- The other hot write (`orchestrator_write_object`'s twin), one statement, so a session's lock is held for
-- one statement: answers an outcome (ok, replayed, not_found, session_not_open, key_reused), the item id and the
-- event id.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_post_thread_item(
    p_session text, p_alias text, p_id text, p_type text, p_role text, p_message text, p_message_json jsonb,
    p_preview text, p_metadata jsonb, p_source jsonb, p_depth integer, p_key text, p_traceparent text, p_cause jsonb
) RETURNS TABLE (o_outcome text, o_item text, o_event bigint)
LANGUAGE plpgsql AS $$
DECLARE
    v_lock text := orchestrator.orchestrator_lock_session(p_session);
    r record;
BEGIN
    IF v_lock <> 'ok' THEN
        RETURN QUERY SELECT v_lock, NULL::text, NULL::bigint;
        RETURN;
    END IF;
    IF orchestrator.orchestrator_request_key(p_session, p_key, false) = 'key_reused' THEN
        RETURN QUERY SELECT 'key_reused'::text, NULL::text, NULL::bigint;
        RETURN;
    END IF;
    SELECT * INTO r FROM orchestrator.orchestrator_item_row(p_session, p_alias, p_id, p_type, p_role, p_message,
        p_message_json,
                                               p_preview, p_metadata, p_source, p_depth, p_key, p_traceparent, p_cause);
    IF r.o_outcome = 'ok' THEN
        UPDATE orchestrator.sessions SET last_event_id = r.o_event WHERE id = p_session;
    END IF;
    RETURN QUERY SELECT r.o_outcome, r.o_item, r.o_event;
END
$$;
