-- The oldest event waiting in a lane after `p_fired`: the first of `orchestrator_lane_waiting`. None when nothing
-- waits.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lane_head(p_lane bigint, p_session text, p_fired bigint)
RETURNS SETOF orchestrator.events LANGUAGE sql STABLE AS $$
    SELECT (w.event).* FROM orchestrator.orchestrator_lane_waiting(p_lane, p_session, p_fired, 1) w
$$;
