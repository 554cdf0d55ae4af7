-- A run's slot let go (its end, or its repeat called off): its row and its batch's hold released, and the lanes to
-- drive now: a keyed listener's freed key slot goes to the longest waiter (the lane itself goes back in the queue
-- when more waits in it); any other lane is driven itself when more waits in it. The caller holds the session's
-- and, for a keyed listener, the keys' locks.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_run_released(r orchestrator.lane_runs, p_session text,
    p_listener text, p_keyed boolean, p_key_max integer)
RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_waiting boolean;
BEGIN
    DELETE FROM orchestrator.lane_runs WHERE run_key = r.run_key;
    UPDATE orchestrator.batches SET released_at = clock_timestamp() WHERE id = r.batch_id;
    v_waiting := EXISTS (SELECT 1 FROM orchestrator.lanes WHERE id = r.lane_id AND routed_through > fired_through)
              OR EXISTS (SELECT 1 FROM orchestrator.replays WHERE lane_id = r.lane_id);
    IF p_keyed THEN
        RETURN orchestrator.orchestrator_key_slot_freed(r.lane_id, p_session, p_listener, p_key_max, v_waiting);
    END IF;
    RETURN CASE WHEN v_waiting THEN jsonb_build_array(orchestrator.orchestrator_lane_address(r.lane_id))
                ELSE '[]'::jsonb END;
END
$$;
