-- A captured statement's events, appended at the start of its transaction's commit (the deferred trigger
-- `captured_pending_commit`, 0029_wakeups_coalesced.sql), unless an `emit` of the same transaction appended them
-- before its own (`orchestrator_captured_flush`).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM orchestrator.orchestrator_captured_take(NEW.id);
    RETURN NULL;
END
$$;
