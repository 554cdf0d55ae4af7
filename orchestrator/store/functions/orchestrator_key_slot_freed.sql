-- A lane gives its key slot back (or its place in the queue); `p_requeue`: it goes to the back of the queue
-- (it has more waiting). The slots free go to as many waiters, those whose batch is due first, then the
-- longest waiting, and their addresses are answered (none when every slot is held, or nobody waits); a lane
-- whose listener is no longer keyed (`p_max` 0: re-saved, deleted) leaves the queue instead of joining it again
-- (0019_route_takes_free_key_slots.sql). The caller holds the listener's keys lock.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_key_slot_freed(p_lane bigint, p_session text, p_listener text,
    p_max integer,
                                                       p_requeue boolean) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_free integer;
    v_granted jsonb;
BEGIN
    DELETE FROM orchestrator.key_slots WHERE lane_id = p_lane;
    IF p_requeue AND p_max > 0 THEN
        PERFORM orchestrator.orchestrator_key_queue(p_lane, p_session, p_listener);
    END IF;
    v_free := p_max - (SELECT count(*) FROM orchestrator.key_slots WHERE session_id = p_session
        AND listener = p_listener AND holding);
    IF v_free <= 0 THEN
        RETURN '[]';
    END IF;
    WITH granted AS (
        UPDATE orchestrator.key_slots SET holding = true WHERE lane_id IN (
            SELECT lane_id FROM orchestrator.key_slots WHERE session_id = p_session AND listener = p_listener
                AND NOT holding
            ORDER BY coalesce(due_at <= clock_timestamp(), false) DESC, since, lane_id LIMIT v_free)
        RETURNING lane_id, due_at, since)
    SELECT jsonb_agg(orchestrator.orchestrator_lane_address(g.lane_id)
                     ORDER BY coalesce(g.due_at <= clock_timestamp(), false) DESC, g.since, g.lane_id)
        INTO v_granted FROM granted g;
    RETURN coalesce(v_granted, '[]');
END
$$;
