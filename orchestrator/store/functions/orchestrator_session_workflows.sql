-- What Temporal holds of a session: its lanes' workflows, its runs still running, its schedules.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_session_workflows(p_session text)
RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'lanes', (SELECT coalesce(jsonb_agg(l.workflow_id ORDER BY l.id), '[]') FROM orchestrator.lanes l
            WHERE l.session_id = p_session),
        'runs', (SELECT coalesce(jsonb_agg(x.id ORDER BY x.id), '[]') FROM orchestrator.executions x
                 WHERE x.session_id = p_session AND x.status = 'running'),
        'schedules', (SELECT coalesce(jsonb_agg(c.schedule_id ORDER BY c.schedule_id), '[]')
            FROM orchestrator.schedules c
                      WHERE c.session_id = p_session))
$$;
