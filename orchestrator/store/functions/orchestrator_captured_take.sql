-- The path of captured events before 0033_captured_staged.sql (held in `captured_pending`, appended at the commit's
-- start), kept for the transactions of the release before that are in flight while this one starts; a later
-- migration drops it with the table.
-- A captured statement's events that waited for the commit (`captured_pending`, 0029_wakeups_coalesced.sql),
-- appended now and their row gone; nothing when they went already (an `emit` of the transaction took them first).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_take(p_id bigint) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    v_session text;
    v_events jsonb;
BEGIN
    DELETE FROM orchestrator.captured_pending WHERE id = p_id RETURNING for_session, events INTO v_session, v_events;
    IF FOUND THEN
        PERFORM orchestrator.orchestrator_captured_append(v_session, v_events);
    END IF;
END
$$;
