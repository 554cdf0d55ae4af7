-- A lane joins the back of the queue for a key slot (or keeps its place, if it has one).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_key_queue(p_lane bigint, p_session text, p_listener text)
RETURNS void
LANGUAGE sql AS $$
    INSERT INTO orchestrator.key_slots (lane_id, session_id, listener, holding, due_at)
        VALUES (p_lane, p_session, p_listener, false, orchestrator.orchestrator_lane_due(p_lane))
        ON CONFLICT (lane_id) DO NOTHING
$$;
