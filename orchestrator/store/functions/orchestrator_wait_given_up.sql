-- A wait its caller gave up on before it timed out (its task cancelled, or its run's): `abandoned`, taking
-- nothing, even when an answer came first that the caller never saw (the routing round had already left its
-- events out of the listener's lanes as the run's): the run's next wait finds them from its position, where a
-- wait closed `answered` would keep them from it. A wait given up before its call put it in place (the call still in
-- flight when its caller was cancelled) is put in place given up, under the session's lock as the call takes it, so
-- the call, whenever it comes, finds it so and takes nothing. Answers the wait as it stands (null: no such run).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_wait_given_up(p_execution text, p_run text, p_seq integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    w orchestrator.run_waits%ROWTYPE;
BEGIN
    PERFORM orchestrator.orchestrator_lock_session(x.session_id) FROM orchestrator.executions x
        WHERE x.id = p_execution;
    UPDATE orchestrator.run_waits
        SET state = 'abandoned', matched = NULL, event_ids = NULL, ended_at = clock_timestamp(),
            told_at = coalesce(told_at, clock_timestamp())
        WHERE execution_id = p_execution AND run_id = p_run AND seq = p_seq AND kind = 'wait'
          AND state IN ('open', 'answered')
        RETURNING * INTO w;
    IF FOUND THEN
        DELETE FROM orchestrator.wait_probes WHERE wait_id = w.id;
        RETURN orchestrator.orchestrator_wait_json(w);
    END IF;
    INSERT INTO orchestrator.run_waits (session_id, execution_id, run_id, seq, kind, conditions, after_id, state,
                                        ended_at, told_at)
        SELECT x.session_id, p_execution, p_run, p_seq, 'wait', '[]', 0, 'abandoned', clock_timestamp(),
               clock_timestamp()
        FROM orchestrator.executions x WHERE x.id = p_execution
        ON CONFLICT (execution_id, run_id, seq) DO NOTHING;
    SELECT * INTO w FROM orchestrator.run_waits WHERE execution_id = p_execution AND run_id = p_run AND seq = p_seq;
    RETURN CASE WHEN FOUND THEN orchestrator.orchestrator_wait_json(w) END;
END
$$;
