-- When a lane's waiting batch is due: its oldest waiting event's commit plus its window (as last declared).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lane_due(p_lane bigint)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT e.created_at + make_interval(secs => l.window_seconds)
    FROM orchestrator.lanes l JOIN orchestrator.lane_events q ON q.lane_id = l.id JOIN orchestrator.events e
        ON e.id = q.event_id
    WHERE l.id = p_lane AND q.event_id > l.fired_through ORDER BY q.event_id LIMIT 1
$$;
