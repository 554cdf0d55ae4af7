-- The store's first shape: sessions, objects, threads, executions, listeners, outcomes and the event stream.

CREATE SEQUENCE event_ids;

-- A session's row is also its stream's write lock: every transaction that appends an event locks the row
-- (FOR UPDATE) before it draws the event's id and holds it until commit, so within one session ids are
-- drawn in commit order. A reader paging by id therefore never skips an event that commits late.
CREATE TABLE sessions (
    id              text PRIMARY KEY,
    alias           text UNIQUE,
    status          text NOT NULL DEFAULT 'open' CHECK (status IN ('open', 'closed')),
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    closed_at       timestamptz,
    last_event_id   bigint NOT NULL DEFAULT 0
);

-- The router's durable position in each session's stream. A routing round holds its session's row
-- (FOR UPDATE SKIP LOCKED) from reading the stream to saving the new position, so exactly one worker
-- routes a session at a time, and a worker that dies mid-round releases it with its connection.
CREATE TABLE routing_cursors (
    session_id      text PRIMARY KEY REFERENCES sessions (id) ON DELETE CASCADE,
    routed_event_id bigint NOT NULL DEFAULT 0
);

CREATE TABLE events (
    id              bigint PRIMARY KEY,
    session_id      text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    type            text NOT NULL,
    alias           text,
    item            jsonb,
    execution       jsonb,
    source          jsonb NOT NULL DEFAULT '{}',
    depth           integer NOT NULL DEFAULT 0,
    data            jsonb,
    created_at      timestamptz NOT NULL DEFAULT clock_timestamp(),
    -- A retried write carries the same key and finds the same event again.
    idempotency_key text
);
CREATE INDEX events_session_id ON events (session_id, id);
CREATE UNIQUE INDEX events_idempotency ON events (session_id, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE TABLE objects (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    alias      text NOT NULL,
    value      jsonb NOT NULL,
    rev        integer NOT NULL,
    updated_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, alias)
);
CREATE INDEX objects_prefix ON objects (session_id, alias text_pattern_ops);

CREATE TABLE thread_items (
    seq        bigint GENERATED ALWAYS AS IDENTITY,
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    alias      text NOT NULL,
    id         text NOT NULL,
    type       text NOT NULL,
    role       text,
    message    text,
    metadata   jsonb,
    source     jsonb NOT NULL DEFAULT '{}',
    event_id   bigint NOT NULL,
    created_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, alias, id)
);
CREATE INDEX thread_items_order ON thread_items (session_id, alias, seq);

CREATE TABLE executions (
    id         text PRIMARY KEY,
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    workflow   text NOT NULL,
    listener   text,
    lane       text,
    status     text NOT NULL DEFAULT 'running'
               CHECK (status IN ('running', 'completed', 'failed', 'stopped')),
    batch      jsonb,
    error      text,
    started_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    ended_at   timestamptz
);
CREATE INDEX executions_session ON executions (session_id, listener, started_at);
CREATE INDEX executions_running ON executions (session_id) WHERE status = 'running';

-- Listener declarations belong to the application, not to a session. Every save is a new version.
CREATE TABLE listener_versions (
    name         text NOT NULL,
    version      integer NOT NULL,
    body         jsonb NOT NULL,
    saved_at     timestamptz NOT NULL DEFAULT clock_timestamp(),
    effective_at timestamptz NOT NULL,
    PRIMARY KEY (name, version)
);

CREATE TABLE listeners (
    name         text PRIMARY KEY,
    version      integer NOT NULL,
    deleted_at   timestamptz
);

CREATE TABLE listener_switches (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    name       text NOT NULL,
    enabled    boolean NOT NULL,
    changed_at timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, name)
);

CREATE TABLE outcomes (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id   text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    listener     text NOT NULL,
    version      integer,
    lane         text NOT NULL,
    status       text NOT NULL,
    reason       text,
    first_id     bigint NOT NULL,
    last_id      bigint NOT NULL,
    event_ids    bigint[] NOT NULL,
    retry        integer NOT NULL DEFAULT 0,
    execution_id text,
    message      text,
    -- The lane's own key for the batch: recording an outcome twice (an activity retried) keeps one row.
    batch_key    text NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (session_id, listener, batch_key)
);
CREATE INDEX outcomes_recent ON outcomes (session_id, listener, id DESC);

-- Counts by status kept beside the rows, so that a session with thousands of batches answers at once.
CREATE TABLE outcome_counts (
    session_id text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    listener   text NOT NULL,
    status     text NOT NULL,
    count      bigint NOT NULL,
    PRIMARY KEY (session_id, listener, status)
);

-- What each lane last reported of itself, for list_session_listeners without querying every workflow.
CREATE TABLE lanes (
    session_id  text NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
    listener    text NOT NULL,
    lane        text NOT NULL,
    workflow_id text NOT NULL,
    pending     integer NOT NULL DEFAULT 0,
    in_flight   integer NOT NULL DEFAULT 0,
    retries_waiting integer NOT NULL DEFAULT 0,
    last_batch_first_id bigint,
    last_batch_last_id  bigint,
    updated_at  timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (session_id, listener, lane)
);

-- Routers wake on this instead of polling: one notification per session per committing transaction
-- (PostgreSQL folds identical notifications of one transaction into one).
CREATE FUNCTION notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('orchestrator_events', NEW.session_id);
    RETURN NULL;
END
$$;
CREATE TRIGGER events_notify AFTER INSERT ON events FOR EACH ROW EXECUTE FUNCTION notify_event();

CREATE FUNCTION notify_listener() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('orchestrator_listeners', NEW.name);
    RETURN NULL;
END
$$;
CREATE TRIGGER listeners_notify AFTER INSERT OR UPDATE ON listeners
    FOR EACH ROW EXECUTE FUNCTION notify_listener();
