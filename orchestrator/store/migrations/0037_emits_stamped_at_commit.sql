-- An event the application emits in its own transaction (`orchestrator.emit`, `emit_events`) takes its commit's
-- time, as every other event's `created_at` is (SPEC 2): it took the time of the call, so a transaction left open
-- past a listener's activation committed an event that listener never got, routing judging it by a time before
-- the listener took effect. The first emit into a session in a transaction notes where its events begin; a
-- deferred trigger stamps the session's events from there at the commit (the session's lock, which the emit holds
-- until then, keeps every later id in the session this transaction's). The function is
-- `functions/orchestrator_emits_stamp.sql`.
CREATE TABLE orchestrator.emits_unstamped (
    session_id text PRIMARY KEY,
    first_id   bigint NOT NULL
);

CREATE FUNCTION orchestrator.orchestrator_emits_stamp() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER emits_stamped_at_commit AFTER INSERT ON orchestrator.emits_unstamped
    DEFERRABLE INITIALLY DEFERRED FOR EACH ROW EXECUTE FUNCTION orchestrator.orchestrator_emits_stamp();
