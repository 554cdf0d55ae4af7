-- The path of captured events before 0033_captured_staged.sql (held in `captured_pending`, appended at the commit's
-- start), kept for the transactions of the release before that are in flight while this one starts; a later
-- migration drops it with the table.
-- A captured statement's events, appended at the start of its transaction's commit (the deferred trigger
-- `captured_pending_commit`, 0029_wakeups_coalesced.sql), unless an `emit` of the same transaction appended them
-- before its own (`orchestrator_captured_flush`).
CREATE OR REPLACE FUNCTION orchestrator.orchestrator_captured_commit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM orchestrator.orchestrator_captured_take(NEW.id);
    RETURN NULL;
END
$$;
