-- The oldest event waiting in a lane after `p_fired` (its queue's ranges, 0032_lane_queue_ranges.sql): the first
-- event of its session from the start of the first range that ends past `p_fired`. None when nothing waits.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lane_head(p_lane bigint, p_session text, p_fired bigint)
RETURNS SETOF orchestrator.events LANGUAGE sql STABLE AS $$
    SELECT e.*
    FROM (SELECT greatest(q.first_id, p_fired + 1) AS from_id, q.last_id FROM orchestrator.lane_queue q
          WHERE q.lane_id = p_lane AND q.last_id > p_fired ORDER BY q.first_id LIMIT 1) h
    CROSS JOIN LATERAL (SELECT e.* FROM orchestrator.events e WHERE e.session_id = p_session AND e.id >= h.from_id
                          AND e.id <= h.last_id
                        ORDER BY e.id LIMIT 1) e
$$;
