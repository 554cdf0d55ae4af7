-- An event the application emits in its own transaction (`orchestrator.emit`, `emit_events`) takes its commit's
-- time, as every other event's `created_at` is (SPEC 2): it took the time of the call, so a transaction left open
-- past a listener's activation committed an event that listener never got, routing judging it by a time before
-- the listener took effect. Each emit notes the ids it appended (the session's lock, held from the emit to the
-- commit, keeps them this transaction's); a deferred trigger stamps them at the commit. The function is
-- `functions/orchestrator_emits_stamp.sql`.
CREATE TABLE orchestrator.emits_unstamped (
    session_id text PRIMARY KEY,
    ids        int8multirange NOT NULL,
    -- The transaction whose note it is (its top level: a savepoint's rows have an `xmin` of their own). A note
    -- left by another (its trigger off, as under `session_replication_role = replica`) is replaced.
    tx         xid8 NOT NULL DEFAULT pg_current_xact_id()
);

CREATE FUNCTION orchestrator.orchestrator_emits_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER emits_stamped_at_commit AFTER INSERT ON orchestrator.emits_unstamped
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION orchestrator.orchestrator_emits_stamp();
