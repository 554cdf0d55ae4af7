-- Schedules (SPEC section 6): the definition of each session's schedule, addressed by (session, alias), and
-- the result of each of its firings. Temporal's schedule (id `schedule:<session>:<alias>`) decides when a
-- schedule fires; this row is what a firing performs, so changing the target needs no Temporal update, and
-- a firing that finds no row (the schedule was deleted) does nothing.
CREATE TABLE schedules (
    session_id  text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    alias       text NOT NULL,
    schedule_id text NOT NULL UNIQUE,
    body        jsonb NOT NULL,
    enabled     boolean NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, alias)
);

-- One row per firing, kept once per scheduled time (a retried firing records nothing new). No foreign key
-- to `schedules`: a firing may finish just after its schedule is deleted, and then it is dropped quietly.
CREATE TABLE schedule_runs (
    id           bigserial PRIMARY KEY,
    session_id   text NOT NULL,
    alias        text NOT NULL,
    scheduled_at timestamptz NOT NULL,
    status       text NOT NULL CHECK (status IN ('success', 'invocation_error', 'access_error')),
    message      text,
    event_id     bigint,
    execution_id text,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (session_id, alias, scheduled_at)
);
CREATE INDEX schedule_runs_recent ON schedule_runs (session_id, alias, id DESC);
