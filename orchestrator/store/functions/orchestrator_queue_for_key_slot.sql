-- A keyed lane with a batch due and no key slot joins the queue for one, keeping its place if it has one; a
-- slot free meanwhile is its at once. Answers whether it holds one now.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_queue_for_key_slot(p_lane bigint, p_session text, p_listener text,
    p_max integer)
RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM orchestrator.orchestrator_share_session(p_session);
    PERFORM orchestrator.orchestrator_keys_lock(p_session, p_listener);
    IF EXISTS (SELECT 1 FROM orchestrator.key_slots WHERE lane_id = p_lane AND holding) THEN
        RETURN true;
    END IF;
    IF (SELECT count(*) FROM orchestrator.key_slots WHERE session_id = p_session AND listener = p_listener
        AND holding) < p_max THEN
        INSERT INTO orchestrator.key_slots (lane_id, session_id, listener, holding) VALUES (p_lane, p_session,
            p_listener, true)
            ON CONFLICT (lane_id) DO UPDATE SET holding = true;
        RETURN true;
    END IF;
    PERFORM orchestrator.orchestrator_key_queue(p_lane, p_session, p_listener);
    RETURN false;
END
$$;
