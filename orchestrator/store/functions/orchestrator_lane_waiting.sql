-- The first `p_limit` events waiting in a lane after `p_fired`, in order, each with the listener version it was
-- routed by: its queue's ranges (0032_lane_queue_ranges.sql) in order, at most `p_limit` of them (each that ends
-- past `p_fired` holds one at least), each range's events read from the session's index; ordered within each
-- range only (the ranges come in order and do not overlap), so the read stops at the limit.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lane_waiting(p_lane bigint, p_session text, p_fired bigint,
    p_limit integer)
RETURNS TABLE (event orchestrator.events, version integer) LANGUAGE sql STABLE AS $$
    SELECT w.e, q.version
    FROM (SELECT r.first_id, r.last_id, r.version FROM orchestrator.lane_queue r
          WHERE r.lane_id = p_lane AND r.last_id > p_fired ORDER BY r.first_id LIMIT p_limit) q
    CROSS JOIN LATERAL (SELECT e, e.id FROM orchestrator.events e
                        WHERE e.session_id = p_session AND e.id >= greatest(q.first_id, p_fired + 1)
                          AND e.id <= q.last_id
                        ORDER BY e.id LIMIT p_limit) w
    ORDER BY q.first_id, w.id
    LIMIT p_limit
$$;
