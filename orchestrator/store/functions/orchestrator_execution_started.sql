-- `execution.started` for a run, once (with its end, if that is recorded first). The session's lock comes
-- before the execution's row, in the order a run's end takes them: the other order deadlocks with a run that
-- ends while its start is being recorded. The caller may hold the session's lock already.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_execution_started(p_execution text)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    x orchestrator.executions%ROWTYPE;
    v_event bigint;
BEGIN
    PERFORM orchestrator.orchestrator_lock_session(e.session_id) FROM orchestrator.executions e
        WHERE e.id = p_execution;
    SELECT * INTO x FROM orchestrator.executions WHERE id = p_execution FOR UPDATE;
    IF NOT FOUND OR x.started_event_id IS NOT NULL THEN
        RETURN;
    END IF;
    v_event := orchestrator.orchestrator_append(
        x.session_id, 'execution.started', NULL, NULL,
        jsonb_build_object('id', x.id, 'workflow', x.workflow, 'status', 'running'),
        jsonb_strip_nulls(jsonb_build_object('listener', x.listener, 'execution', x.id)), x.depth, NULL, NULL, NULL,
        x.cause);
    UPDATE orchestrator.executions SET started_event_id = v_event WHERE id = p_execution;
END
$$;
