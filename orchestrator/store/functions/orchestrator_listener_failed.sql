-- `listener.failed` for a run that failed with no attempt left (once per run), from its execution's record.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_listener_failed(p_execution text, p_listener text, p_lane text,
    p_depth integer)
RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    x orchestrator.executions%ROWTYPE;
BEGIN
    SELECT * INTO x FROM orchestrator.executions WHERE id = p_execution;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    -- Its `execution` is the run that failed last, as `execution.ended` names it (its error's message alone: the
    -- record keeps no type apart; `data.error` has the same).
    PERFORM orchestrator.orchestrator_append(
        x.session_id, 'listener.failed', NULL, NULL,
        jsonb_build_object('id', x.id, 'workflow', x.workflow, 'status', 'failed')
            || CASE WHEN x.error IS NOT NULL THEN jsonb_build_object('error',
                   jsonb_build_object('message', left(x.error, 2000))) ELSE '{}'::jsonb END,
        jsonb_build_object('listener', p_listener, 'execution', p_execution), p_depth,
        jsonb_build_object(
            'listener', p_listener, 'lane', p_lane, 'first_id', x.batch -> 'first_id', 'last_id', x.batch -> 'last_id',
            'event_ids', x.batch -> 'event_ids', 'retry', x.batch -> 'retry', 'execution_id', p_execution,
            'error', x.error),
        'failed:' || p_execution, NULL, jsonb_build_object('execution', p_execution));
END
$$;
