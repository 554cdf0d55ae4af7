-- A run of no lane recorded before its start (`executions.start_run`: `start_execution`, a schedule's), once per
-- execution id: `{"new": whether it was}`. With `limit` (the session's `executions_per_session`) the session's
-- running executions are counted under the session's executions lock (`orchestrator_executions_lock`), as a lane's
-- record counts them for its run, so starts and lanes' runs recorded at once cannot all pass the count; when they
-- reach it nothing is recorded and the answer is `{"running": the count}`. An id recorded already answers as before,
-- counted or not (a retried start). Lock order (docs/decisions.md, "One lock order"): the session's row shared,
-- then the executions lock.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_execution_record(p jsonb) RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    v_session text := p ->> 'session_id';
    v_running bigint;
    v_id text;
BEGIN
    IF p ->> 'limit' IS NOT NULL THEN
        PERFORM orchestrator.orchestrator_share_session(v_session);
        PERFORM orchestrator.orchestrator_executions_lock(v_session);
        IF EXISTS (SELECT 1 FROM orchestrator.executions WHERE id = p ->> 'execution_id') THEN
            RETURN '{"new": false}';
        END IF;
        v_running := orchestrator.orchestrator_running_executions(v_session);
        IF v_running >= (p ->> 'limit')::integer THEN
            RETURN jsonb_build_object('running', v_running);
        END IF;
    END IF;
    INSERT INTO orchestrator.executions (id, session_id, workflow, listener, lane, batch, run_key, depth, cause,
        start_input)
        VALUES (p ->> 'execution_id', v_session, p ->> 'workflow', p ->> 'listener', p ->> 'lane',
                nullif(p -> 'batch', 'null'), p ->> 'run_key', (p ->> 'depth')::integer, nullif(p -> 'cause', 'null'),
                nullif(p -> 'start_input', 'null'))
        ON CONFLICT (id) DO NOTHING
        RETURNING id INTO v_id;
    RETURN jsonb_build_object('new', v_id IS NOT NULL);
END
$$;
