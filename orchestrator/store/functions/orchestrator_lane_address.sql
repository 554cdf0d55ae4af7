-- A lane's address, as a driver is handed it.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_lane_address(p_lane bigint) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('session_id', l.session_id, 'listener', l.listener, 'lane', l.lane,
                              'workflow_id', l.workflow_id)
    FROM orchestrator.lanes l WHERE l.id = p_lane
$$;
