-- One event out of a lane's queue (a run's wait took it): the range that holds it split around it
-- (0032_lane_queue_ranges.sql), each part kept only if it still holds an event of the session, and each part's
-- end one of them. Nothing when the event is not queued there. The caller holds the lane's row (FOR UPDATE), so no
-- batch's finish cuts the range meanwhile (`orchestrator_batch_take_queue`).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lane_unqueue(p_lane bigint, p_session text, p_event bigint)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    q orchestrator.lane_queue%ROWTYPE;
    v_before bigint;
BEGIN
    DELETE FROM orchestrator.lane_queue r WHERE r.lane_id = p_lane
        AND r.first_id = (SELECT x.first_id FROM orchestrator.lane_queue x
                          WHERE x.lane_id = p_lane AND x.first_id <= p_event ORDER BY x.first_id DESC LIMIT 1)
        AND r.first_id <= p_event AND r.last_id >= p_event
        RETURNING * INTO q;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    v_before := (SELECT max(e.id) FROM orchestrator.events e WHERE e.session_id = p_session
                 AND e.id >= q.first_id AND e.id < p_event);
    IF v_before IS NOT NULL THEN
        INSERT INTO orchestrator.lane_queue (lane_id, first_id, last_id, version, queued_at)
            VALUES (p_lane, q.first_id, v_before, q.version, q.queued_at);
    END IF;
    IF q.last_id > p_event THEN
        INSERT INTO orchestrator.lane_queue (lane_id, first_id, last_id, version, queued_at)
            VALUES (p_lane, p_event + 1, q.last_id, q.version, q.queued_at);
    END IF;
END
$$;
