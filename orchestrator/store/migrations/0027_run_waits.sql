-- Runs that hear events (docs/waits.md): a run's wait for the next events it needs, and a listener's `cancel_on`, kept
-- as rows the routing round meets beside the listeners' probes.
--
-- A wait is a row: its run, its number among the run's waits (so a retried activity or a replayed workflow finds the
-- same row; with the Temporal run's id, as a run continued as new numbers its waits again), the run's listener (whose
-- lanes do not get what the wait takes), its conditions as declared, the position it counts from, how many events it
-- takes, and its state (`open`, then `answered`, `timed_out` or `abandoned` when its run ended first). A `cancel` row
-- is a run's watch for its listener's `cancel_on`: answered the same way, it cancels the run instead of telling it, and
-- takes nothing from the lanes; a `stop_execution` that lets its run clean up is a cancel row answered from the start.
-- `told_at` is when the answer reached Temporal (a signal to the run, or the cancellation): an answer not yet told is
-- told again.
CREATE TABLE orchestrator.run_waits (
    id           bigserial PRIMARY KEY,
    session_id   text NOT NULL REFERENCES orchestrator.sessions (id) ON DELETE CASCADE,
    execution_id text NOT NULL,
    -- The Temporal run the wait is of: a run continued as new numbers its waits from 1 again (a cancel watch and a
    -- stop are the execution's, '').
    run_id       text NOT NULL DEFAULT '',
    seq          integer NOT NULL,
    kind         text NOT NULL DEFAULT 'wait' CHECK (kind IN ('wait', 'cancel')),
    listener     text,
    -- A cancel watch's run's lane key: an event cancels it when its value at the condition's key is that key.
    lane         text,
    conditions   jsonb NOT NULL,
    after_id     bigint NOT NULL,
    max_events   integer NOT NULL DEFAULT 1,
    deadline     timestamptz,
    -- A stop's (`stop_execution`): how long its run may clean up after the cancellation before it is terminated
    -- (a cancel watch's is its condition's), and the reason its end records.
    grace_seconds double precision,
    reason       text,
    state        text NOT NULL DEFAULT 'open' CHECK (state IN ('open', 'answered', 'timed_out', 'abandoned')),
    matched      integer,
    event_ids    bigint[],
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at     timestamptz,
    told_at      timestamptz,
    UNIQUE (execution_id, run_id, seq)
);
CREATE INDEX run_waits_open ON orchestrator.run_waits (session_id) WHERE state = 'open';
CREATE INDEX run_waits_untold ON orchestrator.run_waits (ended_at) WHERE state = 'answered' AND told_at IS NULL;
CREATE INDEX run_waits_cancelling ON orchestrator.run_waits (told_at) WHERE kind = 'cancel' AND state = 'answered';

-- A wait's conditions compiled as a listener version's filter is (`core/rules.compile_filter`), and for a cancel
-- watch the path of the event's key, cut to the listener's `key_segments` as its lanes' keys are.
CREATE TABLE orchestrator.wait_conditions (
    wait_id      bigint NOT NULL REFERENCES orchestrator.run_waits (id) ON DELETE CASCADE,
    cond         integer NOT NULL,
    type_res     text[],
    alias_res    text[],
    where_conds  jsonb NOT NULL DEFAULT '[]',
    key_root     text,
    key_rest     text[] NOT NULL DEFAULT '{}',
    key_segments integer,
    PRIMARY KEY (wait_id, cond)
);

-- An open wait's probes: the listeners' keys (`orchestrator_probe_key`) under its session, so an event meets only
-- its own session's waits, and only those its keys reach. They go when the wait leaves `open`.
CREATE TABLE orchestrator.wait_probes (
    session_id text NOT NULL,
    probe_key  text NOT NULL,
    type_head  text NOT NULL,
    eq_path    text NOT NULL,
    wait_id    bigint NOT NULL REFERENCES orchestrator.run_waits (id) ON DELETE CASCADE,
    cond       integer NOT NULL
);
CREATE INDEX wait_probes_find ON orchestrator.wait_probes (session_id, probe_key, type_head);
CREATE INDEX wait_probes_wait ON orchestrator.wait_probes (wait_id);
-- The paths a session's waits probe by, read by each of its rounds.
CREATE INDEX wait_probes_paths ON orchestrator.wait_probes (session_id, eq_path);

-- A run cancelled (by `cancel_on`, or stopped with a grace) ends `cancelled`.
ALTER TABLE orchestrator.executions DROP CONSTRAINT executions_status_check;
-- Checked against the rows there without holding the table for the scan.
ALTER TABLE orchestrator.executions ADD CONSTRAINT executions_status_check
    CHECK (status IN ('running', 'completed', 'failed', 'stopped', 'cancelled')) NOT VALID;
ALTER TABLE orchestrator.executions VALIDATE CONSTRAINT executions_status_check;
