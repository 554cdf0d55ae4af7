-- A captured change's events are staged in its commit and appended to the session's stream after it, many
-- commits at a time, instead of each commit appending its own under the session's lock.
--
-- Since 0029 a captured statement's events waited in `captured_pending` (unlogged) and a deferred trigger
-- appended them at the commit's start, under the session's lock: every captured commit paid an append of its own
-- (about 120 us of PostgreSQL's CPU beyond a plain insert's commit, docs/scaling.md) and the commits of one
-- session flushed their WAL one at a time behind that lock. `python -m bench.app_transactions --cases cost`, 8
-- writers, a row a transaction, a quiet machine: captured inserts 0.15x plain in one session, 0.26x a session
-- each.
--
-- Now a row trigger writes the row's events here, in the application's transaction, and takes no lock: the
-- staged row commits or rolls back with the change, so an event is still in the commit of its change and none is seen
-- before it. Their ids are drawn when they are appended (`orchestrator_captured_settle`), under the session's
-- lock, by whichever comes first: any write to the session (every append settles what is staged before its own,
-- `orchestrator_lock_session`, so ids keep the order of the commits the writers saw), a reader of the session's
-- events, a wait that opens, or the router, which looks here every round interval. Rows are appended in the order
-- their commits were stamped when `track_commit_timestamp` is on, else in the order their statements ran (which
-- is the commits' order for two changes of one row, or of which one began after the other committed).
CREATE TABLE orchestrator.captured_staged (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    -- Named as every table of a session's rows is, so that a session's purge takes them with it.
    session_id text NOT NULL,
    events     jsonb NOT NULL,
    -- The cause of the transaction that wrote them (`orchestrator_transaction_cause`), taken at the statement.
    cause      jsonb
);
CREATE INDEX captured_staged_session ON orchestrator.captured_staged (session_id, id);
ALTER TABLE orchestrator.captured_staged ALTER COLUMN events SET STORAGE EXTERNAL;
-- A queue: rows live milliseconds, so vacuum it often and keep its index lean.
ALTER TABLE orchestrator.captured_staged SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 1000,
    autovacuum_vacuum_cost_delay = 0);

-- Each captured table's statement triggers become row triggers (`orchestrator_captured_row`,
-- `orchestrator_capture_triggers`: their bodies are their files', applied after this in the same transaction).
-- A statement's trigger with transition tables ran a query a statement (rows numbered, grouped by session, built
-- and aggregated), which cost more than the row's own work once no lock was taken. Re-making a table's triggers
-- waits for the application's transactions that hold it: so does what follows, and a transaction of the release
-- before that staged its events in `captured_pending` has committed through its deferred trigger before that
-- table and the functions of its path are dropped.
CREATE FUNCTION orchestrator.orchestrator_captured_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN NULL;
END
$$;
CREATE FUNCTION orchestrator.orchestrator_capture_triggers(p_table regclass) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    v_name text := (SELECT format('%I.%I', n.nspname, k.relname)
                    FROM pg_class k JOIN pg_namespace n ON n.oid = k.relnamespace WHERE k.oid = p_table);
BEGIN
    PERFORM orchestrator.orchestrator_drop_capture_triggers(p_table);
    EXECUTE format('CREATE TRIGGER orchestrator_capture_insert AFTER INSERT ON %s'
        ' FOR EACH ROW EXECUTE FUNCTION %s.orchestrator_captured_row()', v_name, 'orchestrator'::regnamespace);
    EXECUTE format('CREATE TRIGGER orchestrator_capture_update AFTER UPDATE ON %s'
        ' FOR EACH ROW EXECUTE FUNCTION %s.orchestrator_captured_row()', v_name, 'orchestrator'::regnamespace);
    EXECUTE format('CREATE TRIGGER orchestrator_capture_delete AFTER DELETE ON %s'
        ' FOR EACH ROW EXECUTE FUNCTION %s.orchestrator_captured_row()', v_name, 'orchestrator'::regnamespace);
    EXECUTE format('CREATE TRIGGER orchestrator_capture_truncate BEFORE TRUNCATE ON %s'
        ' FOR EACH STATEMENT EXECUTE FUNCTION %s.orchestrator_refuse_truncate()', v_name, 'orchestrator'::regnamespace);
END
$$;
-- The tables that have their triggers now (a capture that a session's deletion ended has none).
SELECT orchestrator.orchestrator_capture_triggers(c.table_oid::regclass) FROM orchestrator.captures c
WHERE EXISTS (SELECT 1 FROM pg_trigger t WHERE t.tgrelid = c.table_oid AND t.tgname = 'orchestrator_capture_insert')
ORDER BY c.table_oid;

DROP FUNCTION IF EXISTS orchestrator.orchestrator_captured();
DROP TABLE IF EXISTS orchestrator.captured_pending;
DROP FUNCTION IF EXISTS orchestrator.orchestrator_captured_commit();
DROP FUNCTION IF EXISTS orchestrator.orchestrator_captured_flush();
DROP FUNCTION IF EXISTS orchestrator.orchestrator_captured_take(bigint);
DROP FUNCTION IF EXISTS orchestrator.orchestrator_captured_append(text, jsonb);
