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

-- A table captured before keeps its statement triggers (`orchestrator_captured`), which stage too from here on:
-- the migration makes no DDL on the application's tables (the platform's role may hold only TRIGGER on them, and
-- it would wait on, and lock, the application's transactions); capturing the table again gives it row triggers.
-- `captured_pending` and the functions of its path stay for the transactions of the release before in flight
-- while this one starts (they commit through them as they began); a later migration drops them.
