-- A run's write after its end is refused (`events_run_write_fence`, 0034_run_writes_fenced.sql): SPEC 4 puts a run's
-- `execution.ended` after every event the run writes. A run stopped (cancelled or terminated) while its activities
-- still write ends on Temporal at once, and its end is recorded while those writes are in flight; each write holds
-- the session's lock from before its insert to its commit, as the end's record does, so a write that reads the end
-- recorded comes after it and is refused, and one that does not commits before the end. A run not recorded (a
-- record retention took) is not fenced.
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_run_write_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM orchestrator.executions x WHERE x.id = NEW.source ->> 'execution'
               AND x.ended_at IS NOT NULL) THEN
        RAISE EXCEPTION 'execution: run % has ended; it writes nothing more', NEW.source ->> 'execution'
            USING ERRCODE = '55000';
    END IF;
    RETURN NEW;
END
$$;
