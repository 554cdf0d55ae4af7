-- A batch's id arrays, and what else copies them (its outcome's ids, its run's batch in `executions`), are kept
-- out of line but not compressed: pglz compressing the 8 KB of a 1,000-event batch's array took 0.65 ms of the
-- server's CPU at each write (1.17 ms an insert against 0.51 uncompressed, PostgreSQL alone), five times a
-- batch, two of them on the way from a run's end to the next run's start. They take about 9 KB instead of 5
-- (docs/decisions.md). Rows written before keep their compressed values; only the way new values are stored
-- changes, with no rewrite.
ALTER TABLE batches
    ALTER COLUMN event_ids SET STORAGE EXTERNAL,
    ALTER COLUMN entry_ids SET STORAGE EXTERNAL,
    ALTER COLUMN queued_at SET STORAGE EXTERNAL;
ALTER TABLE outcomes ALTER COLUMN event_ids SET STORAGE EXTERNAL;
ALTER TABLE executions ALTER COLUMN batch SET STORAGE EXTERNAL;
