-- The lane engine by reference: a lane's events stay in the store, and its workflow keeps only timers.
--
-- Each lane gets a number and two watermarks: `routed_through` (the newest event the router queued for it)
-- and `fired_through` (the newest one a batch has taken). The router writes its queue rows (`lane_events`)
-- and moves `routed_through` in the transaction that saves its position; a fire takes the lane's row lock,
-- reads what is queued past `fired_through`, records the batch (`batches`) and moves `fired_through`. Both
-- hold the lane's row lock, so a lane that goes from empty to pending is always seen by one of them: the
-- router nudges it, or the fire reports that more is pending. Runs hold their slots as rows (`lane_runs`),
-- taken by the fire that starts them and released by the record of their end, in one place.

ALTER TABLE lanes ADD COLUMN id bigint GENERATED ALWAYS AS IDENTITY;
ALTER TABLE lanes ADD CONSTRAINT lanes_id_key UNIQUE (id);
ALTER TABLE lanes ADD COLUMN routed_through bigint NOT NULL DEFAULT 0;
-- The newest queued event that is not the lane's own `lane.idle`, and its commit: the lane's silence counts
-- from it.
ALTER TABLE lanes ADD COLUMN last_event_id bigint NOT NULL DEFAULT 0;
ALTER TABLE lanes ADD COLUMN last_event_at timestamptz;
-- The listener's window when the router last queued for the lane: how long an unfired lane may look quiet
-- before the router's poll nudges it again (a nudge lost with a crashed router, a lane terminated).
ALTER TABLE lanes ADD COLUMN window_seconds double precision NOT NULL DEFAULT 0;
-- Set by a fire that found no slot free (the lane's run in flight, or every key slot of the listener taken):
-- the record of a run's end that frees a slot nudges such a lane, and the router's poll leaves it alone.
ALTER TABLE lanes ADD COLUMN waiting_slot boolean NOT NULL DEFAULT false;
ALTER TABLE lanes ADD COLUMN nudged_at timestamptz NOT NULL DEFAULT clock_timestamp();
ALTER TABLE lanes DROP COLUMN pending, DROP COLUMN in_flight, DROP COLUMN retries_waiting,
    DROP COLUMN last_batch_first_id, DROP COLUMN last_batch_last_id, DROP COLUMN updated_at;
-- Lanes of the by-value engine handed everything they were sent to their own workflows; the new lanes start
-- from what the router routed after them.
UPDATE lanes SET routed_through = fired_through;
CREATE INDEX lanes_unfired ON lanes (nudged_at) WHERE routed_through > fired_through AND NOT waiting_slot;

-- When the router queued it: what `explain_event` and the crash suite read (commit to lane).
CREATE TABLE lane_events (
    lane_id   bigint NOT NULL REFERENCES lanes (id) ON DELETE CASCADE,
    event_id  bigint NOT NULL,
    queued_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (lane_id, event_id)
);

-- Every batch a lane took (a repeat of a failed run is a batch of its own, with the same events): which
-- events it consumed and which it kept as entries (`distinct_by`), and whether it counts as a fire for the
-- throttle (counted when taken, under the listener's lock, so parallel lanes cannot all pass the check).
-- A batch is `claimed` until its action is done; a fire that died in between finds it and finishes it.
CREATE TABLE batches (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    lane_id    bigint NOT NULL REFERENCES lanes (id) ON DELETE CASCADE,
    session_id text NOT NULL,
    listener   text NOT NULL,
    first_id   bigint NOT NULL,
    last_id    bigint NOT NULL,
    event_ids  bigint[] NOT NULL,
    entry_ids  bigint[] NOT NULL,
    retry      integer NOT NULL DEFAULT 0,
    -- A batch asked for again (`replay_batch`, `redeliver`): the how-many-th, 0 for the lane's own.
    replay     integer NOT NULL DEFAULT 0,
    replay_of  bigint,
    state      text NOT NULL DEFAULT 'claimed' CHECK (state IN ('claimed', 'done')),
    -- What the guards decided when it was taken: null to act, else `{"consumed": true}` or the outcome's
    -- `{"status", "reason", "message"}`; a fire that finishes a dead one's batch acts on the same verdict.
    verdict    jsonb,
    counted    boolean NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- For a batch whose run took a slot: when the slot was given back (its last attempt's end recorded, or
    -- its start stopped). From `created_at` to this, the batch held its lane.
    released_at timestamptz,
    UNIQUE (lane_id, first_id, retry, replay)
);
CREATE INDEX batches_fires ON batches (session_id, listener, created_at) WHERE counted;
CREATE INDEX batches_claimed ON batches (lane_id) WHERE state = 'claimed';

-- A run's slot in its lane, from the fire that starts it to the record of its end (through the backoff of its
-- repeats: `waiting` until `due_at`). `plan` is what a repeat needs to start again.
CREATE TABLE lane_runs (
    run_key      text PRIMARY KEY,
    lane_id      bigint NOT NULL REFERENCES lanes (id) ON DELETE CASCADE,
    batch_id     bigint NOT NULL REFERENCES batches (id) ON DELETE CASCADE,
    execution_id text NOT NULL,
    retry        integer NOT NULL DEFAULT 0,
    state        text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'waiting')),
    due_at       timestamptz,
    plan         jsonb NOT NULL,
    checked_at   timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX lane_runs_lane ON lane_runs (lane_id);
CREATE INDEX lane_runs_unchecked ON lane_runs (checked_at) WHERE state = 'running';

-- What the record of a run's end needs when a sweep finds the run closed without having told it (terminated
-- from outside): its run (a listener's batch) and depth; `checked_at` paces the sweep.
ALTER TABLE executions ADD COLUMN run_key text, ADD COLUMN depth integer NOT NULL DEFAULT 0,
    ADD COLUMN checked_at timestamptz NOT NULL DEFAULT clock_timestamp();
CREATE INDEX executions_unchecked ON executions (checked_at) WHERE status = 'running';

-- Routing no longer holds events back, so it needs neither generations nor leases.
ALTER TABLE routing_cursors DROP COLUMN generation, DROP COLUMN router, DROP COLUMN router_until;
