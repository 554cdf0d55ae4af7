-- A run's writes are refused once its end is recorded, so its `execution.ended` comes after every event it wrote
-- (SPEC 4, "causes before effects"): a run stopped while its activities still wrote had its end recorded and then
-- its writes appended after it. The function's body is its file's (`orchestrator_run_write_fence`); the trigger
-- runs it only for an event a run wrote (the platform's own `execution.*` and `listener.failed` carry the run in
-- their source too, and are not the run's writes), so every other insert pays the `WHEN` alone.
CREATE FUNCTION orchestrator.orchestrator_run_write_fence() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NEW;
END
$$;

CREATE TRIGGER events_run_write_fence BEFORE INSERT ON orchestrator.events
    FOR EACH ROW WHEN (NEW.source ? 'execution'
                       AND NEW.type NOT IN ('execution.started', 'execution.ended', 'listener.failed'))
    EXECUTE FUNCTION orchestrator.orchestrator_run_write_fence();
