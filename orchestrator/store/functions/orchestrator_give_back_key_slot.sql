-- A lane gives back a key slot it holds with no run to use it on. Answers the lanes the slot went to.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_give_back_key_slot(p_lane bigint, p_session text, p_listener text,
    p_max integer)
RETURNS jsonb LANGUAGE plpgsql AS $$
BEGIN
    PERFORM orchestrator.orchestrator_share_session(p_session);
    PERFORM orchestrator.orchestrator_keys_lock(p_session, p_listener);
    IF EXISTS (SELECT 1 FROM orchestrator.lane_runs WHERE lane_id = p_lane) THEN
        RETURN '[]';  -- a run took it meanwhile
    END IF;
    RETURN orchestrator.orchestrator_key_slot_freed(p_lane, p_session, p_listener, p_max, false);
END
$$;
