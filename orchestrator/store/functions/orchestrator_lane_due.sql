-- When a lane's waiting batch is due: its oldest waiting event's commit plus its window (as last declared).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lane_due(p_lane bigint)
RETURNS timestamptz LANGUAGE sql STABLE AS $$
    SELECT e.created_at + make_interval(secs => l.window_seconds)
    FROM orchestrator.lanes l CROSS JOIN LATERAL orchestrator.orchestrator_lane_head(l.id, l.session_id,
        l.fired_through) e
    WHERE l.id = p_lane
$$;
