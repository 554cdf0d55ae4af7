-- A lane joins the back of the queue for a key slot (or keeps its place, if it has one); a lane whose window
-- closed with every slot held leaves its window for the queue (0033_key_slot_windows.sql).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_key_queue(p_lane bigint, p_session text, p_listener text)
RETURNS void
LANGUAGE sql AS $$
    INSERT INTO orchestrator.key_slots AS k (lane_id, session_id, listener, holding, due_at)
        VALUES (p_lane, p_session, p_listener, false, orchestrator.orchestrator_lane_due(p_lane))
        ON CONFLICT (lane_id) DO UPDATE SET holding = false, since = clock_timestamp(), due_at = excluded.due_at
            WHERE k.holding IS NULL
$$;
