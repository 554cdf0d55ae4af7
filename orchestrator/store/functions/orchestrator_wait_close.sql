-- A wait its run gave up on (its timeout): `timed_out` unless an answer came first, which the run then takes.
-- Answers the wait as it stands (null: no such wait).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_wait_close(p_execution text, p_run text, p_seq integer)
RETURNS jsonb
LANGUAGE plpgsql AS $$
DECLARE
    w orchestrator.run_waits%ROWTYPE;
BEGIN
    UPDATE orchestrator.run_waits SET state = 'timed_out', ended_at = clock_timestamp()
        WHERE execution_id = p_execution AND run_id = p_run AND seq = p_seq AND state = 'open'
        RETURNING * INTO w;
    IF FOUND THEN
        DELETE FROM orchestrator.wait_probes WHERE wait_id = w.id;
        RETURN orchestrator.orchestrator_wait_json(w);
    END IF;
    UPDATE orchestrator.run_waits SET told_at = coalesce(told_at, clock_timestamp())
        WHERE execution_id = p_execution AND run_id = p_run AND seq = p_seq RETURNING * INTO w;
    RETURN CASE WHEN FOUND THEN orchestrator.orchestrator_wait_json(w) END;
END
$$;
